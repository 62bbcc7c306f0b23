"""The MCP server (the SDK's low-level `Server`): tools and document/chunk resources over the REST API.

Every handler turns its request into the REST call it stands for (mcp_server/dispatch.py) and runs it
on a thread of the web process's HTTP pool, then turns the REST answer into the protocol's:
- 2xx: the tool's result (the JSON as structured content and as text);
- 400, 404, 409, 413, 429, 5xx from the endpoint: a tool result with `isError`, carrying the REST
  error envelope, so an agent reads what to correct (another project's ids are "not found");
- 401 and 403 (a key that is unknown, revoked or lacks the scope): the protocol error UNAUTHORIZED /
  FORBIDDEN; an unknown tool or resource: INVALID_PARAMS.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial
from typing import Any
from urllib.parse import unquote

import mcp_types as types
from django.conf import settings
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from core.progress import events as progress
from mcp_server.dispatch import ApiAnswer, Caller, api_call, endpoint_path
from mcp_server.schemas import input_schemas
from mcp_server.tools import BY_NAME, TOOLS, ToolSpec

UNAUTHORIZED = -32003  # implementation-defined band (-32000..-32019)
FORBIDDEN = -32004
DOCUMENT_URI = "kp://documents/{document_id}"
CHUNK_URI = "kp://chunks/{chunk_id}"
_URI_PATHS = {
    "documents": "projects/{project_id}/documents/{id}",
    "chunks": "projects/{project_id}/chunks/{id}",
}

CallerOf = Callable[[Any], Caller]


class PlatformMcp:
    """The handlers, bound to how a request's caller is found (HTTP: its bearer key; stdio: one key)
    and to the executor REST calls run on."""

    def __init__(self, caller_of: CallerOf, executor: Executor | None) -> None:
        self.caller_of = caller_of
        self.executor = executor

    def server(self) -> Server[Any]:
        return Server(
            "knowledge-platform",
            version=settings.SPECTACULAR_SETTINGS["VERSION"],
            instructions=(
                "Search and add to a knowledge base (documents, chunks, entities, communities) and an "
                "agent memory. The project is the API key's."
            ),
            on_list_tools=self.list_tools,
            on_call_tool=self.call_tool,
            on_list_resources=self.list_resources,
            on_list_resource_templates=self.list_resource_templates,
            on_read_resource=self.read_resource,
        )

    async def _rest(
        self, caller: Caller, method: str, path: str, *, body: Any = None, query: Any = None
    ) -> ApiAnswer:
        """A REST call as `caller`, on the executor."""
        call = partial(api_call, caller, method, path, body=body, query=query)
        return await asyncio.get_running_loop().run_in_executor(self.executor, call)

    async def list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        schemas = await asyncio.get_running_loop().run_in_executor(self.executor, input_schemas)
        return types.ListToolsResult(tools=[_tool(spec, schemas[spec.name]) for spec in TOOLS])

    async def call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        spec = BY_NAME.get(params.name)
        if spec is None:
            raise MCPError(INVALID_PARAMS, f"unknown tool: {params.name[:100]!r}")
        caller = self.caller_of(ctx)
        args = dict(params.arguments or {})
        refused = await self._refused_arguments(spec, args)
        if refused is not None:
            return _failed(400, refused)
        path = endpoint_path(spec.path, caller.project_id, {name: args.pop(name) for name in spec.path_args})
        if spec.method == "GET":
            answer = await self._rest(caller, "GET", path, query=args)
        else:
            if spec.progress:
                # its progress events are told apart by retrieval id (the caller's own, if it gave one)
                args.setdefault("retrieval_id", f"mcp-{uuid.uuid4().hex}")
            body = {**args, "project_id": caller.project_id} if spec.project_in_body else args
            if spec.progress and isinstance(args["retrieval_id"], str):  # else the endpoint refuses it
                answer = await self._with_progress(ctx, args["retrieval_id"], caller, path, body)
            else:
                answer = await self._rest(caller, spec.method, path, body=body)
        return _result(answer)

    async def _refused_arguments(self, spec: ToolSpec, args: dict[str, Any]) -> dict[str, Any] | None:
        """What the endpoint cannot check itself: the path's arguments (one segment of 1 to 256
        characters each) and, for a GET, unknown query parameters (a body's unknown fields are
        refused by its serializer). The REST error envelope, or None."""
        for name in spec.path_args:
            value = args.get(name)
            if not isinstance(value, str) or not value.strip() or len(value) > 256 or "/" in value:
                return _envelope(f"{name}: 1 to 256 characters, no '/'", {name: ["invalid"]})
        if spec.method == "GET":
            schemas = await asyncio.get_running_loop().run_in_executor(self.executor, input_schemas)
            unknown = sorted(set(args) - set(schemas[spec.name]["properties"]))[:20]
            if unknown:
                return _envelope(
                    f"{unknown[0]}: unknown field", {name: ["unknown field"] for name in unknown}
                )
        return None

    async def _with_progress(
        self, ctx: Any, retrieval_id: str, caller: Caller, path: str, body: dict[str, Any]
    ) -> ApiAnswer:
        """The call, with the DRIFT search's progress events for `retrieval_id` sent to the client as
        progress notifications while it runs (when the request asked for progress; else they are
        dropped here)."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

        def heard(payload: dict[str, Any]) -> None:
            loop.call_soon_threadsafe(queue.put_nowait, payload)

        async def forward() -> None:
            while (event := await queue.get()) is not None:
                message = f"{event.get('phase')}: {event.get('thought_summary') or ''}".strip(": ")
                try:
                    await ctx.session.report_progress(
                        float(event.get("progress_pct", 0)), 100.0, message[:500]
                    )
                except Exception:  # noqa: BLE001 - progress is advisory; the answer still goes out
                    return

        sender = asyncio.create_task(forward())
        try:
            with progress.listening(retrieval_id, heard):
                answer = await self._rest(caller, "POST", path, body=body)
            # every event heard reached the queue before the answer did (both were handed to this
            # loop from the search's threads, in order): they go out before it
            queue.put_nowait(None)
            await sender
        finally:
            sender.cancel()
        return answer

    async def list_resources(self, ctx: Any, params: Any) -> types.ListResourcesResult:
        caller = self.caller_of(ctx)
        path = endpoint_path("projects/{project_id}/documents", caller.project_id, {})
        answer = await self._rest(caller, "GET", path, query={"limit": 100})
        _raise_for_key(answer)
        items = answer.body.get("items", []) if answer.ok and isinstance(answer.body, dict) else []
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=DOCUMENT_URI.format(document_id=item["id"]),
                    name=str(item.get("title") or item["id"])[:200],
                    mime_type="application/json",
                )
                for item in items
            ]
        )

    async def list_resource_templates(self, ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return types.ListResourceTemplatesResult(
            resource_templates=[
                types.ResourceTemplate(
                    uri_template=DOCUMENT_URI, name="document", mime_type="application/json"
                ),
                types.ResourceTemplate(uri_template=CHUNK_URI, name="chunk", mime_type="application/json"),
            ]
        )

    async def read_resource(
        self, ctx: Any, params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult:
        uri = str(params.uri)
        kind, _, ident = uri.removeprefix("kp://").partition("/")
        ident = unquote(ident)
        if (
            not uri.startswith("kp://")
            or kind not in _URI_PATHS
            or not ident
            or "/" in ident
            or len(ident) > 256
        ):
            raise MCPError(INVALID_PARAMS, f"unknown resource: {uri[:200]!r}")
        caller = self.caller_of(ctx)
        answer = await self._rest(
            caller, "GET", endpoint_path(_URI_PATHS[kind], caller.project_id, {"id": ident})
        )
        _raise_for_key(answer)
        if not answer.ok:
            raise MCPError(INVALID_PARAMS, f"resource not found: {uri[:200]!r}")
        return types.ReadResourceResult(
            contents=[
                types.TextResourceContents(uri=uri, mime_type="application/json", text=_json(answer.body))
            ]
        )


def _tool(spec: ToolSpec, schema: dict[str, Any]) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=schema,
        annotations=types.ToolAnnotations(
            title=spec.title,
            read_only_hint=spec.read_only,
            destructive_hint=spec.destructive if not spec.read_only else None,
            open_world_hint=False,
        ),
    )


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _raise_for_key(answer: ApiAnswer) -> None:
    if answer.status in (401, 403):
        error = (answer.body or {}).get("error", {}) if isinstance(answer.body, dict) else {}
        code = UNAUTHORIZED if answer.status == 401 else FORBIDDEN
        raise MCPError(code, str(error.get("message") or "not allowed"), error or None)


def _envelope(message: str, fields: dict[str, list[str]]) -> dict[str, Any]:
    return {"code": "invalid_input", "message": message, "details": {"fields": fields}}


def _failed(status: int, error: dict[str, Any]) -> types.CallToolResult:
    body = {"status": status, "error": error}
    return types.CallToolResult(
        content=[types.TextContent(text=_json(body))], structured_content=body, is_error=True
    )


def _result(answer: ApiAnswer) -> types.CallToolResult:
    _raise_for_key(answer)
    if not answer.ok:
        error = answer.body.get("error") if isinstance(answer.body, dict) else None
        return _failed(
            answer.status, error or {"code": "error", "message": str(answer.body)[:500], "details": {}}
        )
    body = answer.body if isinstance(answer.body, dict) else {"result": answer.body}
    return types.CallToolResult(content=[types.TextContent(text=_json(body))], structured_content=body)
