"""Websocket handshake auth and progress relay, through the real ASGI app and the Redis channel layer."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from channels.testing import WebsocketCommunicator

from config.asgi import application
from core.progress.events import ProgressEvent, publish
from core.runtime.redis_client import get_redis
from tests.conftest import Tenant, make_tenant

pytestmark = pytest.mark.django_db(transaction=True)


def _path(project_id: str, key: str | None = None) -> str:
    path = f"/ws/v1/projects/{project_id}/progress/"
    return f"{path}?key={key}" if key else path


async def _connect(
    path: str, *, headers: list[tuple[bytes, bytes]] | None = None, subprotocols: list[str] | None = None
) -> tuple[WebsocketCommunicator, bool, Any]:
    communicator = WebsocketCommunicator(application, path, headers=headers or [], subprotocols=subprotocols)
    connected, detail = await communicator.connect(timeout=5)
    return communicator, connected, detail


@pytest.fixture
def tenants() -> tuple[Tenant, Tenant]:
    return make_tenant("ws A"), make_tenant("ws B")


def _event(project_id: str, phase: str = "chunking") -> ProgressEvent:
    return ProgressEvent(
        message_type="ingestion_progress",
        project_id=project_id,
        job_id="job-1",
        phase=phase,
        progress_pct=40,
        thought_summary="Chunking the document",
        details_md="**12** chunks",
    )


def test_valid_key_in_query_receives_project_events(tenants: tuple[Tenant, Tenant]) -> None:
    a, b = tenants

    async def scenario() -> dict[str, Any]:
        communicator, connected, _ = await _connect(_path(a.project.id, a.read_key.key))
        assert connected
        other, other_connected, _ = await _connect(_path(b.project.id, b.read_key.key))
        assert other_connected
        from asgiref.sync import sync_to_async

        await sync_to_async(publish)(_event(a.project.id))
        received = await communicator.receive_json_from(timeout=5)
        # project B's listener gets nothing of project A
        assert await other.receive_nothing(timeout=0.5)
        await communicator.disconnect()
        await other.disconnect()
        return received

    received = async_to_sync(scenario)()
    assert received["message_type"] == "ingestion_progress"
    assert received["project_id"] == a.project.id
    assert received["job_id"] == "job-1"
    assert received["phase"] == "chunking"
    assert received["progress_pct"] == 40
    assert "retrieval_id" not in received
    assert set(received) >= {"thought_summary", "details_md", "message_id", "timestamp"}


@pytest.mark.slow
def test_an_idle_socket_still_receives_events(tenants: tuple[Tenant, Tenant]) -> None:
    """A listener that hears nothing for longer than redis-py's default socket timeout (5 s) stays
    connected and gets the next event (a DRIFT search's first model call can take that long)."""
    a, _ = tenants

    async def scenario() -> Any:
        from asgiref.sync import sync_to_async

        communicator, connected, _ = await _connect(_path(a.project.id, a.read_key.key))
        assert connected
        assert await communicator.receive_nothing(timeout=7)
        await sync_to_async(publish)(_event(a.project.id, phase="embedding"))
        received = await communicator.receive_json_from(timeout=5)
        await communicator.disconnect()
        return received

    assert async_to_sync(scenario)()["phase"] == "embedding"


def test_key_in_subprotocol_is_accepted_and_echoed(tenants: tuple[Tenant, Tenant]) -> None:
    a, _ = tenants

    async def scenario() -> Any:
        communicator, connected, subprotocol = await _connect(
            _path(a.project.id), subprotocols=["bearer", a.read_key.key]
        )
        assert connected
        await communicator.disconnect()
        return subprotocol

    assert async_to_sync(scenario)() == "bearer"


@pytest.mark.parametrize("case", ["no key", "wrong key", "other project", "revoked"])
def test_bad_keys_are_refused_at_handshake(tenants: tuple[Tenant, Tenant], case: str) -> None:
    a, b = tenants
    from django.utils import timezone

    from core.models import ApiKey

    key = {
        "no key": None,
        "wrong key": "kp_00000000_" + "x" * 43,
        "other project": b.read_key.key,
        "revoked": a.read_key.key,
    }[case]
    if case == "revoked":
        ApiKey.objects.filter(pk=a.read_key.id).update(revoked_at=timezone.now())

    async def scenario() -> tuple[bool, Any]:
        communicator, connected, code = await _connect(_path(a.project.id, key))
        await communicator.wait(timeout=1)
        return connected, code

    connected, code = async_to_sync(scenario)()
    assert not connected
    assert code == 4401


@pytest.mark.parametrize(
    ("origin", "accepted"),
    [
        (b"http://evil.example.com", False),
        (b"null", False),
        (b"http://localhost:8000", True),
        (b"http://127.0.0.1:8000", True),
    ],
)
def test_origin_is_checked_against_allowed_hosts(
    tenants: tuple[Tenant, Tenant], origin: bytes, accepted: bool
) -> None:
    a, _ = tenants

    async def scenario() -> bool:
        communicator, connected, _ = await _connect(
            _path(a.project.id, a.read_key.key), headers=[(b"origin", origin)]
        )
        if connected:
            await communicator.disconnect()
        return connected

    assert async_to_sync(scenario)() is accepted


def test_progress_is_also_published_on_redis_pubsub(tenants: tuple[Tenant, Tenant], settings) -> None:  # type: ignore[no-untyped-def]
    a, _ = tenants
    settings.PROGRESS_REDIS_CHANNEL = "ui:retrieval_progress"
    pubsub = get_redis().pubsub()
    pubsub.subscribe("ui:retrieval_progress")
    pubsub.get_message(timeout=2)  # subscription confirmation
    publish(
        ProgressEvent(
            message_type="retrieval_progress",
            project_id=a.project.id,
            retrieval_id="r-42",
            phase="primer",
            progress_pct=20,
            thought_summary="Priming",
        )
    )
    deadline = time.monotonic() + 5
    message = None
    while time.monotonic() < deadline and message is None:
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)
    pubsub.close()
    assert message is not None
    payload = json.loads(message["data"])
    assert payload["retrieval_id"] == "r-42"
    assert payload["message_type"] == "retrieval_progress"
    assert "job_id" not in payload


def test_progress_event_validation() -> None:
    with pytest.raises(ValueError, match="job_id"):
        ProgressEvent(message_type="ingestion_progress", project_id="p", phase="x", progress_pct=1)
    with pytest.raises(ValueError):
        ProgressEvent(
            message_type="retrieval_progress", project_id="p", retrieval_id="r", phase="x", progress_pct=101
        )


def test_progress_is_sent_only_after_commit(tenants: tuple[Tenant, Tenant], settings) -> None:  # type: ignore[no-untyped-def]
    from django.db import transaction

    a, _ = tenants
    settings.PROGRESS_REDIS_CHANNEL = "ui:commit-test"
    pubsub = get_redis().pubsub()
    pubsub.subscribe("ui:commit-test")
    pubsub.get_message(timeout=2)

    class Abort(Exception):
        pass

    try:
        with transaction.atomic():
            publish(_event(a.project.id, phase="rolled-back"))
            raise Abort
    except Abort:
        pass
    with transaction.atomic():
        publish(_event(a.project.id, phase="committed"))

    received = []
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.3)
        if message:
            received.append(json.loads(message["data"])["phase"])
    pubsub.close()
    assert received == ["committed"]


def test_publish_now_delivers_every_event_in_order(tenants: tuple[Tenant, Tenant], settings) -> None:  # type: ignore[no-untyped-def]
    """publish_now hands events to the process's publisher thread: the caller does not wait, and the
    websocket and Redis pub/sub still get every event in the order it was published, from any thread."""
    from concurrent.futures import ThreadPoolExecutor

    from core.progress.events import publish_now

    a, _ = tenants
    settings.PROGRESS_REDIS_CHANNEL = "ui:publish-now-order"
    pubsub = get_redis().pubsub()
    pubsub.subscribe("ui:publish-now-order")
    pubsub.get_message(timeout=2)

    def event(i: int) -> ProgressEvent:
        return ProgressEvent(
            message_type="retrieval_progress",
            project_id=a.project.id,
            retrieval_id="r-order",
            phase=f"step-{i:02d}",
            progress_pct=i,
        )

    async def scenario() -> list[str]:
        communicator, connected, _ = await _connect(_path(a.project.id, a.read_key.key))
        assert connected
        from asgiref.sync import sync_to_async

        def burst() -> None:
            with ThreadPoolExecutor(1) as pool:  # a worker thread, as DRIFT's follow-ups publish
                pool.submit(lambda: [publish_now(event(i)) for i in range(30)]).result()

        await sync_to_async(burst)()
        phases = [(await communicator.receive_json_from(timeout=5))["phase"] for _ in range(30)]
        await communicator.disconnect()
        return phases

    assert async_to_sync(scenario)() == [f"step-{i:02d}" for i in range(30)]
    seen: list[str] = []
    deadline = time.monotonic() + 5
    while len(seen) < 30 and time.monotonic() < deadline:
        message = pubsub.get_message(ignore_subscribe_messages=True, timeout=0.5)
        if message:
            seen.append(json.loads(message["data"])["phase"])
    pubsub.close()
    assert seen == [f"step-{i:02d}" for i in range(30)]


@pytest.mark.parametrize(
    "path",
    [
        "/ws/v1/nowhere/",
        "/ws/v1/projects/p/progress",  # no trailing slash
        "/ws/v1/projects/p/progress/more/",
        "/",
    ],
)
def test_an_unknown_path_is_refused_at_handshake(tenants: tuple[Tenant, Tenant], path: str) -> None:
    """Not a 500 from the router: the handshake is refused with close code 4404 (HTTP 403 on a real
    server, see tests/core/test_api_fuzz.py), whatever key comes with it."""
    a, _ = tenants

    async def scenario() -> tuple[bool, Any]:
        communicator, connected, code = await _connect(f"{path}?key={a.read_key.key}")
        await communicator.wait(timeout=1)
        return connected, code

    connected, code = async_to_sync(scenario)()
    assert not connected
    assert code == 4404
