"""Graph nodes of the core app and the base class every tenant node derives from."""

from __future__ import annotations

from neomodel import DateTimeProperty, IntegerProperty, StringProperty, StructuredNode, UniqueIdProperty


class TenantNode(StructuredNode):
    """Every node: a unique `id` (uuid4 string; `uid` in Python because neomodel reserves `id`)
    and an indexed `project_id`. Tenancy is this property, never a relationship."""

    __abstract_node__ = True

    uid = UniqueIdProperty(db_property="id")
    project_id = StringProperty(required=True, index=True)


class ProjectNode(TenantNode):
    """Mirror of the SQL Project (its `project_id` is its own id)."""

    __label__ = "Project"

    name = StringProperty(required=True)
    embedder = StringProperty(required=True)
    embedding_dimensions = IntegerProperty(required=True)
    created_at = DateTimeProperty(default_now=True)
