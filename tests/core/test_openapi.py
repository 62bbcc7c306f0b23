"""The OpenAPI schema that agents read: generated without a warning, valid, and saying how to authenticate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command

pytestmark = pytest.mark.unit


def test_the_schema_generates_without_warnings_and_validates(tmp_path: Path) -> None:
    out = tmp_path / "schema.json"
    # --fail-on-warn: a view whose responses cannot be described, two components of one name or an
    # unknown authenticator fails here instead of leaving a wrong or partial schema
    call_command(
        "spectacular", "--validate", "--fail-on-warn", "--format", "openapi-json", "--file", str(out)
    )
    schema = json.loads(out.read_text())
    assert schema["components"]["securitySchemes"]["apiKey"] == {
        "type": "http",
        "scheme": "bearer",
        "description": schema["components"]["securitySchemes"]["apiKey"]["description"],
    }
    # the memory search and the document search have their own request bodies
    components = schema["components"]["schemas"]
    assert "query" in components["MemorySearchInput"]["properties"]
    assert "depth" in components["MemorySearchInput"]["properties"]
    assert "depth" not in components["SearchInput"]["properties"]
    operations = [op["operationId"] for path in schema["paths"].values() for op in path.values()]
    assert len(operations) == len(set(operations))
    assert {"memories_list", "memory_get", "sessions_list", "session_get"} <= set(operations)
