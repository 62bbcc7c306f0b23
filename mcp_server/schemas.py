"""Tool input schemas from the OpenAPI document drf-spectacular builds from the REST serializers.

A tool's schema is its endpoint's: the JSON request body's properties (the DRIFT endpoint's
`project_id` left out: the project is the key's), plus the path's arguments and, for a GET, its query
parameters, each with the limits the serializers declare. OpenAPI 3.0's `nullable` becomes a JSON
Schema type union and `#/components/schemas/…` references become `#/$defs/…`.
"""

from __future__ import annotations

import copy
import threading
from typing import Any

from mcp_server.tools import TOOLS, ToolSpec

_COMPONENT = "#/components/schemas/"
_lock = threading.Lock()
_built: dict[str, dict[str, Any]] | None = None


def input_schemas() -> dict[str, dict[str, Any]]:
    """Tool name → JSON Schema of its arguments (built once per process, ~0.4 s)."""
    global _built
    with _lock:
        if _built is None:
            from drf_spectacular.generators import SchemaGenerator

            document = SchemaGenerator().get_schema(request=None, public=True)
            _built = {tool.name: tool_schema(tool, document) for tool in TOOLS}
        return _built


def tool_schema(tool: ToolSpec, document: dict[str, Any]) -> dict[str, Any]:
    operation = document["paths"][tool.openapi_path][tool.method.lower()]
    components = document.get("components", {}).get("schemas", {})
    properties: dict[str, Any] = {}
    required: list[str] = []
    for parameter in operation.get("parameters", []):
        name = parameter["name"]
        if name == "project_id" or parameter["in"] not in ("path", "query"):
            continue
        properties[name] = _json_schema(parameter.get("schema", {"type": "string"}))
        if parameter["in"] == "path":
            properties[name].setdefault("minLength", 1)
            required.append(name)
        elif parameter.get("required"):
            required.append(name)
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema")
    if body is not None:
        body = _resolve_top(body, components)
        for name, prop in body.get("properties", {}).items():
            if tool.project_in_body and name == "project_id":
                continue
            properties[name] = _json_schema(prop)
        required += [n for n in body.get("required", []) if not (tool.project_in_body and n == "project_id")]
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    defs = _referenced(schema, components)
    if defs:
        schema["$defs"] = defs
    return schema


def _resolve_top(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    ref = schema.get("$ref")
    return components[ref[len(_COMPONENT) :]] if isinstance(ref, str) else schema


def _json_schema(node: Any) -> Any:
    """A copy of an OpenAPI 3.0 schema node as JSON Schema (2020-12)."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return copy.deepcopy(node)
    out = {key: _json_schema(value) for key, value in node.items() if key != "nullable"}
    if isinstance(out.get("$ref"), str) and out["$ref"].startswith(_COMPONENT):
        out["$ref"] = "#/$defs/" + out["$ref"][len(_COMPONENT) :]
    if node.get("nullable"):
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        elif "type" not in out:
            out = {"anyOf": [out, {"type": "null"}]}
    if "enum" in out and node.get("nullable") and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def _referenced(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    """The components `schema` refers to, directly or through each other, as $defs."""
    defs: dict[str, Any] = {}
    pending = list(_refs(schema))
    while pending:
        name = pending.pop()
        if name in defs or name not in components:
            continue
        defs[name] = _json_schema(components[name])
        # a component's description is its serializer class's docstring, written for developers
        defs[name].pop("description", None)
        pending.extend(_refs(defs[name]))
    return defs


def _refs(node: Any) -> list[str]:
    if isinstance(node, list):
        return [name for item in node for name in _refs(item)]
    if not isinstance(node, dict):
        return []
    found = []
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith("#/$defs/"):
        found.append(ref[len("#/$defs/") :])
    for key, value in node.items():
        if key != "$ref":
            found.extend(_refs(value))
    return found
