"""Agent memory nodes (DESIGN.md section 3, seeds 000, 001 and 003). Writes go through memory.cypher;
these classes define labels, constraints and indexes and serve the admin.

Every node that holds user text also carries its scope (`application_id`, `agent_id`, `user_id`,
`thread_id`, any of which may be null) and `scope_tokens`: one opaque token per scope value, so
the fulltext index can require a scope exactly (see memory.scope).
"""

from __future__ import annotations

from neomodel import (
    ArrayProperty,
    BooleanProperty,
    FloatProperty,
    IntegerProperty,
    StringProperty,
)

from core.nodes import TenantNode


class ScopedNode(TenantNode):
    __abstract_node__ = True

    application_id = StringProperty(index=True)
    agent_id = StringProperty(index=True)
    user_id = StringProperty(index=True)
    thread_id = StringProperty(index=True)
    scope_tokens = StringProperty()


class Memory(ScopedNode):
    """One stored message. `timestamp` is ISO-8601 UTC (seed 000), so it sorts as text."""

    text = StringProperty()
    role = StringProperty()
    timestamp = StringProperty(index=True)
    embedding = ArrayProperty(FloatProperty())
    message_id = StringProperty()
    author_name = StringProperty()
    conversation_id = StringProperty(index=True)
    seq = IntegerProperty()
    token_count = IntegerProperty()
    processed = BooleanProperty()
    status = StringProperty()  # "failed" for a chat reply the LLM could not give
    # the caller's metadata keys, in the order given; each key's value is the property `meta_<key>`
    # (memory.metadata: no property declared here may start with that prefix)
    metadata_keys = ArrayProperty(StringProperty())


class Conversation(ScopedNode):
    """One per scope (thread). `key` identifies the scope within the project."""

    key = StringProperty()
    title = StringProperty()
    sentiment = StringProperty()  # positive | neutral | negative | mixed (memory.extraction.describe)
    description_mode = StringProperty()  # llm | extractive
    summary = StringProperty()
    started_at = StringProperty()
    ended_at = StringProperty()
    message_count = IntegerProperty()
    last_seq = IntegerProperty()
    last_memory_id = StringProperty()
    summarized_seq = IntegerProperty()
    consolidated_count = IntegerProperty()
    retention_days = IntegerProperty()
    anonymize = BooleanProperty()
    accessibility = StringProperty()
    expires_at = StringProperty()


class ConversationSummary(ScopedNode):
    conversation_id = StringProperty(index=True)
    text = StringProperty()
    embedding = ArrayProperty(FloatProperty())
    first_seq = IntegerProperty()
    last_seq = IntegerProperty()
    message_count = IntegerProperty()
    mode = StringProperty()
    created_at = StringProperty()


class Fact(ScopedNode):
    """A statement about the user (or the world) taken from messages. A newer fact with the same
    `key` (subject + predicate) and another object supersedes this one: `valid_until` is set."""

    text = StringProperty()
    subject = StringProperty()
    predicate = StringProperty()
    object = StringProperty()
    key = StringProperty(index=True)
    confidence = FloatProperty()
    mode = StringProperty()
    valid_from = StringProperty()
    valid_until = StringProperty()
    superseded_by = StringProperty()
    source_message_ids = ArrayProperty(StringProperty())
    embedding = ArrayProperty(FloatProperty())


class Preference(ScopedNode):
    """Something the user likes or dislikes; a later opposite statement supersedes it."""

    text = StringProperty()
    category = StringProperty()
    value = StringProperty()
    key = StringProperty(index=True)
    sentiment = StringProperty()
    mode = StringProperty()
    valid_from = StringProperty()
    valid_until = StringProperty()
    superseded_by = StringProperty()
    source_message_ids = ArrayProperty(StringProperty())
    embedding = ArrayProperty(FloatProperty())


class UserProfile(TenantNode):
    """The aggregate of one user's current preferences and facts (per project and application)."""

    application_id = StringProperty(index=True)
    user_id = StringProperty(index=True)
    scope_tokens = StringProperty()
    key = StringProperty()
    preference_count = IntegerProperty()
    fact_count = IntegerProperty()
    updated_at = StringProperty()
