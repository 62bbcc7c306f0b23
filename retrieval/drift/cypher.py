"""Cypher of DRIFT search (seed 002 sections 4 and 5, on this platform's labels). Every query is
parameterised and scoped by $project_id; scores are exact cosine over the project's own nodes, so no
other tenant's communities or chunks can enter a result."""

from __future__ import annotations

# The project's chunks, its communities per level, and every project's communities (the population
# of the shared community vector index, from the count store).
PROJECT_STATS = """
CALL () { MATCH (ch:Chunk {project_id: $project_id}) RETURN count(ch) AS chunks }
CALL () {
  MATCH (c:Community {project_id: $project_id})
  WITH c.level AS level, count(*) AS n
  RETURN sum(n) AS communities, max(level) AS max_level, collect([level, n]) AS levels
}
CALL () { MATCH (c:Community) RETURN count(c) AS all_communities }
RETURN chunks, communities, max_level, levels, all_communities
"""

# Top-k communities of one level ($level NULL: every level) by similarity to the query vector,
# scored exactly over the project's own communities.
_TOP_K_COMMUNITIES = """
WITH c, vector.similarity.cosine(c.embedding, $vector) AS score
ORDER BY score DESC, c.id
LIMIT $k
RETURN c.id AS id, c.community AS key, c.level AS level, coalesce(c.title, c.community) AS title,
       coalesce(c.summary, '') AS summary, score
"""

COMMUNITIES_BY_LEVEL = (
    """
MATCH (c:Community {project_id: $project_id})
WHERE ($level IS NULL OR c.level = $level) AND c.embedding IS NOT NULL"""
    + _TOP_K_COMMUNITIES
)

# The same from the shared community vector index, over-fetched ($fetch) and filtered to the project
# and level, the candidates re-scored exactly (the index ranks on quantised vectors).
COMMUNITIES_BY_LEVEL_INDEX = (
    """
CALL db.index.vector.queryNodes('community_embedding', $fetch, $vector) YIELD node
WITH node AS c
WHERE c.project_id = $project_id AND ($level IS NULL OR c.level = $level)"""
    + _TOP_K_COMMUNITIES
)

# The 1..$per chunks of each community (through its level-0 descendants) closest to the query, with
# their texts and document names.
COMMUNITY_SAMPLE_CHUNKS = """
UNWIND $community_ids AS cid
MATCH (c:Community {id: cid})
WHERE c.project_id = $project_id
CALL (c) {
  MATCH (c)<-[:IN_COMMUNITY*0..10]-(:Community {level: 0})<-[:IN_COMMUNITY]-(ch:Chunk)
  WHERE ch.project_id = $project_id AND ch.embedding IS NOT NULL
  WITH DISTINCT ch
  WITH ch, vector.similarity.cosine(ch.embedding, $vector) AS score
  ORDER BY score DESC, ch.id
  LIMIT $per
  OPTIONAL MATCH (d:Document {id: ch.document_id})
  WHERE d.project_id = $project_id
  RETURN collect({chunk_id: ch.id, score: score, document_id: ch.document_id,
                  document_name: coalesce(d.title, d.id, 'unknown'), text: coalesce(ch.text, '')}) AS top
}
RETURN c.id AS community_id, top
"""

# Every chunk under the given communities, and their documents: the scope of a follow-up.
COMMUNITY_SCOPE = """
MATCH (c:Community {project_id: $project_id})
WHERE c.id IN $community_ids
MATCH (c)<-[:IN_COMMUNITY*0..10]-(:Community {level: 0})<-[:IN_COMMUNITY]-(ch:Chunk)
WHERE ch.project_id = $project_id
RETURN collect(DISTINCT ch.id) AS chunk_ids, collect(DISTINCT ch.document_id) AS document_ids
"""

CHUNKS_HYDRATE = """
UNWIND $chunk_ids AS cid
MATCH (ch:Chunk {id: cid})
WHERE ch.project_id = $project_id
OPTIONAL MATCH (d:Document {id: ch.document_id})
WHERE d.project_id = $project_id
RETURN ch.id AS chunk_id, ch.document_id AS document_id, coalesce(d.title, d.id, 'unknown') AS document_name,
       coalesce(ch.text, '') AS text
"""


# Seed 002's neighbourhood expansion, with a follow-up's whole context in one round trip: each hit
# chunk's text and document; its entities, their related entities with the relation descriptions,
# and chunks that mention those related entities (bounded at every step) with their texts.
NEIGHBOURHOOD_HYDRATED = """
UNWIND range(0, size($chunk_ids) - 1) AS position
WITH position, $chunk_ids[position] AS cid
MATCH (ch:Chunk {id: cid})
WHERE ch.project_id = $project_id
CALL (ch) {
  OPTIONAL MATCH (ch)-[:HAS_ENTITY]->(e:Entity)
  WITH e ORDER BY COUNT { (e)<-[:HAS_ENTITY]-() } ASC, e.id
  LIMIT $max_entities
  RETURN collect(e) AS ents
}
CALL (ents) {
  UNWIND ents AS e
  MATCH (e)-[r:RELATED]-(e2:Entity)
  WITH e, r, e2 ORDER BY r.weight DESC, e2.id
  LIMIT $max_relations
  RETURN collect({source: e.name, target: e2.name, description: coalesce(r.description, ''),
                  entity_id: e2.id}) AS relations, collect(e2) AS related
}
CALL (ch, related) {
  UNWIND related AS e2
  MATCH (e2)<-[:HAS_ENTITY]-(ch2:Chunk)
  WHERE ch2 <> ch AND ch2.project_id = $project_id
  WITH DISTINCT ch2 LIMIT $max_neighbours
  OPTIONAL MATCH (d2:Document {id: ch2.document_id})
  WHERE d2.project_id = $project_id
  RETURN collect([ch2.id, ch2.document_id, coalesce(d2.title, d2.id, 'unknown'), coalesce(ch2.text, '')])
         AS neighbours
}
OPTIONAL MATCH (d:Document {id: ch.document_id})
WHERE d.project_id = $project_id
RETURN position, ch.id AS chunk_id, ch.document_id AS document_id,
       coalesce(d.title, d.id, 'unknown') AS document_name, coalesce(ch.text, '') AS text,
       [e IN ents | {id: e.id, name: e.name, type: e.type, description: coalesce(e.description, ''),
                     community: [(e)-[:IN_COMMUNITY]->(c:Community) | c.id][0]}] AS entities,
       relations, neighbours
ORDER BY position
"""
