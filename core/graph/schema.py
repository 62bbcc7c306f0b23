"""Constraints and indexes: derived from the neomodel classes plus each app's `cypher.SCHEMA`.

Every statement is `IF NOT EXISTS`, so applying the schema is idempotent and cheap; it runs at
start-up (`manage.py graph_schema`) and lazily before first use (`ensure_schema()`).
"""

from __future__ import annotations

import importlib
import threading
from types import ModuleType

from django.apps import apps
from neomodel import StructuredNode

from core import graph

_applied = False
_lock = threading.Lock()


def _node_classes() -> list[type[StructuredNode]]:
    """Concrete neomodel classes (neomodel gives only those a `__label__`) of installed apps."""
    app_modules = {config.name for config in apps.get_app_configs()}
    for name in app_modules:  # a class is only known once its module was imported
        try:
            importlib.import_module(f"{name}.nodes")
        except ModuleNotFoundError as exc:
            if exc.name != f"{name}.nodes":
                raise
    found: dict[str, type[StructuredNode]] = {}
    pending = list(StructuredNode.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if hasattr(cls, "__label__") and cls.__module__.split(".")[0] in app_modules:
            found[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return sorted(found.values(), key=lambda c: c.__label__)


def node_schema_statements() -> list[str]:
    statements: list[str] = []
    for cls in _node_classes():
        label = cls.__label__
        for name, prop in cls.defined_properties(aliases=False, rels=False).items():
            db_name = prop.get_db_property_name(name)
            if prop.unique_index:
                statements.append(
                    f"CREATE CONSTRAINT constraint_unique_{label}_{db_name} IF NOT EXISTS "
                    f"FOR (n:{label}) REQUIRE n.{db_name} IS UNIQUE"
                )
            elif prop.index:
                statements.append(
                    f"CREATE INDEX index_{label}_{db_name} IF NOT EXISTS FOR (n:{label}) ON (n.{db_name})"
                )
    return statements


def _app_cypher_modules() -> list[ModuleType]:
    """The `cypher` module of every installed app that has one."""
    modules = []
    for config in apps.get_app_configs():
        try:
            modules.append(importlib.import_module(f"{config.name}.cypher"))
        except ModuleNotFoundError:
            continue
    return modules


def app_schema_statements() -> list[str]:
    statements: list[str] = []
    for module in _app_cypher_modules():
        schema = getattr(module, "SCHEMA", [])
        statements.extend(schema() if callable(schema) else schema)
    return statements


def all_statements() -> list[str]:
    return node_schema_statements() + app_schema_statements()


def app_migrations() -> list[str]:
    """Each app's `cypher.MIGRATIONS`: data statements that bring what an earlier version wrote up to
    date, each a no-op once done (run after the schema, at every start)."""
    return [statement for module in _app_cypher_modules() for statement in getattr(module, "MIGRATIONS", [])]


def apply_schema() -> list[str]:
    """Create every constraint and index that is missing, wait for them to be online, then run the
    apps' data migrations."""
    global _applied
    statements = all_statements()
    for statement in statements:
        graph.write(statement)
    graph.write("CALL db.awaitIndexes(300)")
    for statement in app_migrations():
        graph.write(statement)
    _applied = True
    return statements


def ensure_schema() -> None:
    """Apply the schema once per process (lazily, before first use)."""
    if _applied:
        return
    with _lock:
        if not _applied:
            apply_schema()
