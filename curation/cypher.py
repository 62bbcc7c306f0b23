"""Cypher of curation: privacy settings, retention runs, anonymisation, erasure and the admin's
paginated graph pages. Every statement is parameterised; batches are bounded by `$batch`."""

from __future__ import annotations

from memory import cypher as memory_cypher

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

# --- privacy -------------------------------------------------------------------------------------------

# Settings of one conversation. Its messages, summaries and what was drawn from them carry the
# conversation's accessibility so searches can filter on it; the expiry follows the retention
# (days after the last message) unless a curator fixed a date.
PRIVACY_SET = """
MATCH (c:Conversation {id: $id})
WHERE c.project_id = $project_id
SET c._lock = true
SET c.retention_days = CASE WHEN $set_retention THEN $retention_days ELSE c.retention_days END,
    c.anonymize = coalesce($anonymize, c.anonymize),
    c.accessibility = coalesce($accessibility, c.accessibility, 'shared'),
    c.expires_fixed = CASE WHEN $set_expires THEN $expires_at IS NOT NULL ELSE c.expires_fixed END
SET c.expires_at = CASE WHEN $set_expires AND $expires_at IS NOT NULL THEN $expires_at
                        WHEN c.expires_fixed THEN c.expires_at
                        WHEN c.retention_days IS NULL OR c.ended_at IS NULL THEN null
                        ELSE toString(datetime(c.ended_at) + duration({days: c.retention_days})) END
WITH c
CALL (c) {
  MATCH (x)-[:PART_OF|SUMMARIZES]->(c)
  SET x.accessibility = c.accessibility
  WITH x
  OPTIONAL MATCH (d)-[:EXTRACTED_FROM]->(x)
  WITH DISTINCT d WHERE d IS NOT NULL
  SET d.accessibility = c.accessibility
}
REMOVE c._lock
RETURN c {.id, .user_id, .thread_id, .application_id, .agent_id, .retention_days, .anonymize,
          .accessibility, .expires_at, .expires_fixed, .message_count} AS conversation
"""

CONVERSATION_EXISTS = """
MATCH (c:Conversation {id: $id}) WHERE c.project_id = $project_id
RETURN c.id AS id
"""

CONVERSATION_PRIVACY_GET = """
MATCH (c:Conversation {id: $id}) WHERE c.project_id = $project_id
RETURN c {.id, .user_id, .thread_id, .application_id, .agent_id, .retention_days, .anonymize,
          .accessibility, .expires_at, .expires_fixed, .message_count} AS conversation
"""

DOCUMENT_SOURCE = """
MATCH (d:Document {id: $id}) WHERE d.project_id = $project_id
RETURN d {.title, .content, .source_path, .mime_type, .author, .metadata_json} AS doc
"""

# --- retention: messages ---------------------------------------------------------------------------------

MESSAGES_PREVIEW = """
MATCH (m:Memory {project_id: $project_id})
WHERE m.timestamp < $cutoff AND ($only_plain = false OR m.anonymized IS NULL)
RETURN count(m) AS messages, count(DISTINCT m.conversation_id) AS conversations
"""

# The next batch of old messages after the cursor (timestamp, id): a resumed run goes on from there.
MESSAGES_OLD_BATCH = """
MATCH (m:Memory {project_id: $project_id})
WHERE m.timestamp < $cutoff AND m.anonymized IS NULL
  AND (m.timestamp > $after_ts OR (m.timestamp = $after_ts AND m.id > $after_id))
RETURN m.id AS id, m.text AS text, m.author_name AS author_name, m.conversation_id AS conversation_id,
       m.timestamp AS timestamp
ORDER BY m.timestamp, m.id
LIMIT $batch
"""

MESSAGES_DELETE_BATCH = """
MATCH (m:Memory {project_id: $project_id})
WHERE m.timestamp < $cutoff
WITH m LIMIT $batch
RETURN collect(m.id) AS ids
"""

CONVERSATIONS_OF_OLD_MESSAGES = """
MATCH (m:Memory {project_id: $project_id})
WHERE m.timestamp < $cutoff
RETURN DISTINCT m.conversation_id AS id
"""

# Purging messages (deleted, or their text anonymised): what holds their words goes too — facts
# and preferences drawn from them, summaries whose span covers them (and what was drawn from those),
# the conversation's cached summary text. Deleted messages go with their relationships.
PURGE_DERIVED = """
UNWIND $ids AS wanted
MATCH (m:Memory {id: wanted})
WHERE m.project_id = $project_id
MATCH (m)-[:PART_OF]->(c:Conversation)
WITH c, collect(m) AS ms, min(m.seq) AS low, max(m.seq) AS high
CALL (ms) {
  UNWIND ms AS m
  MATCH (d)-[:EXTRACTED_FROM]->(m)
  WITH DISTINCT d
  DETACH DELETE d
  RETURN count(*) AS derived
}
CALL (c, ms) {
  MATCH (s:ConversationSummary)-[:SUMMARIZES]->(c)
  WHERE any(m IN ms WHERE s.first_seq <= m.seq AND m.seq <= s.last_seq)
  OPTIONAL MATCH (d2)-[:EXTRACTED_FROM]->(s)
  DETACH DELETE d2
  WITH DISTINCT s
  WITH s, s.first_seq AS first
  DETACH DELETE s
  RETURN min(first) AS reopened, count(*) AS summaries
}
SET c.summary = CASE WHEN summaries > 0 THEN null ELSE c.summary END,
    c.summarized_seq = CASE WHEN reopened IS NULL OR coalesce(c.summarized_seq, 0) < reopened - 1
                            THEN c.summarized_seq ELSE reopened - 1 END
RETURN sum(derived) AS derived, sum(summaries) AS summaries
"""

MESSAGES_DELETE = """
UNWIND $ids AS wanted
MATCH (m:Memory {id: wanted})
WHERE m.project_id = $project_id
MATCH (m)-[:PART_OF]->(c:Conversation)
WITH c, collect(m) AS ms
SET c.message_count = c.message_count - size(ms),
    c.last_memory_id = CASE WHEN c.last_memory_id IN [m IN ms | m.id] THEN null ELSE c.last_memory_id END
FOREACH (m IN ms | DETACH DELETE m)
RETURN sum(size(ms)) AS deleted
"""

# Anonymised text replaces the original in one statement per batch: text, author, embedding and the
# flag change together, so no message is ever half-anonymised.
MESSAGES_ANONYMISE = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
WHERE m.project_id = $project_id
SET m.text = row.text, m.author_name = row.author_name, m.embedding = row.embedding,
    m.anonymized = true, m.anonymized_at = $now, m.processed = true
WITH m
OPTIONAL MATCH (m)-[r:MENTIONS]->(:Entity)
DELETE r
RETURN count(DISTINCT m) AS anonymised
"""

CONVERSATION_MESSAGES_BATCH = """
MATCH (m:Memory {conversation_id: $conversation_id})
WHERE m.project_id = $project_id AND m.anonymized IS NULL
RETURN m.id AS id, m.text AS text, m.author_name AS author_name, m.conversation_id AS conversation_id
ORDER BY m.seq
LIMIT $batch
"""

CONVERSATION_NAMES = """
MATCH (m:Memory {conversation_id: $conversation_id})
WHERE m.project_id = $project_id AND m.author_name IS NOT NULL AND m.anonymized IS NULL
RETURN collect(DISTINCT m.author_name) AS names
"""

# --- retention: expired conversations ------------------------------------------------------------------

EXPIRED_PREVIEW = """
MATCH (c:Conversation {project_id: $project_id})
WHERE c.expires_at IS NOT NULL AND datetime(c.expires_at) <= datetime($cutoff)
  AND c.anonymized_at IS NULL
WITH c, CASE WHEN $force_anonymise OR c.anonymize THEN 'anonymise' ELSE 'delete' END AS action
RETURN action, count(c) AS conversations, sum(coalesce(c.message_count, 0)) AS messages
"""

EXPIRED_NEXT = """
MATCH (c:Conversation {project_id: $project_id})
WHERE c.expires_at IS NOT NULL AND datetime(c.expires_at) <= datetime($cutoff)
  AND c.anonymized_at IS NULL AND c.id > $after_id
RETURN c.id AS id, c.anonymize AS anonymize
ORDER BY c.id
LIMIT $batch
"""

# Deleting one conversation is the memory app's forget with the conversation as its scope: its
# messages in batches (with what was drawn from them), then the conversation with its summaries.
CONVERSATION_DELETE_MESSAGES = memory_cypher.FORGET_BATCH.format(
    label="Memory", scope="n.conversation_id = $conversation_id"
)
CONVERSATION_DELETE = memory_cypher.FORGET_CONVERSATIONS.format(scope="c.id = $conversation_id")

# After its messages are anonymised an expired conversation stays, without summaries or title, and
# is not picked again.
CONVERSATION_ANONYMISED = """
MATCH (c:Conversation {id: $conversation_id})
WHERE c.project_id = $project_id
OPTIONAL MATCH (s:ConversationSummary)-[:SUMMARIZES]->(c)
OPTIONAL MATCH (d)-[:EXTRACTED_FROM]->(s)
WITH c, collect(DISTINCT s) AS ss, collect(DISTINCT d) AS ds
FOREACH (d IN ds | DETACH DELETE d)
FOREACH (s IN ss | DETACH DELETE s)
SET c.summary = null, c.title = null, c.anonymized_at = $now, c.summarized_seq = c.last_seq,
    c.pending_tokens = 0
RETURN size(ss) AS summaries
"""

# --- retention: orphaned entities ------------------------------------------------------------------------

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

ENTITIES_PREVIEW = """
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

COMMUNITIES_STALE = """
MATCH (c:Community {project_id: $project_id})
SET c.stale = true
RETURN count(c) AS marked
"""

# --- erasure -----------------------------------------------------------------------------------------------

USER_SESSIONS_BATCH = """
MATCH (s:Session {project_id: $project_id})
WHERE s.user_id = $user_id
WITH s LIMIT $batch
WITH collect(s) AS ss, [s IN collect(s) | s.id] AS uids
CALL (uids) {
  UNWIND uids AS uid
  MATCH (t:ToolCall {session_uid: uid})
  DETACH DELETE t
  RETURN count(*) AS tool_calls
}
CALL (uids) {
  UNWIND uids AS uid
  MATCH (e:Event) WHERE e.session_uid = uid
  DETACH DELETE e
  RETURN count(*) AS events
}
FOREACH (s IN ss | DETACH DELETE s)
RETURN size(ss) AS sessions, tool_calls, events
"""

USER_STATE_DELETE = """
CALL () {
  MATCH (u:UserState {project_id: $project_id}) WHERE u.user_id = $user_id
  DETACH DELETE u
  RETURN count(*) AS user_states
}
CALL () {
  MATCH (u:User {project_id: $project_id}) WHERE u.user_id = $user_id
  DETACH DELETE u
  RETURN count(*) AS users
}
RETURN user_states, users
"""

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
RETURN c {.*} AS conversation, summaries, reverse(messages) AS messages, derived
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
RETURN d {.id, .project_id, .title, .source_path, .mime_type, .author, .status, .chunk_count,
          .entity_count, .relation_count, created_at: toString(d.created_at)} AS document, chunks, entities
"""

MEMORY_DETAIL = """
MATCH (m:Memory {id: $id})
OPTIONAL MATCH (d)-[:EXTRACTED_FROM]->(m)
OPTIONAL MATCH (m)-[:MENTIONS]->(e:Entity)
RETURN m {.*, embedding: null} AS memory,
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
