"""Websocket handshake checks: Origin against ALLOWED_HOSTS, API key for the project."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, urlparse

from django.conf import settings
from django.http.request import split_domain_port, validate_host

from core.auth.keys import key_lookup
from core.models import ApiKey

SUBPROTOCOL = "bearer"


class OriginCheck:
    """ASGI middleware: a browser's Origin must be one of ALLOWED_HOSTS, else the handshake is refused.

    Browsers always send Origin on websocket handshakes; a request without one comes from a
    non-browser client (an agent), which is still subject to the API key check.
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if scope["type"] == "websocket":
            origin = dict(scope.get("headers", [])).get(b"origin")
            if origin is not None and not origin_allowed(origin.decode("latin-1")):
                await send({"type": "websocket.close", "code": 4403})
                return None
        return await self.app(scope, receive, send)


def origin_allowed(origin: str) -> bool:
    parsed = urlparse(origin)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        return False
    domain, _port = split_domain_port(parsed.netloc)
    return bool(domain) and validate_host(domain, settings.ALLOWED_HOSTS)


def presented_key(scope: dict[str, Any]) -> tuple[str | None, bool]:
    """The key from `?key=` or from subprotocols ["bearer", "<key>"]; second value: subprotocol used."""
    protocols = list(scope.get("subprotocols") or [])
    if SUBPROTOCOL in protocols:
        index = protocols.index(SUBPROTOCOL)
        if index + 1 < len(protocols):
            return protocols[index + 1], True
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    values = query.get("key")
    return (values[0] if values else None), False


def key_for_project(raw_key: str | None, project_id: str) -> ApiKey | None:
    """The active key if it has read scope on `project_id`, else None."""
    if not raw_key:
        return None
    key = key_lookup(raw_key)
    if key is None or key.project_id != project_id or not key.has_scope("read"):
        return None
    return key


def key_group(prefix: str) -> str:
    """Channels group of the sockets opened with one API key."""
    return f"apikey.{prefix}"


def key_still_valid(key_pk: int | None) -> bool:
    return ApiKey.objects.filter(pk=key_pk, revoked_at__isnull=True).exists()
