"""/mcp in the web process: the SDK's streamable HTTP transport behind the platform's own checks.

The transport runs stateless (every POST stands alone), so any web process answers any request and
nothing is kept between calls. Before a request reaches it:
- the Host must be one of ALLOWED_HOSTS and a browser's Origin one of them too (DNS rebinding);
- `Authorization: Bearer <API key>` must name an active key: otherwise 401 with a JSON-RPC error body
  and `WWW-Authenticate`, as the protocol's HTTP transport expects.
Scopes and tenancy are checked per call by the REST endpoint each tool stands for.
"""

from __future__ import annotations

import asyncio
import json
from concurrent.futures import Executor
from functools import partial
from typing import Any

from django.conf import settings
from django.http.request import split_domain_port, validate_host
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from mcp.shared.exceptions import MCPError

from core.auth.websocket import origin_allowed
from mcp_server.dispatch import Caller, key_project
from mcp_server.server import UNAUTHORIZED, PlatformMcp

Scope = dict[str, Any]


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None


def bearer_key(authorization: str | None) -> str | None:
    parts = (authorization or "").split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1]


CALLER = "knowledge_platform.caller"  # the ASGI scope entry the checks leave for the handlers


def _http_caller(ctx: Any) -> Caller:
    """The caller the checks in McpHttp found for this HTTP request."""
    request = ctx.request
    caller = request.scope.get(CALLER) if request is not None else None
    if not isinstance(caller, Caller):
        raise MCPError(UNAUTHORIZED, "an API key is needed: Authorization: Bearer <key>")
    return caller


class McpHttp:
    """The ASGI application mounted at MCP_PATH."""

    def __init__(self, executor: Executor) -> None:
        self.executor = executor
        self.server = PlatformMcp(_http_caller, executor).server()
        self.manager = StreamableHTTPSessionManager(
            app=self.server,
            stateless=True,
            # the Host and Origin checks are made here, against Django's ALLOWED_HOSTS
            security_settings=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=settings.MCP_MAX_BODY_BYTES,
        )
        self._ready: asyncio.Event | None = None
        self._runner: asyncio.Task[None] | None = None

    async def _start(self) -> None:
        """The transport's task group runs for the life of the process, started by the first request
        (daphne has no ASGI lifespan events)."""
        if self._ready is None:
            self._ready = asyncio.Event()
            self._runner = asyncio.get_running_loop().create_task(self._run(self._ready))
        await self._ready.wait()

    async def _run(self, ready: asyncio.Event) -> None:
        async with self.manager.run():
            ready.set()
            await asyncio.Event().wait()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        refused = await self._refusal(scope)
        if refused is not None:
            status, code, message, headers = refused
            await _json_error(send, status, code, message, headers)
            return
        await self._start()
        await self.manager.handle_request(scope, receive, send)

    async def _refusal(self, scope: Scope) -> tuple[int, int, str, list[tuple[bytes, bytes]]] | None:
        host = _header(scope, b"host") or ""
        domain, _port = split_domain_port(host)
        if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
            return 400, -32600, "host not allowed", []
        origin = _header(scope, b"origin")
        if origin is not None and not origin_allowed(origin):
            return 403, -32600, "origin not allowed", []
        key = bearer_key(_header(scope, b"authorization"))
        challenge = [(b"www-authenticate", b'Bearer realm="mcp"')]
        if key is None:
            return 401, UNAUTHORIZED, "an API key is needed: Authorization: Bearer <key>", challenge
        client = scope.get("client") or ("127.0.0.1", 0)
        known = await asyncio.get_running_loop().run_in_executor(
            self.executor, partial(key_project, key, remote_addr=client[0])
        )
        if known.status == 429:
            wait = known.headers.get("retry-after", "60")
            return (
                429,
                UNAUTHORIZED,
                "too many failed requests from this client or key",
                [(b"retry-after", wait.encode())],
            )
        if not known.ok:
            return 401, UNAUTHORIZED, "invalid, unknown or revoked API key", challenge
        scope[CALLER] = Caller(key, known.body["id"], client[0], host)
        return None


async def _json_error(
    send: Any, status: int, code: int, message: str, headers: list[tuple[bytes, bytes]]
) -> None:
    body = json.dumps({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class PathRouter:
    """HTTP requests under `prefix` go to `mcp`, every other one to `rest` (websockets never come here)."""

    def __init__(self, rest: Any, mcp: McpHttp, prefix: str) -> None:
        self.rest, self.mcp, self.prefix = rest, mcp, prefix.rstrip("/")

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        path = scope.get("path", "")
        if scope["type"] == "http" and (path == self.prefix or path.startswith(self.prefix + "/")):
            await self.mcp(scope, receive, send)
        else:
            await self.rest(scope, receive, send)
