"""Cypher of the memory app. Always parameterised; every query is scoped by $project_id.

A scope's WHERE text comes from `Scope.where()` (fixed property names, values as parameters) and
is spliced in where a query has `{scope}`.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

# Constraints and indexes beyond the neomodel classes (applied by graph_schema). The memory vector
# and fulltext indexes are created lazily, on first use (memory.indexes), as seed 001 asks.
SCHEMA: list[str] = [
    "CREATE CONSTRAINT conversation_key IF NOT EXISTS "
    "FOR (c:Conversation) REQUIRE (c.project_id, c.key) IS UNIQUE",
    "CREATE CONSTRAINT user_profile_key IF NOT EXISTS "
    "FOR (p:UserProfile) REQUIRE (p.project_id, p.key) IS UNIQUE",
    # a caller's message id names one message of a conversation: a retried store changes nothing
    "CREATE CONSTRAINT memory_message_id IF NOT EXISTS "
    "FOR (m:Memory) REQUIRE (m.conversation_id, m.message_id) IS UNIQUE",
]

VECTOR_INDEX = "memory_embeddings"
FULLTEXT_INDEX = "memory_fulltext"
LEVEL_FULLTEXT_INDEX = "memory_level_fulltext"
# Lucene's ASCII folding on top of the standard analyzer: case folded beyond lower case ("STRASSE"
# finds "Straße") and accents folded ("cafe" finds "café"); stored text and queries are NFC already.
FULLTEXT_ANALYZER = "standard-folding"
_FULLTEXT_OPTIONS = f"OPTIONS {{indexConfig: {{`fulltext.analyzer`: '{FULLTEXT_ANALYZER}'}}}}"
# each memory fulltext index's properties (an index on others is rebuilt: memory.indexes)
FULLTEXT_PROPERTIES = {
    FULLTEXT_INDEX: ("search_text", "scope_tokens"),
    LEVEL_FULLTEXT_INDEX: ("text", "scope_tokens"),
}
LABELS = {"summary": "ConversationSummary", "fact": "Fact", "preference": "Preference"}


# Neo4j 5.26 added HNSW build options (`vector.hnsw.m`, `vector.hnsw.ef_construction`); quantization
# is configurable since 5.23.
HNSW_OPTIONS_SINCE = (5, 26)
# Neo4j 2026.01 added vector search with filters (Cypher 25's SEARCH clause): the index carries these
# properties and narrows its nearest neighbours to one project's user itself (USER_VECTOR_SEARCH).
FILTERED_VECTOR_SINCE = (2026, 1)
VECTOR_INDEX_FILTERS = ("project_id", "user_id")


def vector_index_config(*, hnsw_options: bool = True) -> dict[str, Any]:
    """The memory vector index's `indexConfig`, from settings (HNSW options only when supported)."""
    m, ef = int(settings.MEMORY_VECTOR_INDEX_M), int(settings.MEMORY_VECTOR_INDEX_EF_CONSTRUCTION)
    if not 1 <= m <= 512 or not 1 <= ef <= 3200:
        raise ImproperlyConfigured(
            "MEMORY_VECTOR_INDEX_M must be 1..512 and MEMORY_VECTOR_INDEX_EF_CONSTRUCTION 1..3200 (Neo4j's "
            f"limits); got {m} and {ef}"
        )
    config: dict[str, Any] = {
        "vector.dimensions": int(settings.EMBEDDINGS_DIMENSIONS),
        "vector.similarity_function": "cosine",
    }
    if hnsw_options:
        config["vector.hnsw.m"] = m
        config["vector.hnsw.ef_construction"] = ef
        config["vector.quantization.enabled"] = bool(settings.MEMORY_VECTOR_INDEX_QUANTIZATION)
    return config


def _cypher_literal(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return f"'{value}'" if isinstance(value, str) else str(int(value))  # settings' ints, fixed strings


def index_statements(*, hnsw_options: bool = True, filters: bool = False) -> list[str]:
    config = ", ".join(
        f"`{key}`: {_cypher_literal(value)}"
        for key, value in vector_index_config(hnsw_options=hnsw_options).items()
    )
    vector = f"CREATE VECTOR INDEX {VECTOR_INDEX} IF NOT EXISTS FOR (m:Memory) ON (m.embedding) "
    if filters:
        vector = "CYPHER 25 " + vector + f"WITH [{', '.join(f'm.{p}' for p in VECTOR_INDEX_FILTERS)}] "
    return [
        vector + f"OPTIONS {{indexConfig: {{{config}}}}}",
        f"CREATE FULLTEXT INDEX {FULLTEXT_INDEX} IF NOT EXISTS FOR (m:Memory) "
        f"ON EACH [{', '.join('m.' + p for p in FULLTEXT_PROPERTIES[FULLTEXT_INDEX])}] " + _FULLTEXT_OPTIONS,
        f"CREATE FULLTEXT INDEX {LEVEL_FULLTEXT_INDEX} IF NOT EXISTS FOR (n:ConversationSummary|Fact|Preference) "
        f"ON EACH [{', '.join('n.' + p for p in FULLTEXT_PROPERTIES[LEVEL_FULLTEXT_INDEX])}] "
        + _FULLTEXT_OPTIONS,
        *(
            f"CREATE INDEX memory_{key} IF NOT EXISTS FOR (m:Memory) ON (m.{key})"
            for key in ("user_id", "thread_id", "agent_id", "application_id")
        ),
    ]


# messages stored before they had an indexed form or mention keys (memory.indexes._backfill_indexed_forms)
INDEXED_FORM_MISSING = """
MATCH (m:Memory) WHERE (m.search_text IS NULL OR m.mention_keys IS NULL) AND m.text IS NOT NULL
RETURN m.id AS id, m {.text, .role, .author_name, .timestamp} AS message
LIMIT $limit
"""
INDEXED_FORM_SET = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
SET m.search_text = row.search_text, m.mention_keys = row.mention_keys
"""

VECTOR_INDEX_CONFIG = """
SHOW VECTOR INDEXES YIELD name, options WHERE name = $name
RETURN options.indexConfig AS config
"""


# --- caller metadata (memory.metadata) ---------------------------------------------------------------

# A message's metadata key `k` is its property METADATA_PREFIX + k (no other property of a message starts
# with it: tests/memory/test_metadata.py checks); METADATA_KEYS lists the keys in the order given.
METADATA_PREFIX = "meta_"
METADATA_KEYS = "metadata_keys"
# the message `m`'s metadata as [key, value] pairs (Cypher builds no map with computed keys); no braces,
# so it goes into templates that are `.format`ted as it is
METADATA_PAIRS = f"[k IN coalesce(m.{METADATA_KEYS}, []) | [k, m['{METADATA_PREFIX}' + k]]]"
# The search filter over `{var}`: each entry of $filter_metadata ({property, value}; the property a
# checked key's) names a property whose value equals the entry's value or, for a list, holds it
# (`[] + x` is the list x itself, or [x] for a single value). A missing property makes it false.
METADATA_FILTER = "all(f IN $filter_metadata WHERE f.value IN ([] + {var}[f.property]))"

# the metadata of these messages (what anonymising them keeps is decided from it)
MESSAGES_METADATA = f"""
UNWIND $ids AS wanted
MATCH (m:Memory {{id: wanted}}) WHERE m.project_id = $project_id
RETURN m.id AS id, {METADATA_PAIRS} AS pairs
"""


# --- store -----------------------------------------------------------------------------------------

# One conversation per scope. Setting `_lock` first makes concurrent stores to one conversation
# queue up, so `seq` and the NEXT chain stay in order; what is read after the lock is current.
_STORE = """
MERGE (c:Conversation {project_id: $project_id, key: $conversation_key})
  ON CREATE SET c.id = $conversation_id, c.application_id = $application_id, c.agent_id = $agent_id,
                c.user_id = $user_id, c.thread_id = $thread_id, c.scope_tokens = $scope_tokens,
                c.started_at = $rows[0].timestamp, c.message_count = 0, c.last_seq = 0,
                c.summarized_seq = 0, c.pending_tokens = 0, c.consolidated_count = 0,
                c.accessibility = $accessibility, c.anonymize = $anonymize,
                c.retention_days = $retention_days
SET c._lock = true
WITH c, c.last_seq AS base, c.last_memory_id AS previous
UNWIND range(0, size($rows) - 1) AS i
WITH c, base, previous, i, $rows[i] AS row
CREATE (m:Memory {id: row.id, project_id: $project_id, text: row.text, role: row.role,
                  timestamp: row.timestamp, message_id: row.message_id, author_name: row.author_name,
                  search_text: row.search_text, mention_keys: row.mention_keys, application_id: $application_id, agent_id: $agent_id, user_id: $user_id,
                  thread_id: $thread_id, scope_tokens: $scope_tokens, conversation_id: c.id,
                  seq: base + i + 1, token_count: row.token_count, processed: false,
                  accessibility: c.accessibility, status: row.status, metadata_keys: row.metadata_keys})
SET m += row.metadata
{embedding}CREATE (m)-[:PART_OF]->(c)
{references}WITH c, base, previous, collect(m) AS ms
CALL (previous, ms) {
  OPTIONAL MATCH (p:Memory {id: previous})
  WHERE p.project_id = $project_id
  FOREACH (_ IN CASE WHEN p IS NULL THEN [] ELSE [1] END | FOREACH (h IN ms[0..1] | CREATE (p)-[:NEXT]->(h)))
}
FOREACH (i IN range(0, size(ms) - 2) |
  FOREACH (a IN [ms[i]] | FOREACH (b IN [ms[i + 1]] | CREATE (a)-[:NEXT]->(b))))
SET c.last_seq = base + size(ms), c.last_memory_id = last(ms).id,
    c.message_count = coalesce(c.message_count, 0) + size(ms), c.ended_at = last(ms).timestamp,
    c.pending_tokens = coalesce(c.pending_tokens, 0) + reduce(t = 0, m IN ms | t + m.token_count)
// a conversation with a retention expires that many days after its last message, unless a curator
// fixed its expiry
SET c.expires_at = CASE WHEN c.expires_fixed THEN c.expires_at
                        WHEN c.retention_days IS NULL THEN null
                        ELSE toString(datetime(c.ended_at) + duration({days: c.retention_days})) END
REMOVE c._lock
RETURN c.id AS conversation_id, [m IN ms | {id: m.id, seq: m.seq}] AS stored,
       c.last_seq - coalesce(c.summarized_seq, 0) AS pending_messages, c.pending_tokens AS pending_tokens
"""

# the messages of the scope's conversation that already carry one of these caller message ids
STORED_MESSAGE_IDS = """
MATCH (c:Conversation {project_id: $project_id, key: $conversation_key})
MATCH (m:Memory {conversation_id: c.id})
WHERE m.message_id IN $message_ids AND m.project_id = $project_id
RETURN m.message_id AS message_id, m.id AS id, m.seq AS seq, m.role AS role, c.id AS conversation_id
"""

# the documents and chunks each message references, resolved to element ids by knowledge.selectors
_STORE_REFERENCES = """
WITH c, base, previous, m, row
CALL (m, row) {
  UNWIND row.refs AS ref
  MATCH (t) WHERE elementId(t) = ref AND t.project_id = $project_id
  MERGE (m)-[:REFERENCES]->(t)
}
"""
# stored as float32 (the vector index's precision): half the bytes of a list of doubles to write
_STORE_EMBEDDING = """
WITH c, base, previous, m, row
CALL db.create.setNodeVectorProperty(m, 'embedding', row.embedding)
"""
# a message's sentences' vectors end to end (memory.vectors), float32 too; a row without has none
_SENTENCE_EMBEDDINGS = """
CALL (m, row) {
  WITH m, row WHERE row.sentence_embeddings IS NOT NULL
  CALL db.create.setNodeVectorProperty(m, 'sentence_embeddings', row.sentence_embeddings)
}
"""
# A batch without references runs without the per-message subquery, which slows a large store
# measurably even when every list is empty (bench/results/memory.json, client embeddings); a batch
# whose embeddings the processing job writes (memories_store(embed_later=True)) sets none.
# Keyed by (any references, any embeddings, any sentence vectors).
STORE_STATEMENTS = {
    (refs, embeds, sentences): _STORE.replace(
        "{references}", _STORE_REFERENCES.lstrip("\n") if refs else ""
    ).replace(
        "{embedding}",
        (_STORE_EMBEDDING.lstrip("\n") + (_SENTENCE_EMBEDDINGS.lstrip("\n") if sentences else ""))
        if embeds
        else "",
    )
    for refs in (False, True)
    for embeds in (False, True)
    for sentences in (False, True)
    if embeds or not sentences
}

# the processing job's embeddings of messages stored without one; a message whose text changed since
# it was read (anonymised, and embedded again) is left as it is
EMBEDDING_PENDING = """
UNWIND $ids AS wanted
MATCH (m:Memory {id: wanted}) WHERE m.project_id = $project_id AND m.embedding IS NULL
RETURN m.id AS id, m.text AS text, m.role AS role, m.author_name AS author_name, m.timestamp AS timestamp
"""
EMBEDDING_SET = (
    """
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
WHERE m.project_id = $project_id AND m.embedding IS NULL AND m.text = row.text
CALL db.create.setNodeVectorProperty(m, 'embedding', row.embedding)
"""
    + _SENTENCE_EMBEDDINGS.lstrip("\n")
    + """RETURN count(m) AS embedded
"""
)


# --- search ----------------------------------------------------------------------------------------

SCOPE_SIZE = """
MATCH (m:Memory {{project_id: $project_id}})
WHERE {scope}
RETURN count(m) AS size
"""

# The scope's size and its messages per author (null: messages without an author name), the most
# frequent first (memory.selectors.MessageSearch.named_speaker)
SCOPE_SPEAKERS = """
MATCH (m:Memory {{project_id: $project_id}})
WHERE {scope}
WITH m.author_name AS name, count(m) AS messages
ORDER BY messages DESC, name
WITH collect({{name: name, messages: messages}}) AS authors, sum(messages) AS size
RETURN size, authors[..$limit] AS authors, size(authors) AS distinct
"""

# The exact scan ranking the whole scope and, in the same pass, one speaker's messages
VECTOR_EXACT_SPEAKER = """
MATCH (m:Memory {{project_id: $project_id}})
WHERE {scope} AND m.embedding IS NOT NULL
WITH m.id AS id, m.author_name AS author, vector.similarity.cosine(m.embedding, $vector) AS score
ORDER BY score DESC, id
WITH collect({{id: id, score: score, author: author}}) AS ranked
RETURN ranked[..$limit] AS hits, [x IN ranked WHERE x.author = $speaker][..$limit] AS own
"""

# Graph mode (memory.selectors.MessageSearch.expanded): the seed messages' mention keys, and in one pass
# over the scope each message's keys. Which of them a seed holds is a set lookup in Python: in Cypher,
# testing every key of every scope message against the seeds' list was twice as slow.
MENTION_LINKS = """
MATCH (s:Memory) WHERE s.id IN $ids AND s.project_id = $project_id
WITH collect(s {{.id, held: coalesce(s.mention_keys, [])}}) AS seeds
MATCH (m:Memory {{project_id: $project_id}})
WHERE {scope}
RETURN seeds, collect([m.id, m.mention_keys]) AS keyed
"""

VECTOR_EXACT = """
MATCH (m:Memory {{project_id: $project_id}})
WHERE {scope} AND m.embedding IS NOT NULL
WITH m, vector.similarity.cosine(m.embedding, $vector) AS score
ORDER BY score DESC, m.id
LIMIT $limit
RETURN m.id AS id, score
"""

VECTOR_INDEX_QUERY = """
CALL db.index.vector.queryNodes($index, $fetch, $vector) YIELD node AS m
WITH m
WHERE m.project_id = $project_id AND {scope}
WITH m, vector.similarity.cosine(m.embedding, $vector) AS score
RETURN m.id AS id, score
ORDER BY score DESC, id
LIMIT $limit
"""

# Each of these messages' sentence scores against $vector (memory.vectors: $dims floats per sentence);
# messages without sentence vectors are not returned
SENTENCE_SCORES = """
UNWIND $ids AS wanted
MATCH (m:Memory {id: wanted})
WHERE m.project_id = $project_id AND m.sentence_embeddings IS NOT NULL
WITH m.id AS id, m.sentence_embeddings AS flat
RETURN id, [i IN range(0, size(flat) / $dims - 1)
            | vector.similarity.cosine(flat[i * $dims..(i + 1) * $dims], $vector)] AS scores
"""

# One project user's messages nearest $vector, filtered inside the vector index (approximate, HNSW);
# the index's $fetch nearest are narrowed by {scope} and scored exactly. `fetched` says how many the
# index gave: fewer than $fetch means it gave every message of the user.
USER_VECTOR_SEARCH = f"""
CYPHER 25
MATCH (m:Memory)
  SEARCH m IN (
    VECTOR INDEX {VECTOR_INDEX} FOR $vector
    WHERE m.project_id = $project_id AND m.user_id = $user_id
    LIMIT $fetch
  )
WITH collect(m) AS found
RETURN size(found) AS fetched,
       [m IN found WHERE {{scope}} AND m.embedding IS NOT NULL
        | {{{{id: m.id, score: vector.similarity.cosine(m.embedding, $vector)}}}}] AS hits
"""

FULLTEXT = """
CALL db.index.fulltext.queryNodes($index, $lucene, {{limit: $fetch}}) YIELD node AS m, score
WITH m, score
WHERE m.project_id = $project_id AND {scope} {extra}
RETURN m.id AS id, score
ORDER BY score DESC, id
LIMIT $limit
"""

# messages by their indexed words (memory.text), each with the next message of its conversation that
# the scope sees: it gets MEMORY_CONTEXT_WEIGHT of the hit's score (selectors.MessageSearch)
MESSAGE_FULLTEXT = """
CALL db.index.fulltext.queryNodes($index, $lucene, {{limit: $fetch}}) YIELD node AS m, score
WITH m, score
WHERE m.project_id = $project_id AND {scope}
WITH m, score
ORDER BY score DESC, m.id
LIMIT $limit
OPTIONAL MATCH (m)-[:NEXT]->(n:Memory)
WHERE n.project_id = $project_id AND {next_scope}
RETURN m.id AS id, score, n.id AS next_id, m.search_text AS words, m.author_name AS author,
       n.author_name AS next_author
"""

RECENT = """
MATCH (m:Memory {{project_id: $project_id}})
WHERE {scope}
RETURN m.id AS id, m.timestamp AS timestamp
ORDER BY m.timestamp DESC, m.seq DESC, m.id
LIMIT $limit
"""

# a message as reads return it (MEMORIES_HYDRATE, CONVERSATION_WITH_RECENT)
_MEMORY_FIELDS = """.id, .text, .role, .timestamp, .application_id, .agent_id, .user_id, .thread_id,
.message_id, .author_name, .conversation_id, .seq"""

MEMORIES_HYDRATE = f"""
UNWIND $ids AS wanted
MATCH (m:Memory {{id: wanted}})
WHERE m.project_id = $project_id
RETURN m {{{_MEMORY_FIELDS}, metadata_pairs: {METADATA_PAIRS}}} AS memory
"""

# Summaries, facts and preferences of a scope, scored exactly against the query vector.
LEVEL_VECTOR = """
MATCH (n:{label} {{project_id: $project_id}})
WHERE {scope} AND n.embedding IS NOT NULL {extra}
WITH n, vector.similarity.cosine(n.embedding, $vector) AS score
ORDER BY score DESC, n.id
LIMIT $limit
RETURN n.id AS id, score
"""

LEVEL_RECENT = """
MATCH (n:{label} {{project_id: $project_id}})
WHERE {scope} {extra}
RETURN n.id AS id, 0.0 AS score
ORDER BY coalesce(n.created_at, n.valid_from) DESC, n.id
LIMIT $limit
"""

SUMMARIES_OF_CONVERSATIONS = """
MATCH (s:ConversationSummary)-[:SUMMARIZES]->(c:Conversation)
WHERE c.id IN $conversation_ids AND s.project_id = $project_id
RETURN s.id AS id
ORDER BY s.last_seq DESC
"""

LEVEL_HYDRATE = """
UNWIND $ids AS wanted
CALL (wanted) {
  MATCH (n:ConversationSummary {id: wanted}) RETURN n
  UNION
  MATCH (n:Fact {id: wanted}) RETURN n
  UNION
  MATCH (n:Preference {id: wanted}) RETURN n
}
WITH n WHERE n.project_id = $project_id
RETURN n {.id, .text, .application_id, .agent_id, .user_id, .thread_id, .conversation_id, .created_at,
          .first_seq, .last_seq, .mode, .subject, .predicate, .object, .category, .value, .sentiment,
          .valid_from, .valid_until, .superseded_by, .confidence, .source_message_ids} AS node,
       labels(n) AS labels
"""

# The context turns of messages (memory.context): up to $neighbours messages before and after each of
# $ids in its conversation, nearest first by `seq` (the NEXT chain's order; a deleted message's gap is
# skipped), among those {scope} keeps (fixed text over `n`: the scope's visible messages that pass the
# search's filters); a failed chat reply is no context.
# The turns each summary covers (a context's summaries point at them), visible to the scope, in order
SUMMARY_SOURCES = """
UNWIND $summaries AS s
MATCH (m:Memory {{conversation_id: s.conversation_id}})
WHERE m.project_id = $project_id AND m.seq >= s.first_seq AND m.seq <= s.last_seq AND {scope}
WITH s, m ORDER BY m.seq
RETURN s.id AS id, collect(m.id) AS sources
"""

MESSAGE_NEIGHBOURS = f"""
UNWIND $ids AS wanted
MATCH (m:Memory {{{{id: wanted}}}})
WHERE m.project_id = $project_id
CALL (m) {{{{
  MATCH (n:Memory {{{{conversation_id: m.conversation_id}}}})
  WHERE n.project_id = $project_id AND n.seq < m.seq AND coalesce(n.status, 'stored') <> 'failed'
    AND {{scope}}
  WITH n ORDER BY n.seq DESC LIMIT $neighbours
  RETURN n
  UNION ALL
  MATCH (n:Memory {{{{conversation_id: m.conversation_id}}}})
  WHERE n.project_id = $project_id AND n.seq > m.seq AND coalesce(n.status, 'stored') <> 'failed'
    AND {{scope}}
  WITH n ORDER BY n.seq LIMIT $neighbours
  RETURN n
}}}}
RETURN m.id AS hit_id, m.seq AS hit_seq, n {{{{{_MEMORY_FIELDS}}}}} AS memory
"""

# --- list / get / delete ---------------------------------------------------------------------------

LIST = f"""
MATCH (m:Memory {{{{project_id: $project_id}}}})
WHERE {{scope}} AND ($after_ts IS NULL OR m.timestamp < $after_ts
                   OR (m.timestamp = $after_ts AND m.id > $after_id))
RETURN m {{{{.id, .text, .role, .timestamp, .application_id, .agent_id, .user_id, .thread_id, .message_id,
          .author_name, .conversation_id, .seq, metadata_pairs: {METADATA_PAIRS}}}}} AS memory
ORDER BY m.timestamp DESC, m.id
LIMIT $limit
"""

GET = f"""
MATCH (m:Memory {{id: $id}})
WHERE m.project_id = $project_id
OPTIONAL MATCH (d)-[:EXTRACTED_FROM]->(m)
OPTIONAL MATCH (m)-[:MENTIONS]->(e:Entity)
WITH m, collect(DISTINCT d.id) AS derived_ids, collect(DISTINCT e.name) AS entities
OPTIONAL MATCH (m)-[:REFERENCES]->(doc:Document)
OPTIONAL MATCH (m)-[:REFERENCES]->(ch:Chunk {{document_id: doc.id}})
WITH m, derived_ids, entities, doc, collect(ch.id) AS chunk_ids
RETURN m {{.id, .text, .role, .timestamp, .application_id, .agent_id, .user_id, .thread_id, .message_id,
          .author_name, .conversation_id, .seq, metadata_pairs: {METADATA_PAIRS}}} AS memory,
       derived_ids, entities,
       [r IN collect(CASE WHEN doc IS NULL THEN null ELSE {{document_id: doc.id, title: doc.title,
                                                           chunk_ids: chunk_ids}} END)
        WHERE r IS NOT NULL] AS references
"""

# Deleting one memory: facts and preferences drawn from it alone go with it, others lose it as a
# source; summaries whose span covers it go (they hold its words) and the span is summarised again
# later; the NEXT chain closes over the gap.
DELETE_ONE = """
MATCH (m:Memory {id: $id})
WHERE m.project_id = $project_id
MATCH (m)-[:PART_OF]->(c:Conversation)
SET c._lock = true
WITH m, c
OPTIONAL MATCH (prev:Memory)-[:NEXT]->(m)
OPTIONAL MATCH (m)-[:NEXT]->(next:Memory)
FOREACH (_ IN CASE WHEN prev IS NULL OR next IS NULL THEN [] ELSE [1] END | CREATE (prev)-[:NEXT]->(next))
WITH m, c, prev
CALL (m) {
  OPTIONAL MATCH (d)-[:EXTRACTED_FROM]->(m)
  WITH d WHERE d IS NOT NULL
  SET d.source_message_ids = [x IN coalesce(d.source_message_ids, []) WHERE x <> m.id]
  WITH d, COUNT { (d)-[:EXTRACTED_FROM]->(other) WHERE other <> m } AS others
  WITH d WHERE others = 0
  DETACH DELETE d
  RETURN count(*) AS derived
}
CALL (m, c) {
  OPTIONAL MATCH (s:ConversationSummary)-[:SUMMARIZES]->(c)
  WHERE s.first_seq <= m.seq AND m.seq <= s.last_seq
  WITH s WHERE s IS NOT NULL
  OPTIONAL MATCH (d2)-[:EXTRACTED_FROM]->(s)
  DETACH DELETE d2
  WITH DISTINCT s
  WITH s, s.first_seq AS first
  DETACH DELETE s
  RETURN min(first) AS reopened, count(*) AS summaries
}
// the title is drawn from the opening messages (memory.extraction.describe): it goes with one of them
SET c.message_count = c.message_count - 1,
    c.title = CASE WHEN m.seq <= coalesce(c.described_seq, 0) THEN null ELSE c.title END,
    c.summarized_seq = CASE WHEN reopened IS NULL THEN c.summarized_seq
                            WHEN c.summarized_seq < reopened - 1 THEN c.summarized_seq
                            ELSE reopened - 1 END,
    c.last_memory_id = CASE WHEN c.last_memory_id = m.id THEN prev.id ELSE c.last_memory_id END
REMOVE c._lock
DETACH DELETE m
RETURN derived, summaries
"""

# --- forget -------------------------------------------------------------------------------------------

# One batch of a forget: the scope's memories and whatever was drawn from them (facts and
# preferences whose other sources lie outside the scope included: their text may hold the
# forgotten words). Relationships (PART_OF, NEXT, MENTIONS, EXTRACTED_FROM) go with DETACH.
FORGET_BATCH = """
MATCH (n:{label} {{project_id: $project_id}})
WHERE {scope}
WITH n LIMIT $batch
OPTIONAL MATCH (d)-[:EXTRACTED_FROM]->(n)
WITH collect(DISTINCT n) AS ns, collect(DISTINCT d) AS ds
WITH ns, ds, size([d IN ds WHERE d:Fact]) AS facts, size([d IN ds WHERE d:Preference]) AS preferences,
     size([d IN ds WHERE d:ConversationSummary]) AS summaries
FOREACH (d IN ds | DETACH DELETE d)
FOREACH (n IN ns | DETACH DELETE n)
RETURN size(ns) AS deleted, size(ds) AS derived, facts, preferences, summaries
"""

# Last step: the scope's conversations, locked first so a store running now either finished
# (and its messages are deleted here) or starts after (and makes a new conversation).
FORGET_CONVERSATIONS = """
MATCH (c:Conversation {{project_id: $project_id}})
WHERE {scope}
SET c._lock = true
WITH c
OPTIONAL MATCH (x)-[:PART_OF|SUMMARIZES]->(c)
OPTIONAL MATCH (d)-[:EXTRACTED_FROM]->(x)
WITH c, collect(DISTINCT x) AS xs, collect(DISTINCT d) AS ds
FOREACH (d IN ds | DETACH DELETE d)
FOREACH (x IN xs | DETACH DELETE x)
DETACH DELETE c
RETURN count(c) AS deleted, sum(size(xs)) AS stragglers, sum(size(ds)) AS derived
"""

# the profiles of the scope's user, or of every user of the application when the scope is the
# application alone (profiles are per application and user, not per agent or thread)
FORGET_PROFILES = """
MATCH (p:UserProfile {project_id: $project_id})
WHERE (($user_id IS NOT NULL AND p.user_id = $user_id)
       OR ($user_id IS NULL AND $agent_id IS NULL AND $thread_id IS NULL AND $application_id IS NOT NULL))
  AND ($application_id IS NULL OR p.application_id = $application_id)
DETACH DELETE p
RETURN count(*) AS deleted
"""

# --- summaries --------------------------------------------------------------------------------------

CONVERSATIONS_IN_SCOPE = """
MATCH (c:Conversation {{project_id: $project_id}})
WHERE {scope}
RETURN c.id AS id
ORDER BY c.ended_at DESC
LIMIT $limit
"""

PENDING_MESSAGES = """
MATCH (c:Conversation {id: $conversation_id})
WHERE c.project_id = $project_id
MATCH (m:Memory)-[:PART_OF]->(c)
WHERE m.seq > coalesce(c.summarized_seq, 0)
WITH c, m ORDER BY m.seq
WITH c, collect(m {.id, .seq, .role, .text, .timestamp, .token_count})[..$limit] AS messages
RETURN c.summarized_seq AS summarized_seq, messages
"""

# Written only if nobody summarised the span meanwhile and none of its messages was forgotten.
SUMMARY_WRITE = """
MATCH (c:Conversation {id: $conversation_id})
WHERE c.project_id = $project_id
SET c._lock = true
WITH c
WHERE coalesce(c.summarized_seq, 0) = $summarized_seq
  AND COUNT { MATCH (m:Memory)-[:PART_OF]->(c) WHERE m.id IN $memory_ids } = size($memory_ids)
CREATE (s:ConversationSummary {id: $id, project_id: $project_id, conversation_id: c.id, text: $text,
        first_seq: $first_seq, last_seq: $last_seq, message_count: size($memory_ids), mode: $mode,
        created_at: $created_at, application_id: c.application_id, agent_id: c.agent_id,
        user_id: c.user_id, thread_id: c.thread_id, scope_tokens: c.scope_tokens, consolidated: false,
        accessibility: c.accessibility})
SET s.embedding = $embedding
CREATE (s)-[:SUMMARIZES]->(c)
SET c.summarized_seq = $last_seq, c.summary = $text,
    c.pending_tokens = CASE WHEN c.last_seq = $last_seq THEN 0
                            ELSE coalesce(c.pending_tokens, 0) - $tokens END
REMOVE c._lock
RETURN s.id AS id
"""

# --- facts, preferences, profiles, mentions ------------------------------------------------------------

SOURCES_ALIVE = """
CALL () {
  MATCH (src:Memory) WHERE src.id IN $ids RETURN src
  UNION
  MATCH (src:ConversationSummary) WHERE src.id IN $ids RETURN src
}
WITH * WHERE src.project_id = $project_id
RETURN collect(src.id) AS ids
"""

# A job's facts (or preferences) are written in a few batched statements: the current statements of
# all its keys are read once, decisions are made in Python, then creates, added sources,
# supersessions and profile links are each one UNWIND.
DERIVED_CURRENT = """
UNWIND $keys AS k
MATCH (n:{label} {{key: k}})
WHERE n.project_id = $project_id AND n.valid_until IS NULL
RETURN k AS key, n.id AS id, n.value_norm AS value_norm, n.valid_from AS valid_from
"""

_ROW_SOURCES = """CALL (row) {{
  MATCH (src:Memory) WHERE src.id IN row.sources RETURN src
  UNION
  MATCH (src:ConversationSummary) WHERE src.id IN row.sources RETURN src
}}"""

DERIVED_CREATE = (
    """
UNWIND $rows AS row
CREATE (n:{label})
SET n = row.props
WITH n, row
"""
    + _ROW_SOURCES
    + """
WITH n, src WHERE src.project_id = $project_id
CREATE (n)-[:EXTRACTED_FROM]->(src)
RETURN count(DISTINCT n) AS created
"""
)

DERIVED_ADD_SOURCES = (
    """
UNWIND $rows AS row
MATCH (n:{label} {{id: row.id}}) WHERE n.project_id = $project_id
"""
    + _ROW_SOURCES
    + """
WITH n, src WHERE src.project_id = $project_id
MERGE (n)-[:EXTRACTED_FROM]->(src)
WITH n, collect(DISTINCT src.id) AS added
SET n.source_message_ids = coalesce(n.source_message_ids, []) +
    [x IN added WHERE NOT x IN coalesce(n.source_message_ids, [])]
RETURN count(n) AS updated
"""
)

# A newer statement with the same key supersedes the current one; history stays.
DERIVED_SUPERSEDE = """
UNWIND $rows AS row
MATCH (new:{label} {{id: row.new_id}}), (old:{label} {{id: row.old_id}})
WHERE new.project_id = $project_id AND old.project_id = $project_id
SET old.valid_until = new.valid_from, old.superseded_by = new.id
CREATE (new)-[:SUPERSEDES]->(old)
"""

PROFILE_LINK = """
MERGE (p:UserProfile {project_id: $project_id, key: $key})
  ON CREATE SET p.id = $id, p.user_id = $user_id, p.application_id = $application_id,
                p.scope_tokens = $scope_tokens
SET p.updated_at = $now
WITH p
UNWIND $preference_ids AS preference_id
MATCH (pref:Preference {id: preference_id}) WHERE pref.project_id = $project_id
MERGE (p)-[:HAS_PREFERENCE]->(pref)
"""

# A message mentions the entities whose names are among its word spans; knowledge resolves the names
# (memory.services._link_mentions) and the links go to the element ids it returns.
MENTIONS_LINK = """
UNWIND $links AS link
MATCH (m:Memory {id: link.memory_id}) WHERE m.project_id = $project_id
UNWIND link.refs AS ref
MATCH (e) WHERE elementId(e) = ref AND e.project_id = $project_id
MERGE (m)-[:MENTIONS]->(e)
RETURN count(*) AS links
"""

MARK_PROCESSED = """
UNWIND $ids AS wanted
MATCH (m:Memory {id: wanted}) WHERE m.project_id = $project_id
SET m.processed = true
"""

MEMORIES_BY_ID = """
UNWIND $ids AS wanted
MATCH (m:Memory {id: wanted}) WHERE m.project_id = $project_id
RETURN m.id AS id, m.role AS role, m.text AS text, m.timestamp AS timestamp,
       m.author_name AS author_name, m.conversation_id AS conversation_id, m.seq AS seq
ORDER BY m.conversation_id, m.seq
"""

CONVERSATION_GET = """
MATCH (c:Conversation {id: $id}) WHERE c.project_id = $project_id
RETURN c {.id, .key, .application_id, .agent_id, .user_id, .thread_id, .scope_tokens, .last_seq,
          .summarized_seq, .pending_tokens, .message_count, .accessibility} AS conversation
"""

# --- consolidation -------------------------------------------------------------------------------------

CONSOLIDATE_CANDIDATES = """
MATCH (m:Memory {{project_id: $project_id}})
WHERE m.timestamp < $cutoff AND {scope}
RETURN m.conversation_id AS conversation_id, count(m) AS old
ORDER BY conversation_id
LIMIT $limit
"""

OLD_MESSAGES = """
MATCH (m:Memory {conversation_id: $conversation_id})
WHERE m.project_id = $project_id AND m.timestamp < $cutoff
RETURN m.id AS id, m.seq AS seq, m.role AS role, m.text AS text, m.timestamp AS timestamp,
       m.token_count AS token_count, m.processed AS processed
ORDER BY m.seq
LIMIT $limit
"""

# Fold old messages into one consolidated summary: what was drawn from them (facts, preferences,
# entity mentions) is re-attached to the summary, then the messages go.
CONSOLIDATE_WRITE = """
MATCH (c:Conversation {id: $conversation_id})
WHERE c.project_id = $project_id
SET c._lock = true
WITH c
MATCH (m:Memory)-[:PART_OF]->(c) WHERE m.id IN $memory_ids
WITH c, collect(m) AS ms
WHERE size(ms) = size($memory_ids)
CREATE (s:ConversationSummary {id: $id, project_id: $project_id, conversation_id: c.id, text: $text,
        first_seq: $first_seq, last_seq: $last_seq, message_count: size(ms), mode: $mode,
        created_at: $created_at, application_id: c.application_id, agent_id: c.agent_id,
        user_id: c.user_id, thread_id: c.thread_id, scope_tokens: c.scope_tokens, consolidated: true,
        covers_from: $covers_from, covers_to: $covers_to, accessibility: c.accessibility})
SET s.embedding = $embedding
CREATE (s)-[:SUMMARIZES]->(c)
WITH c, ms, s
CALL (ms, s) {
  UNWIND ms AS m
  MATCH (d)-[:EXTRACTED_FROM]->(m)
  MERGE (d)-[:EXTRACTED_FROM]->(s)
  RETURN count(DISTINCT d) AS kept
}
CALL (ms, s) {
  UNWIND ms AS m
  MATCH (m)-[:MENTIONS]->(e)
  MERGE (s)-[:MENTIONS]->(e)
  RETURN count(DISTINCT e) AS entities
}
CALL (c, s) {
  MATCH (old:ConversationSummary)-[:SUMMARIZES]->(c)
  WHERE old <> s AND old.first_seq >= $first_seq AND old.last_seq <= $last_seq
  DETACH DELETE old
  RETURN count(*) AS replaced
}
WITH c, ms, s, kept, entities, replaced, [m IN ms | m.id] AS ids
FOREACH (m IN ms | DETACH DELETE m)
SET c.message_count = c.message_count - size(ids),
    c.consolidated_count = coalesce(c.consolidated_count, 0) + size(ids),
    c.summarized_seq = CASE WHEN coalesce(c.summarized_seq, 0) < $last_seq THEN $last_seq
                            ELSE c.summarized_seq END,
    c.last_memory_id = CASE WHEN c.last_memory_id IN ids THEN null ELSE c.last_memory_id END
REMOVE c._lock
RETURN s.id AS id, size(ids) AS folded, kept, entities, replaced
"""

# --- privacy and retention (the memory side of curation) -------------------------------------------

# A conversation's privacy settings. Its messages, summaries and what was drawn from them carry the
# conversation's accessibility so searches can filter on it; the expiry follows the retention
# (days after the last message) unless a curator fixed a date.
CONVERSATION_PRIVACY_SET = """
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

CONVERSATION_PRIVACY_GET = """
MATCH (c:Conversation {id: $id}) WHERE c.project_id = $project_id
RETURN c {.id, .user_id, .thread_id, .application_id, .agent_id, .retention_days, .anonymize,
          .accessibility, .expires_at, .expires_fixed, .message_count} AS conversation
"""

MESSAGES_BEFORE_PREVIEW = """
MATCH (m:Memory {project_id: $project_id})
WHERE m.timestamp < $cutoff AND ($only_plain = false OR m.anonymized IS NULL)
RETURN count(m) AS messages, count(DISTINCT m.conversation_id) AS conversations
"""

# The next page of messages older than the cutoff and not yet anonymised, after the cursor
# (timestamp, id): a resumed run goes on from there.
MESSAGES_BEFORE_PLAIN_PAGE = """
MATCH (m:Memory {project_id: $project_id})
WHERE m.timestamp < $cutoff AND m.anonymized IS NULL
  AND (m.timestamp > $after_ts OR (m.timestamp = $after_ts AND m.id > $after_id))
RETURN m.id AS id, m.text AS text, m.role AS role, m.author_name AS author_name,
       m.conversation_id AS conversation_id,
       m.timestamp AS timestamp
ORDER BY m.timestamp, m.id
LIMIT $batch
"""

MESSAGES_BEFORE_IDS = """
MATCH (m:Memory {project_id: $project_id})
WHERE m.timestamp < $cutoff
WITH m LIMIT $batch
RETURN collect(m.id) AS ids
"""

# Purging messages (deleted, or their text anonymised): what holds their words goes too — facts
# and preferences drawn from them, summaries whose span covers them (and what was drawn from those),
# the conversation's cached summary text. Each conversation is locked first, as a store locks it.
MESSAGES_PURGE_DERIVED = """
UNWIND $ids AS wanted
MATCH (m:Memory {id: wanted})
WHERE m.project_id = $project_id
MATCH (m)-[:PART_OF]->(c:Conversation)
WITH c, collect(m) AS ms
SET c._lock = true
WITH c, ms
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
REMOVE c._lock
RETURN sum(derived) AS derived, sum(summaries) AS summaries
"""

MESSAGES_DELETE = """
UNWIND $ids AS wanted
MATCH (m:Memory {id: wanted})
WHERE m.project_id = $project_id
MATCH (m)-[:PART_OF]->(c:Conversation)
WITH c, collect(m) AS ms
SET c._lock = true
SET c.message_count = c.message_count - size(ms),
    c.last_memory_id = CASE WHEN c.last_memory_id IN [m IN ms | m.id] THEN null ELSE c.last_memory_id END,
    c.title = CASE WHEN any(m IN ms WHERE m.seq <= coalesce(c.described_seq, 0)) THEN null ELSE c.title END
FOREACH (m IN ms | DETACH DELETE m)
REMOVE c._lock
RETURN sum(size(ms)) AS deleted
"""

# Anonymised text replaces the original in one statement per batch: text, author, embedding, sentence vectors
# and the flag change together, so no message is ever half-anonymised; its entity mentions go.
MESSAGES_ANONYMISED_WRITE = """
UNWIND $rows AS row
MATCH (m:Memory {id: row.id})
WHERE m.project_id = $project_id
SET m.text = row.text, m.author_name = row.author_name, m.embedding = row.embedding,
    m.sentence_embeddings = row.sentence_embeddings,
    m.search_text = row.search_text, m.mention_keys = row.mention_keys,
    m.anonymized = true, m.anonymized_at = $now, m.processed = true
// string metadata goes (memory.metadata.anonymised): its properties set to null, the keys kept listed
SET m += row.metadata_removed, m.metadata_keys = row.metadata_keys
WITH m
OPTIONAL MATCH (m)-[r:MENTIONS]->()
DELETE r
WITH DISTINCT m
// the conversation's title may quote the original words (it is derived again from the new text)
OPTIONAL MATCH (m)-[:PART_OF]->(c:Conversation)
FOREACH (_ IN CASE WHEN c IS NULL THEN [] ELSE [1] END | SET c.title = null)
RETURN count(DISTINCT m) AS anonymised
"""

CONVERSATION_PLAIN_MESSAGES = """
MATCH (m:Memory {conversation_id: $conversation_id})
WHERE m.project_id = $project_id AND m.anonymized IS NULL
RETURN m.id AS id, m.text AS text, m.role AS role, m.author_name AS author_name,
       m.conversation_id AS conversation_id,
       m.timestamp AS timestamp
ORDER BY m.seq
LIMIT $batch
"""

CONVERSATION_AUTHOR_NAMES = """
MATCH (m:Memory {conversation_id: $conversation_id})
WHERE m.project_id = $project_id AND m.author_name IS NOT NULL AND m.anonymized IS NULL
RETURN collect(DISTINCT m.author_name) AS names
"""

CONVERSATIONS_EXPIRED_PREVIEW = """
MATCH (c:Conversation {project_id: $project_id})
WHERE c.expires_at IS NOT NULL AND datetime(c.expires_at) <= datetime($cutoff)
  AND c.anonymized_at IS NULL
WITH c, CASE WHEN $force_anonymise OR c.anonymize THEN 'anonymise' ELSE 'delete' END AS action
RETURN action, count(c) AS conversations, sum(coalesce(c.message_count, 0)) AS messages
"""

CONVERSATIONS_EXPIRED_PAGE = """
MATCH (c:Conversation {project_id: $project_id})
WHERE c.expires_at IS NOT NULL AND datetime(c.expires_at) <= datetime($cutoff)
  AND c.anonymized_at IS NULL AND c.id > $after_id
RETURN c.id AS id, coalesce(c.anonymize, false) AS anonymize
ORDER BY c.id
LIMIT $batch
"""

# After its messages are anonymised a conversation stays, without summaries or title, and is not
# picked by a retention run again.
CONVERSATION_ANONYMISED_MARK = """
MATCH (c:Conversation {id: $conversation_id})
WHERE c.project_id = $project_id
SET c._lock = true
WITH c
OPTIONAL MATCH (s:ConversationSummary)-[:SUMMARIZES]->(c)
OPTIONAL MATCH (d)-[:EXTRACTED_FROM]->(s)
WITH c, collect(DISTINCT s) AS ss, collect(DISTINCT d) AS ds
FOREACH (d IN ds | DETACH DELETE d)
FOREACH (s IN ss | DETACH DELETE s)
SET c.summary = null, c.title = null, c.anonymized_at = $now, c.summarized_seq = c.last_seq,
    c.pending_tokens = 0
REMOVE c._lock
RETURN size(ss) AS summaries
"""

# --- conversations and their references (seed 003) -------------------------------------------------

# Who may read a conversation: a reader naming a user sees that user's conversations only; without a
# user, every shared one. A private conversation is read only by a reader naming its owning user.
CONVERSATION_VISIBLE = """($user_id IS NULL OR c.user_id = $user_id)
  AND (coalesce(c.accessibility, 'shared') <> 'private' OR c.user_id = $user_id)"""

# a conversation's header as reads return it (CONVERSATION_BRIEF, CONVERSATION_WITH_RECENT)
_CONVERSATION_FIELDS = """.id, .title, .summary, .sentiment, .application_id, .agent_id, .user_id,
.thread_id, .started_at, .ended_at, .message_count, accessibility: coalesce(c.accessibility, 'shared')"""

CONVERSATION_BRIEF = f"""
MATCH (c:Conversation {{id: $id}}) WHERE c.project_id = $project_id AND {CONVERSATION_VISIBLE}
RETURN c {{{_CONVERSATION_FIELDS}}} AS conversation
"""

# The documents a conversation's messages reference, with how often and when.
CONVERSATION_REFERENCES = """
MATCH (m:Memory {conversation_id: $id})-[:REFERENCES]->(d:Document)
WHERE m.project_id = $project_id
WITH d, count(m) AS messages, min(m.timestamp) AS first_at, max(m.timestamp) AS last_at,
     collect(m.id)[..20] AS message_ids
RETURN d.id AS document_id, d.title AS title, d.author AS author, d.source_path AS source_path,
       toString(d.updated_at) AS updated_at, messages, first_at, last_at, message_ids
ORDER BY first_at, document_id
SKIP $offset LIMIT $limit
"""

# The conversations whose messages reference a document, most recent reference first.
DOCUMENT_CONVERSATIONS = f"""
MATCH (m:Memory)-[:REFERENCES]->(d:Document {{id: $document_id}})
WHERE d.project_id = $project_id AND m.project_id = $project_id
WITH m.conversation_id AS cid, count(m) AS messages, max(m.timestamp) AS last_at
MATCH (c:Conversation {{id: cid}}) WHERE c.project_id = $project_id AND {CONVERSATION_VISIBLE}
RETURN c {{.id, .title, .user_id, .thread_id, .started_at, .ended_at}} AS conversation, messages,
       last_at AS last_referenced_at
ORDER BY last_at DESC, c.id
SKIP $offset LIMIT $limit
"""

# --- conversation-aware search (seed 003) ------------------------------------------------------------

# Messages of the user's other conversations that are not private (the vector search's condition).
PAST_MESSAGES_WHERE = (
    "m.user_id = $user_id AND m.conversation_id <> $current_conversation"
    " AND coalesce(m.accessibility, 'shared') <> 'private'"
)

MESSAGES_REFERENCED_DOCUMENTS = """
UNWIND $ids AS wanted
MATCH (m:Memory {id: wanted})-[:REFERENCES]->(d:Document)
WHERE m.project_id = $project_id
RETURN DISTINCT d.id AS id
"""

# One read of a conversation: its header (as CONVERSATION_BRIEF) and its latest messages but failed
# replies, newest first (as MEMORIES_HYDRATE gives them).
CONVERSATION_WITH_RECENT = f"""
MATCH (c:Conversation {{id: $id}}) WHERE c.project_id = $project_id AND {CONVERSATION_VISIBLE}
CALL (c) {{
  MATCH (m:Memory {{conversation_id: c.id}})
  WHERE m.project_id = $project_id AND coalesce(m.status, 'stored') <> 'failed'
  WITH m ORDER BY m.seq DESC LIMIT $limit
  RETURN collect(m {{{_MEMORY_FIELDS}}}) AS recent
}}
RETURN c {{{_CONVERSATION_FIELDS}}} AS conversation, recent
"""

CONVERSATION_TITLE = """
MATCH (c:Conversation {id: $conversation_id}) WHERE c.project_id = $project_id
RETURN c.title AS title
"""


# The first messages of a conversation (what its title and sentiment are drawn from).
CONVERSATION_OPENING = """
MATCH (m:Memory {conversation_id: $conversation_id})
WHERE m.project_id = $project_id AND coalesce(m.status, 'stored') <> 'failed'
WITH m ORDER BY m.seq LIMIT $limit
RETURN m.id AS id, m.role AS role, m.text AS text, m.timestamp AS timestamp
"""

# Written unless a curator anonymised the conversation meanwhile (its title must stay cleared).
CONVERSATION_DESCRIBE = """
MATCH (c:Conversation {id: $conversation_id})
WHERE c.project_id = $project_id AND c.anonymized_at IS NULL
SET c.title = $title, c.sentiment = $sentiment, c.description_mode = $mode, c.described_seq = c.last_seq
RETURN c.id AS id
"""

CONVERSATIONS_LIST = f"""
MATCH (c:Conversation {{project_id: $project_id}})
WHERE {CONVERSATION_VISIBLE}
WITH c ORDER BY c.ended_at DESC, c.id
SKIP $offset LIMIT $limit
RETURN c {{.id, .title, .summary, .sentiment, .application_id, .agent_id, .user_id, .thread_id,
          .started_at, .ended_at, .message_count, accessibility: coalesce(c.accessibility, 'shared')}}
       AS conversation
"""

CONVERSATIONS_COUNT = f"""
MATCH (c:Conversation {{project_id: $project_id}})
WHERE {CONVERSATION_VISIBLE}
RETURN count(c) AS n
"""

# One page of a conversation's messages, with the concepts each mentions and the documents it references.
CONVERSATION_MESSAGES = """
MATCH (m:Memory {conversation_id: $conversation_id})
WHERE m.project_id = $project_id
WITH m ORDER BY m.seq SKIP $offset LIMIT $limit
OPTIONAL MATCH (m)-[:MENTIONS]->(e:Entity)
WITH m, collect(DISTINCT e.name) AS mentions
OPTIONAL MATCH (m)-[:REFERENCES]->(d:Document)
WITH m, mentions, collect(DISTINCT d.id) AS references
RETURN m {.id, .seq, .role, .text, .timestamp, .author_name, .message_id, .status} AS message, mentions,
       references
ORDER BY m.seq
"""

# Topics: the communities of the entities the conversation's messages mention, by mentions.
CONVERSATION_TOPICS = """
MATCH (m:Memory {conversation_id: $conversation_id})-[:MENTIONS]->(e:Entity)
WHERE m.project_id = $project_id
WITH e, count(m) AS mentions
OPTIONAL MATCH (e)-[:IN_COMMUNITY]->(k:Community {level: 0})
WITH k, e, mentions ORDER BY mentions DESC, e.name
WITH k, sum(mentions) AS mentions, collect(e.name)[..8] AS entities
RETURN CASE WHEN k IS NULL THEN null ELSE k.id END AS community_id, k.title AS title, entities, mentions
ORDER BY mentions DESC, title
LIMIT $limit
"""
