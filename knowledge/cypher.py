"""Cypher of the knowledge app. Always parameterised; every query is scoped by $project_id."""

from __future__ import annotations

from django.conf import settings


def SCHEMA() -> list[str]:  # noqa: N802 - the schema hook name shared by all apps
    dims = settings.EMBEDDINGS_DIMENSIONS
    vector = (
        "CREATE VECTOR INDEX {name} IF NOT EXISTS FOR (n:{label}) ON (n.embedding) "
        "OPTIONS {{indexConfig: {{`vector.dimensions`: {dims}, `vector.similarity_function`: 'cosine'}}}}"
    )
    return [
        "CREATE CONSTRAINT document_key IF NOT EXISTS FOR (d:Document) REQUIRE (d.project_id, d.doc_key) IS UNIQUE",
        "CREATE CONSTRAINT entity_key IF NOT EXISTS FOR (e:Entity) REQUIRE (e.project_id, e.key) IS UNIQUE",
        "CREATE CONSTRAINT source_path IF NOT EXISTS FOR (s:Source) REQUIRE (s.project_id, s.path) IS UNIQUE",
        "DROP INDEX chunk_text IF EXISTS",
        # No fulltext index spans every project's chunks either: each project has its own, created
        # before its first chunk is written (knowledge.tenancy), and while one is still being built
        # (after an import or an analyzer change) search ranks by vector and says so. A shared
        # index cost every chunk written a Lucene update at commit (a quarter of Neo4j's CPU in
        # an import's node phase, docs/benchmarks.md).
        "DROP INDEX chunk_fulltext IF EXISTS",
        "CREATE FULLTEXT INDEX entity_text IF NOT EXISTS FOR (e:Entity) ON EACH [e.name, e.description]",
        # No vector index spans every project's chunks: a small project is scanned exactly and a large
        # one has its own index (knowledge.tenancy), so a database-wide HNSW graph served only the
        # minutes before a large project's own index came online, and cost every chunk written an
        # HNSW insert at commit (60 % of Neo4j's CPU in an import, docs/benchmarks.md).
        "DROP INDEX chunk_embedding IF EXISTS",
        # Entities keep their name embeddings (entity resolution compares them in Python), but no
        # query searches them by vector, so an HNSW index on them would cost every ingestion and
        # community rebuild an insert per entity for nothing. Seed 002 names vector
        # indexes on chunks and communities only.
        "DROP INDEX entity_embedding IF EXISTS",
        vector.format(name="community_embedding", label="Community", dims=dims),
    ]


DOCUMENTS_SUBMIT = """
UNWIND $docs AS doc
MERGE (d:Document {project_id: $project_id, doc_key: doc.doc_key})
  ON CREATE SET d.id = doc.id, d.created_at = datetime(), d.status = 'new'
WITH d, doc, (d.status IN ['ready', 'pending', 'processing'] AND d.content_hash = doc.content_hash) AS unchanged
FOREACH (_ IN CASE WHEN unchanged THEN [] ELSE [1] END |
  SET d.title = doc.title, d.source_path = doc.source_path, d.mime_type = doc.mime_type,
      d.author = doc.author, d.metadata_json = doc.metadata_json, d.meta_kv = doc.meta_kv, d.content = doc.content,
      d.content_hash = doc.content_hash, d.status = 'pending', d.error = null, d.updated_at = datetime(),
      d.graph_json = doc.graph_json, d.references = doc.references)
RETURN d.id AS id, doc.position AS position, unchanged
"""

DOCUMENT_IDS_BY_KEY = """
MATCH (d:Document {project_id: $project_id}) WHERE d.id IN $refs OR d.source_path IN $refs
RETURN d.id AS id, d.source_path AS source_path
"""

BATCH_CLAIM = """
MATCH (d:Document {project_id: $project_id}) WHERE d.id IN $ids AND d.status IN ['pending', 'processing']
SET d.status = 'processing'
RETURN d.id AS id, d.content AS content, d.content_hash AS content_hash, d.title AS title,
       d.source_path AS source_path, d.graph_json AS graph_json, coalesce(d.references, []) AS references
"""

OLD_CHUNKS_REMOVE = """
MATCH (d:Document {project_id: $project_id})-[:HAS_CHUNK]->(c:Chunk)
WHERE d.id IN $document_ids
OPTIONAL MATCH (c)-[:HAS_ENTITY]->(e:Entity)
WITH collect(DISTINCT c) AS chunks, collect(DISTINCT e.id) AS touched
WITH chunks, touched, [c IN chunks | c.id] AS chunk_ids
FOREACH (c IN chunks | DETACH DELETE c)
RETURN chunk_ids, touched
"""

RELATED_PRUNE = """
MATCH (a:Entity {project_id: $project_id})-[r:RELATED]-(:Entity)
WHERE a.id IN $entity_ids
WITH DISTINCT r
WITH r, [i IN range(0, size(r.chunk_ids) - 1) WHERE NOT r.chunk_ids[i] IN $chunk_ids] AS keep
WITH r, [i IN keep | r.chunk_ids[i]] AS ids, [i IN keep | r.chunk_weights[i]] AS weights
SET r.chunk_ids = ids, r.chunk_weights = weights, r.weight = reduce(s = 0.0, w IN weights | s + w)
WITH r WHERE size(r.chunk_ids) = 0
DELETE r
"""

ORPHAN_ENTITIES_DELETE = """
MATCH (e:Entity {project_id: $project_id})
WHERE e.id IN $entity_ids AND NOT ()-[:HAS_ENTITY]->(e) AND NOT ()-[:MENTIONS]->(e)
DETACH DELETE e
RETURN count(*) AS deleted
"""

CHUNKS_CREATE = """
UNWIND $chunks AS ch
MATCH (d:Document {project_id: $project_id, id: ch.document_id})
CREATE (c:Chunk {id: ch.id, project_id: $project_id, document_id: ch.document_id, index: ch.index,
                 text: ch.text, search_text: ch.search_text, token_count: ch.token_count,
                 embedding: ch.embedding})
SET c:$($chunk_label)
CREATE (d)-[:HAS_CHUNK]->(c)
"""

NEXT_CHUNK_LINK = """
UNWIND $links AS link
WITH link WHERE $project_id IS NOT NULL
MATCH (a:Chunk {id: link.from}), (b:Chunk {id: link.to})
CREATE (a)-[:NEXT_CHUNK]->(b)
"""

ENTITY_KEYS_EXISTING = """
MATCH (e:Entity {project_id: $project_id}) WHERE e.key IN $keys RETURN e.key AS key
"""

# Lexical neighbours of new entity names (same project and type) through the entity fulltext index.
ENTITY_LEXICAL_NEIGHBOURS = """
UNWIND $candidates AS cand
CALL db.index.fulltext.queryNodes('entity_text', cand.query, {limit: $limit}) YIELD node, score
WITH cand, node, score
WHERE node.project_id = $project_id AND node.type = cand.type AND node.key <> cand.key
WITH cand, node ORDER BY score DESC
WITH cand, collect({key: node.key, name: node.name, embedding: node.embedding})[0..5] AS matches
RETURN cand.key AS key, matches
"""

ENTITIES_WITHOUT_EMBEDDING = """
MATCH (e:Entity {project_id: $project_id}) WHERE e.embedding IS NULL
RETURN e.id AS id, e.name AS name LIMIT $limit
"""

ENTITY_EMBEDDINGS_SET = """
UNWIND $rows AS row
MATCH (e:Entity {project_id: $project_id, id: row.id})
SET e.embedding = row.embedding
"""

ENTITIES_MERGE = """
UNWIND $entities AS ent
MERGE (e:Entity {project_id: $project_id, key: ent.key})
  ON CREATE SET e.id = ent.id, e.name = ent.name, e.type = ent.type, e.description = ent.description,
                e.embedding = ent.embedding
  ON MATCH SET e.embedding = coalesce(e.embedding, ent.embedding)
  ON MATCH SET e.description = CASE
      WHEN ent.description = '' OR e.description CONTAINS ent.description OR size(e.description) > 2000
      THEN e.description ELSE e.description + '\n' + ent.description END
"""

# The chunks are created in the same transaction and mention rows are distinct: CREATE, not MERGE.
MENTIONS_CREATE = """
UNWIND $mentions AS m
MATCH (c:Chunk {id: m.chunk_id}), (e:Entity {project_id: $project_id, key: m.key})
CREATE (c)-[:HAS_ENTITY]->(e)
"""

RELATED_ADD = """
UNWIND $relations AS rel
MATCH (a:Entity {project_id: $project_id, key: rel.a}), (b:Entity {project_id: $project_id, key: rel.b})
MERGE (a)-[r:RELATED]->(b)
  ON CREATE SET r.chunk_ids = [], r.chunk_weights = [], r.weight = 0.0, r.description = rel.description
SET r.chunk_ids = r.chunk_ids + rel.chunk_id, r.chunk_weights = r.chunk_weights + rel.weight,
    r.weight = r.weight + rel.weight
"""

DOCUMENTS_FINISH = """
UNWIND $docs AS doc
MATCH (d:Document {project_id: $project_id, id: doc.id})
SET d.status = 'ready', d.error = null, d.chunk_count = doc.chunks, d.entity_count = doc.entities,
    d.relation_count = doc.relations, d.updated_at = datetime()
REMOVE d.graph_json
WITH d, doc
CALL {
  WITH d, doc
  WITH d, doc WHERE doc.source_path IS NOT NULL
  MERGE (s:Source {project_id: $project_id, path: doc.source_path})
    ON CREATE SET s.id = randomUUID()
  MERGE (d)-[:SOURCED_FROM]->(s)
}
CALL {
  WITH d, doc
  UNWIND doc.references AS ref_id
  MATCH (t:Document {project_id: $project_id, id: ref_id})
  MERGE (d)-[:REFERENCES]->(t)
}
RETURN count(d) AS finished
"""

# A document another run of the batch finished meanwhile stays ready.
DOCUMENTS_FAIL = """
UNWIND $docs AS doc
MATCH (d:Document {project_id: $project_id, id: doc.id})
WHERE d.status IN ['pending', 'processing']
SET d.status = 'failed', d.error = doc.error, d.updated_at = datetime()
"""

# A re-run ingestion job: its failed documents are pending again.
DOCUMENTS_RETRY = """
MATCH (d:Document {project_id: $project_id}) WHERE d.id IN $ids AND d.status = 'failed'
SET d.status = 'pending', d.error = null, d.updated_at = datetime()
"""

BATCH_WRITTEN = """
MATCH (d:Document {project_id: $project_id}) WHERE d.id IN $ids
RETURN count(d) AS total, count(CASE WHEN d.status = 'ready' THEN 1 END) AS ready
"""

COMMUNITIES_MARK_STALE = "MATCH (c:Community {project_id: $project_id}) SET c.stale = true"

DOCUMENT_GET = """
MATCH (d:Document {project_id: $project_id, id: $id})
RETURN d {.id, .title, .source_path, .mime_type, .author, .content_hash, .status, .error,
          .metadata_json, .chunk_count, .entity_count, .relation_count,
          created_at: toString(d.created_at), updated_at: toString(d.updated_at)} AS doc
"""

DOCUMENTS_LIST = """
MATCH (d:Document {project_id: $project_id})
WHERE $status IS NULL OR d.status = $status
WITH d ORDER BY d.created_at DESC, d.id
SKIP $offset LIMIT $limit
RETURN d {.id, .title, .source_path, .mime_type, .author, .content_hash, .status, .error,
          .metadata_json, .chunk_count, .entity_count, .relation_count,
          created_at: toString(d.created_at), updated_at: toString(d.updated_at)} AS doc
"""

DOCUMENTS_COUNT = """
MATCH (d:Document {project_id: $project_id}) WHERE $status IS NULL OR d.status = $status RETURN count(d) AS n
"""

CHUNK_GET = """
MATCH (ch:Chunk {id: $id})
WHERE ch.project_id = $project_id
OPTIONAL MATCH (d:Document {id: ch.document_id})
WHERE d.project_id = $project_id
RETURN ch.id AS chunk_id, ch.document_id AS document_id, coalesce(d.title, d.id, 'unknown') AS document_name,
       ch.index AS index, coalesce(ch.text, '') AS text
"""

DOCUMENT_DELETE = """
MATCH (d:Document {project_id: $project_id, id: $id})
OPTIONAL MATCH (d)-[:SOURCED_FROM]->(s:Source)
DETACH DELETE d
WITH s WHERE s IS NOT NULL AND NOT (s)<-[:SOURCED_FROM]-()
DELETE s
"""

# --- communities --------------------------------------------------------------------------------

ENTITY_GRAPH = """
MATCH (a:Entity {project_id: $project_id})-[r:RELATED]->(b:Entity)
RETURN a.id AS source, b.id AS target, r.weight AS weight
"""

COMMUNITY_MATERIAL = """
UNWIND $communities AS com
UNWIND com.entity_ids AS entity_id
MATCH (e:Entity {project_id: $project_id, id: entity_id})
OPTIONAL MATCH (c:Chunk)-[:HAS_ENTITY]->(e)
WITH com, e, count(c) AS mentions, collect(c.text)[0..2] AS texts
RETURN com.key AS key, collect({name: e.name, description: e.description, mentions: mentions, texts: texts}) AS members
"""

COMMUNITIES_DELETE = "MATCH (c:Community {project_id: $project_id}) DETACH DELETE c"

COMMUNITIES_CREATE = """
UNWIND $communities AS com
CREATE (c:Community {id: com.id, project_id: $project_id, community: com.community, level: com.level,
                     title: com.title, summary: com.summary, rank: com.rank, size: com.size,
                     stale: false, embedding: com.embedding})
"""

COMMUNITY_MEMBERS_LINK = """
UNWIND $links AS link
MATCH (e:Entity {project_id: $project_id, id: link.entity_id}), (c:Community {id: link.community_id})
CREATE (e)-[:IN_COMMUNITY]->(c)
"""

COMMUNITY_PARENTS_LINK = """
UNWIND $links AS link
MATCH (child:Community {id: link.child}), (parent:Community {id: link.parent})
CREATE (child)-[:IN_COMMUNITY]->(parent)
"""

CHUNK_COMMUNITIES_LINK = """
MATCH (c:Community {project_id: $project_id, level: 0})<-[:IN_COMMUNITY]-(e:Entity)<-[:HAS_ENTITY]-(ch:Chunk)
WITH DISTINCT ch, c
CREATE (ch)-[:IN_COMMUNITY]->(c)
"""

# reindex_chunks: a page of a project's documents (by id) with their chunks in order
REINDEX_DOCUMENTS_PAGE = """
MATCH (d:Document {project_id: $project_id}) WHERE d.id > $after
WITH d ORDER BY d.id LIMIT $limit
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk)
WITH d, c ORDER BY c.index
RETURN d.id AS id, d.title AS title, d.content AS content,
       [x IN collect(c) | {id: x.id, text: x.text}] AS chunks
ORDER BY id
"""

REINDEX_CHUNKS_SET = """
UNWIND $chunks AS ch
MATCH (c:Chunk {id: ch.id}) WHERE c.project_id = $project_id
SET c.search_text = ch.search_text
FOREACH (_ IN CASE WHEN ch.embedding IS NULL THEN [] ELSE [1] END | SET c.embedding = ch.embedding)
SET c:$($chunk_label)
"""

# --- title links: (:Chunk)-[:NAMES]->(:Document) when the chunk names the document's title ----------

PROJECT_TITLES = """
MATCH (d:Document {project_id: $project_id}) WHERE d.status <> 'failed'
RETURN d.id AS id, d.title AS title
"""

# Chunks of other documents that may name one of the batch's titles (the caller verifies each).
TITLE_CANDIDATES = """
CALL db.index.fulltext.queryNodes($index, $lucene, {limit: $limit}) YIELD node
WITH node WHERE node.project_id = $project_id AND NOT node.document_id IN $document_ids
RETURN node.id AS chunk_id, node.document_id AS document_id, node.text AS text
"""

# A re-ingested document may have a new title: links to it are found again.
TITLE_LINKS_TO_REMOVE = """
MATCH (:Chunk)-[r:NAMES]->(d:Document {project_id: $project_id}) WHERE d.id IN $document_ids
DELETE r
"""

TITLE_LINKS_CREATE = """
UNWIND $links AS link
MATCH (c:Chunk {id: link.chunk_id}) WHERE c.project_id = $project_id
MATCH (d:Document {project_id: $project_id, id: link.document_id})
MERGE (c)-[:NAMES]->(d)
"""

# --- retention: orphaned entities --------------------------------------------------------------------------

# An entity no chunk and no message or summary refers to is stamped the first time a run sees it
# orphaned; a reference found later removes the stamp. It is pruned once the stamp is older than the age.
ENTITIES_UNSTAMP = """
MATCH (e:Entity {project_id: $project_id})
WHERE e.orphaned_at IS NOT NULL
  AND (EXISTS { (:Chunk)-[:HAS_ENTITY]->(e) } OR EXISTS { ()-[:MENTIONS]->(e) })
REMOVE e.orphaned_at
RETURN count(e) AS unstamped
"""

ENTITIES_STAMP = """
MATCH (e:Entity {project_id: $project_id})
WHERE e.orphaned_at IS NULL
  AND NOT EXISTS { (:Chunk)-[:HAS_ENTITY]->(e) } AND NOT EXISTS { ()-[:MENTIONS]->(e) }
WITH e LIMIT $batch
SET e.orphaned_at = $now
RETURN count(e) AS stamped
"""

ENTITIES_ORPHANED_PREVIEW = """
MATCH (e:Entity {project_id: $project_id})
WHERE NOT EXISTS { (:Chunk)-[:HAS_ENTITY]->(e) } AND NOT EXISTS { ()-[:MENTIONS]->(e) }
RETURN count(CASE WHEN e.orphaned_at IS NOT NULL AND e.orphaned_at < $cutoff THEN 1 END) AS entities,
       count(CASE WHEN e.orphaned_at IS NULL THEN 1 END) AS newly_orphaned
"""

ENTITIES_PRUNE = """
MATCH (e:Entity {project_id: $project_id})
WHERE e.orphaned_at IS NOT NULL AND e.orphaned_at < $cutoff
  AND NOT EXISTS { (:Chunk)-[:HAS_ENTITY]->(e) } AND NOT EXISTS { ()-[:MENTIONS]->(e) }
WITH e LIMIT $batch
DETACH DELETE e
RETURN count(*) AS deleted
"""

COMMUNITIES_MARK_STALE = """
MATCH (c:Community {project_id: $project_id})
SET c.stale = true
RETURN count(c) AS marked
"""

DOCUMENT_SOURCE = """
MATCH (d:Document {id: $id}) WHERE d.project_id = $project_id
RETURN d {.title, .content, .source_path, .mime_type, .author, .metadata_json} AS doc
"""

# Entities whose normalised name is one of the grams (keys are "<normalised name>|<TYPE>"): an index
# seek per gram on the (project_id, key) constraint.
ENTITIES_ANY = "MATCH (e:Entity {project_id: $project_id}) RETURN e.id AS id LIMIT 1"

ENTITIES_NAMED = """
UNWIND $grams AS gram
MATCH (e:Entity {project_id: $project_id}) WHERE e.key STARTS WITH gram + '|'
RETURN gram, collect(elementId(e)) AS refs
"""

# --- references (seed 003, "Reference Querying System") -------------------------------------------

# What a caller's reference names: a document id, a chunk id (its document too) or a source path (the
# most recently updated document ingested from it). Unknown and other projects' ids give no row.
REFERENCES_RESOLVE = """
UNWIND $refs AS ref
OPTIONAL MATCH (d:Document {id: ref}) WHERE d.project_id = $project_id
OPTIONAL MATCH (ch:Chunk {id: ref}) WHERE d IS NULL AND ch.project_id = $project_id
OPTIONAL MATCH (cd:Document {id: ch.document_id}) WHERE cd.project_id = $project_id
CALL (ref, d, ch) {
  OPTIONAL MATCH (pd:Document {source_path: ref})
  WHERE d IS NULL AND ch IS NULL AND pd.project_id = $project_id
  RETURN pd ORDER BY pd.updated_at DESC LIMIT 1
}
WITH ref, coalesce(d, cd, pd) AS doc, ch
WHERE doc IS NOT NULL
RETURN ref, doc.id AS document_id, elementId(doc) AS document_ref, ch.id AS chunk_id,
       CASE WHEN ch IS NULL THEN null ELSE elementId(ch) END AS chunk_ref
"""

DOCUMENTS_BRIEF = """
UNWIND $ids AS wanted
MATCH (d:Document {id: wanted}) WHERE d.project_id = $project_id
RETURN d.id AS id, d.title AS title, d.author AS author, d.source_path AS source_path,
       toString(d.updated_at) AS updated_at
"""

DOCUMENT_EXISTS = """
MATCH (d:Document {id: $id}) WHERE d.project_id = $project_id
RETURN d.id AS id
"""

# A document's references to other documents ("out") and the documents referring to it ("in").
DOCUMENT_REFERENCES = """
MATCH (d:Document {id: $id}) WHERE d.project_id = $project_id
CALL (d) {
  MATCH (d)-[r:REFERENCES]->(o:Document) WHERE $out
  RETURN o, r, 'out' AS direction
  UNION
  MATCH (o:Document)-[r:REFERENCES]->(d) WHERE $in
  RETURN o, r, 'in' AS direction
}
RETURN o.id AS id, o.title AS title, o.author AS author, o.source_path AS source_path,
       toString(o.updated_at) AS updated_at, direction, coalesce(r.type, 'references') AS type,
       r.context AS context, toString(r.created_at) AS created_at
ORDER BY direction DESC, o.title, o.id
SKIP $offset LIMIT $limit
"""

# One breadth-first step of the citation graph: the documents the frontier cites ("cites") or is
# cited by ("cited_by"), capped so a hub cannot flood the answer.
CITATION_STEP = {
    "cites": """
UNWIND $frontier AS fid
MATCH (a:Document {id: fid}) WHERE a.project_id = $project_id
MATCH (a)-[:REFERENCES]->(o:Document)
RETURN DISTINCT o.id AS id LIMIT $limit
""",
    "cited_by": """
UNWIND $frontier AS fid
MATCH (a:Document {id: fid}) WHERE a.project_id = $project_id
MATCH (o:Document)-[:REFERENCES]->(a)
RETURN DISTINCT o.id AS id LIMIT $limit
""",
}

# The REFERENCES edges among a set of documents (the citation graph's edges).
REFERENCE_EDGES = """
MATCH (a:Document)-[r:REFERENCES]->(b:Document)
WHERE a.project_id = $project_id AND a.id IN $ids AND b.id IN $ids
RETURN a.id AS source, b.id AS target, coalesce(r.type, 'references') AS type
"""

REFERENCE_ADD = """
MATCH (a:Document {id: $from_id}) WHERE a.project_id = $project_id
MATCH (b:Document {id: $to_id}) WHERE b.project_id = $project_id
OPTIONAL MATCH (a)-[old:REFERENCES]->(b)
MERGE (a)-[r:REFERENCES]->(b)
  ON CREATE SET r.created_at = datetime()
SET r.type = $type, r.context = $context
RETURN old IS NULL AS created, toString(r.created_at) AS created_at
"""

# Documents whose source path matches a glob, translated to an anchored regular expression by
# knowledge.selectors (never a caller's regex); `prefix` is the glob's literal start, so the source
# path index narrows the candidates first.
DOCUMENTS_BY_SOURCE = """
MATCH (d:Document {project_id: $project_id})
WHERE d.source_path STARTS WITH $prefix AND d.source_path =~ $pattern
  AND ($status IS NULL OR d.status = $status)
WITH d ORDER BY d.source_path, d.id
SKIP $offset LIMIT $limit
RETURN d {.id, .title, .source_path, .mime_type, .author, .content_hash, .status, .error,
          .metadata_json, .chunk_count, .entity_count, .relation_count,
          created_at: toString(d.created_at), updated_at: toString(d.updated_at)} AS doc
"""

DOCUMENTS_BY_SOURCE_COUNT = """
MATCH (d:Document {project_id: $project_id})
WHERE d.source_path STARTS WITH $prefix AND d.source_path =~ $pattern
  AND ($status IS NULL OR d.status = $status)
RETURN count(d) AS n
"""

# The start-up warm-up's questions: titles of ready documents, spread over the project by id
WARM_UP_TITLES = """
MATCH (d:Document) WHERE d.project_id = $project_id AND d.status = 'ready' AND d.title IS NOT NULL
RETURN d.title AS title ORDER BY d.id LIMIT $limit
"""

# The start-up warm-up reads the records search results are built from (each chunk's text and its
# document), up to $limit chunks, so the first results after a start find them in Neo4j's page cache
WARM_UP_CHUNKS_READ = """
MATCH (c:Chunk) WHERE c.project_id = $project_id
WITH c LIMIT $limit
OPTIONAL MATCH (d:Document {id: c.document_id}) WHERE d.project_id = $project_id
RETURN count(c) AS chunks, sum(size(c.text)) AS chars, count(d.title) AS documents
"""
