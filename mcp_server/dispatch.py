"""A REST call made in-process: Django's WSGI handler runs the request as if it came over HTTP.

Middleware (body limit, abuse throttle), authentication, scopes, tenancy, validation and the error
envelope are the REST API's own; nothing of them is re-implemented for MCP.
"""

from __future__ import annotations

import io
import json
import threading
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any
from urllib.parse import urlencode

from core.api.throttling import probe_check, probe_identities, probe_record
from core.auth.keys import key_lookup
from core.errors import envelope

_handler_lock = threading.Lock()
_handler: Any = None


def _wsgi() -> Any:
    global _handler
    with _handler_lock:
        if _handler is None:
            from django.core.handlers.wsgi import WSGIHandler

            _handler = WSGIHandler()
        return _handler


@dataclass(frozen=True)
class Caller:
    """Who makes the call: the key as presented, its project, and where from (the abuse throttle
    counts by address)."""

    api_key: str
    project_id: str
    remote_addr: str = "127.0.0.1"
    host: str = "localhost"


@dataclass(frozen=True)
class ApiAnswer:
    status: int
    body: Any
    headers: dict[str, str]

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def key_project(api_key: str, *, remote_addr: str = "127.0.0.1") -> ApiAnswer:
    """The key's project, checked as the REST API checks a key: the abuse throttle first (429 with
    Retry-After once this address or key prefix has used up API_PROBE_RATE), then the key row (kept
    per process under the key epoch), and a wrong key counted as a probe. 200 with the project as
    `body["id"]`, else 401 or 429."""
    request = SimpleNamespace(META={"REMOTE_ADDR": remote_addr, "HTTP_AUTHORIZATION": f"Bearer {api_key}"})
    idents = probe_identities(request)
    wait, epoch = probe_check(idents)
    if wait:
        message = "too many failed or cross-project requests from this client or key; retry later"
        return ApiAnswer(
            429, envelope("throttled", message, {"retry_after_sec": wait}), {"retry-after": str(wait)}
        )
    key = key_lookup(api_key, epoch)
    if key is None:
        probe_record(idents)
        return ApiAnswer(401, envelope("unauthenticated", "invalid, unknown or revoked API key"), {})
    return ApiAnswer(200, {"id": str(key.project_id)}, {})


def api_call(
    caller: Caller, method: str, path: str, *, body: Any = None, query: dict[str, Any] | None = None
) -> ApiAnswer:
    """`method path` (from the root, not percent-encoded) as `caller`; the answer as parsed JSON."""
    data = b"" if body is None else json.dumps(body, ensure_ascii=False).encode()
    environ: dict[str, Any] = {
        "REQUEST_METHOD": method,
        "SCRIPT_NAME": "",
        # a WSGI string: the path's UTF-8 bytes as latin-1 characters (PEP 3333), as a server passes it
        "PATH_INFO": path.encode().decode("latin-1"),
        "QUERY_STRING": urlencode(query or {}, doseq=True),
        "SERVER_NAME": caller.host.split(":")[0] or "localhost",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": caller.remote_addr,
        "HTTP_HOST": caller.host,
        "HTTP_AUTHORIZATION": f"Bearer {caller.api_key}",
        "HTTP_ACCEPT": "application/json",
        "CONTENT_TYPE": "application/json" if body is not None else "",
        "CONTENT_LENGTH": str(len(data)),
        "wsgi.input": io.BytesIO(data),
        "wsgi.errors": io.StringIO(),
        "wsgi.url_scheme": "http",
        "wsgi.version": (1, 0),
        "wsgi.multithread": True,
        "wsgi.multiprocess": True,
        "wsgi.run_once": False,
    }
    started: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        started["status"] = int(status.split(" ", 1)[0])
        started["headers"] = {name.lower(): value for name, value in headers}
        return lambda chunk: None

    result = _wsgi()(environ, start_response)
    try:
        raw = b"".join(result)
    finally:
        close = getattr(result, "close", None)
        if close is not None:
            close()
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = {"error": {"code": "error", "message": raw[:500].decode("utf-8", "replace"), "details": {}}}
    return ApiAnswer(started["status"], parsed, started["headers"])


def endpoint_path(template: str, project_id: str, args: dict[str, str]) -> str:
    """The request path of a tool's endpoint with its arguments filled in. An argument is one path
    segment: it must not hold "/" (as over HTTP, where such an id cannot be routed either)."""
    path = template if template.startswith("/") else f"/api/v1/{template}"
    for name, value in {"project_id": project_id, **args}.items():
        if "/" in value:
            raise ValueError(f"{name} holds '/'")
        path = path.replace("{" + name + "}", value)
    return path
