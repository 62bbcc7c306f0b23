"""Cypher of curation: the admin's read models of graph content (detail pages). Curation writes no
node of another app: privacy, retention, anonymisation and erasure go through the services of the
app that owns each label (memory.retention, knowledge.retention, sessions_graph.services)."""

from __future__ import annotations

# Range indexes behind the admin's keyset pages (project, then the order property) and the retention
# runs (conversations by expiry, entities by orphan stamp).
SCHEMA = [
    "CREATE INDEX curation_memory_time IF NOT EXISTS FOR (n:Memory) ON (n.project_id, n.timestamp)",
    "CREATE INDEX curation_conversation_time IF NOT EXISTS FOR (n:Conversation) ON (n.project_id, n.ended_at)",
    "CREATE INDEX curation_conversation_ended IF NOT EXISTS FOR (n:Conversation) ON (n.ended_at)",
    "CREATE INDEX curation_document_time IF NOT EXISTS FOR (n:Document) ON (n.project_id, n.created_at)",
    "CREATE INDEX curation_document_created IF NOT EXISTS FOR (n:Document) ON (n.created_at)",
    "CREATE INDEX curation_entity_name IF NOT EXISTS FOR (n:Entity) ON (n.project_id, n.name)",
    "CREATE INDEX curation_entity_names IF NOT EXISTS FOR (n:Entity) ON (n.name)",
    "CREATE INDEX curation_entity_orphaned IF NOT EXISTS FOR (n:Entity) ON (n.project_id, n.orphaned_at)",
    "CREATE INDEX curation_community_title IF NOT EXISTS FOR (n:Community) ON (n.project_id, n.title)",
    "CREATE INDEX curation_community_titles IF NOT EXISTS FOR (n:Community) ON (n.title)",
    "CREATE INDEX curation_session_time IF NOT EXISTS FOR (n:Session) ON (n.project_id, n.last_update_time)",
    "CREATE INDEX curation_session_updated IF NOT EXISTS FOR (n:Session) ON (n.last_update_time)",
]

# --- admin detail pages: a node and its neighbourhood -------------------------------------------------------

CONVERSATION_DETAIL = """
MATCH (c:Conversation {id: $id})
OPTIONAL MATCH (s:ConversationSummary)-[:SUMMARIZES]->(c)
WITH c, collect(s {.id, .text, .first_seq, .last_seq, .mode, .created_at}) AS summaries
CALL (c) {
  MATCH (m:Memory)-[:PART_OF]->(c)
  WITH m ORDER BY m.seq DESC LIMIT $messages
  RETURN collect(m {.id, .seq, .role, .text, .timestamp, .author_name, .anonymized}) AS messages
}
CALL (c) {
  MATCH (d)-[:EXTRACTED_FROM]->(:Memory|ConversationSummary)-[:PART_OF|SUMMARIZES]->(c)
  WITH DISTINCT d LIMIT 200
  RETURN collect(d {.id, .text, .valid_until, kind: labels(d)[0]}) AS derived
}
CALL (c) {
  MATCH (m:Memory {conversation_id: c.id})-[:REFERENCES]->(doc:Document)
  WITH doc, count(m) AS messages ORDER BY messages DESC, doc.title LIMIT 200
  RETURN collect(doc {.id, .title, .source_path, .author, messages: messages}) AS references
}
RETURN c {.*} AS conversation, summaries, reverse(messages) AS messages, derived, references
"""

DOCUMENT_DETAIL = """
MATCH (d:Document {id: $id})
CALL (d) {
  MATCH (d)-[:HAS_CHUNK]->(c:Chunk)
  WITH c ORDER BY c.index LIMIT 100
  RETURN collect(c {.id, .index, .text, .token_count}) AS chunks
}
CALL (d) {
  MATCH (d)-[:HAS_CHUNK]->(:Chunk)-[:HAS_ENTITY]->(e:Entity)
  WITH DISTINCT e LIMIT 200
  RETURN collect(e {.id, .name, .type}) AS entities
}
CALL (d) {
  MATCH (m:Memory)-[:REFERENCES]->(d)
  WITH m.conversation_id AS cid, count(m) AS messages, max(m.timestamp) AS last_referenced_at
  MATCH (c:Conversation {id: cid}) WHERE c.project_id = d.project_id
  WITH c, messages, last_referenced_at ORDER BY last_referenced_at DESC LIMIT 200
  RETURN collect(c {.id, .title, .user_id, .accessibility, messages: messages,
                    last_referenced_at: last_referenced_at}) AS conversations
}
CALL (d) {
  OPTIONAL MATCH (d)-[r:REFERENCES]->(o:Document)
  WITH o, r ORDER BY o.title LIMIT 200
  RETURN collect(o {.id, .title, .source_path, type: coalesce(r.type, 'references')}) AS cites
}
CALL (d) {
  OPTIONAL MATCH (o:Document)-[r:REFERENCES]->(d)
  WITH o, r ORDER BY o.title LIMIT 200
  RETURN collect(o {.id, .title, .source_path, type: coalesce(r.type, 'references')}) AS cited_by
}
RETURN d {.id, .project_id, .title, .source_path, .mime_type, .author, .status, .chunk_count,
          .entity_count, .relation_count, created_at: toString(d.created_at)} AS document, chunks, entities,
       conversations, cites, cited_by
"""

MEMORY_DETAIL = """
MATCH (m:Memory {id: $id})
OPTIONAL MATCH (d)-[:EXTRACTED_FROM]->(m)
OPTIONAL MATCH (m)-[:MENTIONS]->(e:Entity)
RETURN m {.*, embedding: null, sentence_embeddings: null} AS memory,
       collect(DISTINCT d {.id, .text, kind: labels(d)[0]}) AS derived,
       collect(DISTINCT e {.id, .name, .type}) AS entities
"""

ENTITY_DETAIL = """
MATCH (e:Entity {id: $id})
CALL (e) {
  OPTIONAL MATCH (e)-[r:RELATED]-(o:Entity)
  WITH r, o LIMIT 100
  RETURN collect(CASE WHEN o IS NULL THEN null ELSE {id: o.id, name: o.name, description: r.description,
                 weight: r.weight} END) AS related
}
CALL (e) {
  OPTIONAL MATCH (c:Chunk)-[:HAS_ENTITY]->(e)
  WITH c LIMIT 50
  RETURN collect(c {.id, .document_id, .text}) AS chunks
}
RETURN e {.id, .project_id, .name, .type, .description, .orphaned_at} AS entity, related, chunks
"""

COMMUNITY_DETAIL = """
MATCH (c:Community {id: $id})
CALL (c) {
  OPTIONAL MATCH (e:Entity)-[:IN_COMMUNITY]->(c)
  WITH e LIMIT 100
  RETURN collect(e {.id, .name, .type}) AS entities
}
OPTIONAL MATCH (c)-[:IN_COMMUNITY]->(parent:Community)
RETURN c {.id, .project_id, .title, .summary, .level, .rank, .size, .stale} AS community, entities,
       parent.id AS parent_id
"""

SESSION_DETAIL = """
MATCH (s:Session {id: $id})
CALL (s) {
  MATCH (e:Event) WHERE e.session_uid = s.id
  WITH e ORDER BY e.seq LIMIT 200
  RETURN collect(e {.id, .seq, .author, .text, .timestamp}) AS events
}
RETURN s {.id, .project_id, .app_name, .user_id, .session_id, .event_count, .last_update_time} AS session,
       events
"""

# --- the project dashboard --------------------------------------------------------------------------------

DASHBOARD_DOCUMENTS = """
MATCH (d:Document {project_id: $project_id})
RETURN coalesce(d.status, 'unknown') AS status, count(*) AS n ORDER BY status
"""

DASHBOARD_COUNTS = """
RETURN COUNT { MATCH (:Chunk {project_id: $project_id}) } AS chunks,
       COUNT { MATCH (:Entity {project_id: $project_id}) } AS entities,
       COUNT { MATCH (:Community {project_id: $project_id}) } AS communities,
       COUNT { MATCH (:Memory {project_id: $project_id}) } AS memories,
       COUNT { MATCH (:Fact {project_id: $project_id}) } AS facts,
       COUNT { MATCH (:Conversation {project_id: $project_id}) } AS conversations,
       COUNT { MATCH (:Session {project_id: $project_id}) } AS sessions
"""

# --- the graph view: a node and its neighbours, one group (relationship type, direction, label) at a time --
# Labels and relationship types are checked against the graph view's whitelist before they are formatted
# into these queries; every neighbour shares the node's project (tenancy is a property, never crossed).

GRAPH_NODE = (
    "MATCH (n:{label} {{id: $id}}) RETURN n {{.*, embedding: null, sentence_embeddings: null}} AS node"
)

GRAPH_GROUPS = """
MATCH (n:{label} {{id: $id}})
MATCH (n)-[r]-(m) WHERE m.project_id = n.project_id AND m.id IS NOT NULL
WITH type(r) AS type, startNode(r) = n AS outgoing, [l IN $labels WHERE l IN labels(m)][0] AS label, m
WHERE label IS NOT NULL
RETURN type, outgoing, label, count(DISTINCT m) AS total ORDER BY type, outgoing, label
"""

GRAPH_GROUP_TOTAL = """
MATCH (n:{label} {{id: $id}})
MATCH {pattern} WHERE m.project_id = n.project_id
RETURN count(DISTINCT m) AS total
"""

GRAPH_GROUP_PAGE = """
MATCH (n:{label} {{id: $id}})
MATCH {pattern} WHERE m.project_id = n.project_id AND m.id > $after
WITH DISTINCT m ORDER BY m.id LIMIT $limit
RETURN m {{.*, embedding: null, sentence_embeddings: null}} AS node
"""

# a project's entry to the graph: its top communities (no parent) and its documents
GRAPH_PROJECT_TOTALS = """
RETURN COUNT { MATCH (c:Community {project_id: $id}) WHERE NOT (c)-[:IN_COMMUNITY]->(:Community) }
         AS top_communities,
       COUNT { MATCH (:Document {project_id: $id}) } AS documents
"""

GRAPH_PROJECT_PAGE = {
    "top_communities": """
MATCH (m:Community {project_id: $id}) WHERE NOT (m)-[:IN_COMMUNITY]->(:Community) AND m.id > $after
WITH m ORDER BY m.id LIMIT $limit
RETURN m {.*, embedding: null, sentence_embeddings: null} AS node
""",
    "documents": """
MATCH (m:Document {project_id: $id}) WHERE m.id > $after
WITH m ORDER BY m.id LIMIT $limit
RETURN m {.*, embedding: null, sentence_embeddings: null} AS node
""",
}
