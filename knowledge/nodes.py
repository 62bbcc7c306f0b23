"""Knowledge graph nodes (DESIGN.md section 3). Writes go through knowledge.cypher; these classes
define labels, constraints and indexes and serve the admin."""

from __future__ import annotations

from neomodel import (
    ArrayProperty,
    BooleanProperty,
    DateTimeProperty,
    FloatProperty,
    IntegerProperty,
    StringProperty,
)

from core.nodes import TenantNode


class Document(TenantNode):
    title = StringProperty(required=True)
    source_path = StringProperty(index=True)
    mime_type = StringProperty()
    author = StringProperty()
    content_hash = StringProperty(index=True)
    doc_key = StringProperty()
    status = StringProperty(index=True)
    error = StringProperty()
    content = StringProperty()
    metadata_json = StringProperty()
    chunk_count = IntegerProperty()
    entity_count = IntegerProperty()
    relation_count = IntegerProperty()
    created_at = DateTimeProperty()
    updated_at = DateTimeProperty()


class Chunk(TenantNode):
    document_id = StringProperty(index=True)
    index = IntegerProperty()
    text = StringProperty()
    token_count = IntegerProperty()
    embedding = ArrayProperty(FloatProperty())


class Entity(TenantNode):
    name = StringProperty(required=True)
    key = StringProperty()
    type = StringProperty()
    description = StringProperty()
    embedding = ArrayProperty(FloatProperty())


class Community(TenantNode):
    community = StringProperty()
    level = IntegerProperty(index=True)
    title = StringProperty()
    summary = StringProperty()
    rank = FloatProperty()
    size = IntegerProperty()
    stale = BooleanProperty()
    embedding = ArrayProperty(FloatProperty())


class Source(TenantNode):
    path = StringProperty(required=True)
