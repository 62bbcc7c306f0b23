"""Cypher of the retrieval app. Always parameterised; every query is scoped by $project_id.

Retrievers return `chunk_id, score`; a second query turns the fused candidates into items, through
an enrichment profile when one is chosen (PROFILE_WRAPPER).
"""

from __future__ import annotations

# Chunks of a project (all of them, or those of $document_ids): exact scan or the project's vector
# index, and the over-fetch of a document-filtered index query.
SCOPE_SIZE = """
MATCH (c:Chunk {project_id: $project_id})
WHERE $document_ids IS NULL OR c.document_id IN $document_ids
RETURN count(c) AS size
"""

# Exact cosine over the scope: the true top-k of a project whatever else the database holds.
VECTOR_EXACT = """
MATCH (node:Chunk {project_id: $project_id})
WHERE ($document_ids IS NULL OR node.document_id IN $document_ids) AND node.embedding IS NOT NULL
WITH node, vector.similarity.cosine(node.embedding, $vector) AS score
ORDER BY score DESC, node.id
LIMIT $limit
RETURN node.id AS chunk_id, score
"""

# A project's own index knows nothing of document filters: over-fetch, keep this scope's chunks, and
# score them exactly (the index ranks on quantised vectors).
VECTOR_INDEX = """
CALL db.index.vector.queryNodes($index, $fetch, $vector) YIELD node
WITH node
WHERE node.project_id = $project_id AND ($document_ids IS NULL OR node.document_id IN $document_ids)
WITH node, vector.similarity.cosine(node.embedding, $vector) AS score
RETURN node.id AS chunk_id, score
ORDER BY score DESC, chunk_id
LIMIT $limit
"""

# The best hit of hybrid's first round, whose text and embedding feed the second round.
FEEDBACK_SOURCE = """
MATCH (node:Chunk {id: $chunk_id})
WHERE node.project_id = $project_id
RETURN node.text AS text, node.embedding AS embedding
"""

# $index is the project's own fulltext index; $lucene carries the document clauses, and the WHERE
# repeats them.
FULLTEXT = """
CALL db.index.fulltext.queryNodes($index, $lucene, {limit: $fetch}) YIELD node, score
WITH node, score
WHERE node.project_id = $project_id AND ($document_ids IS NULL OR node.document_id IN $document_ids)
  AND ($chunk_ids IS NULL OR node.id IN $chunk_ids)
RETURN node.id AS chunk_id, score
ORDER BY score DESC, chunk_id
LIMIT $limit
"""

# BM25 among a given set of chunks, the Lucene query already narrowed to their documents: `fetched`
# tells the caller whether Lucene had more to give (it filled $fetch); the caller orders the hits.
FULLTEXT_AMONG = """
CALL db.index.fulltext.queryNodes($index, $lucene, {limit: $fetch}) YIELD node, score
WITH collect([node, score]) AS raw
WITH size(raw) AS fetched,
     [pair IN raw WHERE pair[0].project_id = $project_id AND pair[0].id IN $chunk_ids
      AND ($document_ids IS NULL OR pair[0].document_id IN $document_ids)
      | {chunk_id: pair[0].id, score: pair[1]}] AS hits
RETURN fetched, hits
"""

# Exact cosine over a given set of chunks (DRIFT's community-scoped follow-ups): looked up by id.
VECTOR_EXACT_IDS = """
UNWIND $chunk_ids AS cid
MATCH (node:Chunk {id: cid})
WHERE node.project_id = $project_id AND node.embedding IS NOT NULL
  AND ($document_ids IS NULL OR node.document_id IN $document_ids)
WITH node, vector.similarity.cosine(node.embedding, $vector) AS score
ORDER BY score DESC, node.id
LIMIT $limit
RETURN node.id AS chunk_id, score
"""

DOCUMENTS_MATCHING = """
MATCH (d:Document {project_id: $project_id})
WHERE ($ids IS NULL OR d.id IN $ids)
  AND ($prefix IS NULL OR d.source_path STARTS WITH $prefix)
  AND all(pair IN $pairs WHERE pair IN coalesce(d.meta_kv, []))
RETURN d.id AS id
LIMIT $limit
"""

HITS_HYDRATE = """
UNWIND $hits AS hit
MATCH (node:Chunk {id: hit.chunk_id})
WHERE node.project_id = $project_id
OPTIONAL MATCH (doc:Document {id: node.document_id})
WHERE doc.project_id = $project_id
RETURN node.id AS chunk_id, node.document_id AS document_id,
       coalesce(doc.title, doc.id, 'unknown') AS document_name, node.text AS text, hit.score AS score,
       node.index AS chunk_index, doc.source_path AS source_path, doc.metadata_json AS metadata_json
"""

# An enrichment profile runs once per hit inside this wrapper: `node` and `score` are in scope, its
# RETURN columns come out beside the item's own fields. {body} is a stored, validated profile;
# {columns} its output columns, backtick-quoted.
PROFILE_WRAPPER = """
UNWIND $hits AS hit
MATCH (__node:Chunk {{id: hit.chunk_id}})
WHERE __node.project_id = $project_id
OPTIONAL MATCH (__doc:Document {{id: __node.document_id}})
WHERE __doc.project_id = $project_id
WITH __node, __doc, hit.score AS __score
CALL (__node, __score) {{
WITH __node AS node, __score AS score
{body}
}}
RETURN __node.id AS __chunk_id, __node.document_id AS __document_id,
       coalesce(__doc.title, __doc.id, 'unknown') AS __document_name, __node.index AS __chunk_index,
       __doc.source_path AS __source_path, __doc.metadata_json AS __metadata_json, {columns}
"""

# --- graph mode: the project's passage graph (retrieval/passage_graph.py) ----------------------------

# Documents with their chunks, and the title links between them, read in one transaction.
PASSAGE_GRAPH_DOCUMENTS = """
MATCH (d:Document {project_id: $project_id})
WHERE d.status <> 'failed'
OPTIONAL MATCH (d)-[:HAS_CHUNK]->(c:Chunk)
WITH d, c ORDER BY c.chunk_index
RETURN d.id AS id, d.title AS title, [x IN collect(c.id) WHERE x IS NOT NULL] AS chunk_ids
"""

PASSAGE_GRAPH_LINKS = """
MATCH (c:Chunk {project_id: $project_id})-[:NAMES]->(d:Document {project_id: $project_id})
RETURN c.id AS chunk_id, d.id AS document_id
"""
