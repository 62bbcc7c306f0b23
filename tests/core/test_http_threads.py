"""HTTP through the ASGI entry point: Django's WSGI handler on the web process's thread pool."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from asgiref.testing import ApplicationCommunicator
from django.core.wsgi import get_wsgi_application

from config.asgi import application
from core.models import Job
from core.runtime.http_threads import WsgiOnThreads
from tests.conftest import Tenant, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def _scope(method: str, path: str, headers: list[tuple[bytes, bytes]]) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1"), *headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }


def _call(app: Any, scope: dict[str, Any], bodies: list[bytes]) -> tuple[int, dict[bytes, bytes], bytes]:
    async def run() -> tuple[int, dict[bytes, bytes], bytes]:
        communicator = ApplicationCommunicator(app, scope)
        for i, chunk in enumerate(bodies):
            await communicator.send_input(
                {"type": "http.request", "body": chunk, "more_body": i < len(bodies) - 1}
            )
        start = await communicator.receive_output(timeout=30)
        body = await communicator.receive_output(timeout=30)
        await communicator.wait(timeout=5)
        return start["status"], dict(start["headers"]), body["body"]

    return async_to_sync(run)()


def _auth(tenant: Tenant) -> list[tuple[bytes, bytes]]:
    return [(b"authorization", f"Bearer {tenant.write_key.key}".encode())]


def _post_json(tenant: Tenant, endpoint: str) -> dict[str, Any]:
    """A JSON POST to one of the tenant's project endpoints."""
    return _scope(
        "POST",
        f"/api/v1/projects/{tenant.project.id}/{endpoint}",
        [*_auth(tenant), (b"content-type", b"application/json")],
    )


def test_api_request_through_the_asgi_app() -> None:
    tenant = make_tenant("http threads")
    status, headers, body = _call(
        application, _scope("GET", f"/api/v1/projects/{tenant.project.id}", _auth(tenant)), [b""]
    )
    assert status == 200, body
    assert headers[b"content-type"].startswith(b"application/json")
    assert json.loads(body)["id"] == tenant.project.id


def test_body_sent_in_pieces_reaches_the_view() -> None:
    """A chunked body (no Content-Length) is counted and handed to Django whole."""
    tenant = make_tenant("http threads chunked")
    payload = json.dumps({"query": "sent in three pieces " * 10, "mode": "fulltext", "top_k": 7}).encode()
    pieces = [payload[:10], payload[10:50], payload[50:]]
    status, _, body = _call(application, _post_json(tenant, "search"), pieces)
    assert status == 200, body
    assert json.loads(body)["mode"] == "fulltext"


def test_oversized_chunked_body_is_413_and_writes_nothing(settings) -> None:  # type: ignore[no-untyped-def]
    settings.API_MAX_BODY_BYTES = 1000
    tenant = make_tenant("http threads big")
    app = WsgiOnThreads(get_wsgi_application(), threads=2, max_body_bytes=1000)
    payload = json.dumps({"title": "too big", "text": "x" * 5000}).encode()
    status, _, body = _call(app, _post_json(tenant, "documents"), [payload[:3000], payload[3000:]])
    assert status == 413, body
    assert json.loads(body)["error"]["code"] == "payload_too_large"
    assert not Job.objects.filter(project_id=tenant.project.id).exists()


def _wsgi(handler: Callable[[dict[str, Any]], bytes]) -> Any:
    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        content = handler(environ)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [content]

    return app


def test_requests_run_side_by_side_on_pool_threads() -> None:
    """Two requests that each wait for the other only both finish when they run concurrently."""
    barrier = threading.Barrier(2, timeout=10)
    names: list[str] = []

    def handler(environ: dict[str, Any]) -> bytes:
        names.append(threading.current_thread().name)
        barrier.wait()  # raises BrokenBarrierError if the other request never runs meanwhile
        return b"ok"

    app = WsgiOnThreads(_wsgi(handler), threads=2, max_body_bytes=1000)

    async def both() -> list[Any]:
        import asyncio

        communicators = [ApplicationCommunicator(app, _scope("GET", "/", [])) for _ in range(2)]
        for c in communicators:
            await c.send_input({"type": "http.request", "body": b""})
        return await asyncio.gather(*(c.receive_output(timeout=30) for c in communicators))

    starts = async_to_sync(both)()
    assert [s["status"] for s in starts] == [200, 200]
    assert len(set(names)) == 2 and all(n.startswith("http") for n in names)


def test_too_many_duplicate_headers_is_400() -> None:
    app = WsgiOnThreads(_wsgi(lambda environ: b"never"), threads=1, max_body_bytes=1000)
    status, _, body = _call(app, _scope("GET", "/", [(b"x-dup", b"1")] * 200), [b""])
    assert status == 400
    assert b"never" not in body


def test_client_gone_before_the_body_ends_runs_nothing() -> None:
    calls: list[str] = []
    app = WsgiOnThreads(_wsgi(lambda environ: calls.append("ran") or b""), threads=1, max_body_bytes=1000)

    async def run() -> None:
        communicator = ApplicationCommunicator(app, _scope("POST", "/", []))
        await communicator.send_input({"type": "http.request", "body": b"part", "more_body": True})
        await communicator.send_input({"type": "http.disconnect"})
        await communicator.wait(timeout=5)

    async_to_sync(run)()
    assert calls == []
