"""knowledge_platform_client: settings, error mapping and retries (over real sockets: a scripted
HTTP server for the failure script, and the platform itself for its real 429s)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from knowledge_platform_client import (
    AsyncPlatformClient,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    NotFoundError,
    PermissionDeniedError,
    PlatformSettings,
    RateLimitedError,
    SessionsClient,
    UnavailableError,
)
from knowledge_platform_client.http import retry_after_seconds

from core.runtime.processes import free_port
from tests.clients.conftest import Platform, _web
from tests.conftest import Tenant
from tests.support.scripted_http import ScriptedHttp

pytestmark = pytest.mark.anyio


@pytest.fixture
def scripted() -> Iterator[ScriptedHttp]:
    server = ScriptedHttp()
    yield server
    server.close()


def _settings(url: str, **extra: object) -> PlatformSettings:
    return PlatformSettings(url=url, api_key="kp_test", project_id="p1", backoff=0.01, **extra)


def test_settings_from_the_environment_and_overrides() -> None:
    env = {
        "KNOWLEDGE_PLATFORM_URL": "http://platform:8000/",
        "KNOWLEDGE_PLATFORM_API_KEY": "kp_secret",
        "KNOWLEDGE_PLATFORM_PROJECT_ID": "proj",
        "KNOWLEDGE_PLATFORM_MAX_RETRIES": "2",
    }
    settings = PlatformSettings.from_env(env)
    assert (settings.url, settings.project_id, settings.max_retries) == ("http://platform:8000", "proj", 2)
    assert "kp_secret" not in repr(settings)  # the key is a secret
    assert PlatformSettings.from_env(env, project_id="other").project_id == "other"
    for broken in (
        {**env, "KNOWLEDGE_PLATFORM_API_KEY": ""},
        {**env, "KNOWLEDGE_PLATFORM_URL": "platform:8000"},
        {k: v for k, v in env.items() if k != "KNOWLEDGE_PLATFORM_PROJECT_ID"},
        {**env, "KNOWLEDGE_PLATFORM_MAX_RETRIES": "-1"},
    ):
        with pytest.raises(ConfigurationError) as bad:
            PlatformSettings.from_env(broken)
        assert "KNOWLEDGE_PLATFORM_" in str(bad.value) and "kp_secret" not in str(bad.value)


def test_retry_after_reads_seconds_and_dates() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    later = datetime.now(UTC) + timedelta(seconds=20)
    assert 15 < (retry_after_seconds(format_datetime(later, usegmt=True)) or 0) <= 20


async def test_503_and_429_are_retried_honouring_retry_after(scripted: ScriptedHttp) -> None:
    scripted.queue(503, {"error": {"code": "unavailable", "message": "neo4j down"}}, Retry_After="0.3")
    scripted.queue(429, {"error": {"code": "throttled", "message": "slow down"}}, Retry_After="0.2")
    scripted.queue(200, {"ok": True})
    async with AsyncPlatformClient(_settings(scripted.url)) as client:
        assert await client.request("GET", client.project_path("anything")) == {"ok": True}
    times = [t for _m, _p, t in scripted.seen]
    assert len(times) == 3
    assert times[1] - times[0] >= 0.28 and times[2] - times[1] >= 0.18  # waited as told
    assert scripted.seen[0][1] == "/api/v1/projects/p1/anything"


async def test_retries_run_out_into_the_typed_error(scripted: ScriptedHttp) -> None:
    for _ in range(3):
        scripted.queue(429, {"error": {"code": "throttled", "message": "slow down"}}, Retry_After="0")
    async with AsyncPlatformClient(_settings(scripted.url, max_retries=2)) as client:
        with pytest.raises(RateLimitedError) as caught:
            await client.request("GET", "/x")
    assert caught.value.status == 429 and caught.value.code == "throttled"
    assert len(scripted.seen) == 3


@pytest.mark.parametrize(
    ("status", "kind"),
    [(400, BadRequestError), (401, AuthenticationError), (403, PermissionDeniedError), (404, NotFoundError)],
)
async def test_4xx_raise_at_once_with_the_platforms_message(
    scripted: ScriptedHttp, status: int, kind: type[Exception]
) -> None:
    scripted.queue(status, {"error": {"code": "c", "message": "what went wrong", "details": {"field": "f"}}})
    async with AsyncPlatformClient(_settings(scripted.url)) as client:
        with pytest.raises(kind) as caught:
            await client.request("POST", "/x", json={"a": 1})
    assert caught.value.message == "what went wrong" and caught.value.details == {"field": "f"}  # type: ignore[attr-defined]
    assert len(scripted.seen) == 1  # no retry


async def test_an_unreachable_platform_is_unavailable_after_retries() -> None:
    async with AsyncPlatformClient(_settings(f"http://127.0.0.1:{free_port()}", max_retries=1)) as client:
        with pytest.raises(UnavailableError) as caught:
            await client.request("GET", "/x")
    assert caught.value.status == 0 and caught.value.code == "unreachable"


async def test_names_travel_as_single_path_segments(scripted: ScriptedHttp) -> None:
    scripted.queue(200, {"state": {}})
    async with AsyncPlatformClient(_settings(scripted.url)) as client:
        await SessionsClient(client).user_state("my app", "ana?x=1#frag")
    assert scripted.seen[0][1] == "/api/v1/projects/p1/apps/my%20app/users/ana%3Fx%3D1%23frag/state"


@pytest.fixture(scope="module")
def throttled_web(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Platform]:  # type: ignore[no-untyped-def]
    yield from _web(tmp_path_factory, "throttled-web", API_THROTTLE_RATE="2/s")


@pytest.mark.slow
async def test_the_platforms_own_429s_are_absorbed(
    throttled_web: Platform, client_tenant: Tenant, caplog: pytest.LogCaptureFixture
) -> None:
    settings = throttled_web.settings(client_tenant, max_retries=12)
    async with AsyncPlatformClient(settings) as client:
        sessions = SessionsClient(client)
        await sessions.user_state("app", "warm")  # a cold server could spread the burst below
        await asyncio.sleep(1.1)  # a fresh second for the throttle
        caplog.set_level(logging.WARNING, logger="knowledge_platform_client")
        states = await asyncio.gather(*(sessions.user_state("app", f"u{i}") for i in range(12)))
    assert states == [{}] * 12
    retried = [r for r in caplog.records if "429" in r.getMessage()]
    # the check is atomic: of a burst of 12 at 2/s, at most 2 pass at once, so at least 10 waited
    assert len(retried) >= 10, [r.getMessage() for r in retried]
    # without retries the same burst fails with the typed error
    async with AsyncPlatformClient(throttled_web.settings(client_tenant, max_retries=0)) as client:
        with pytest.raises(RateLimitedError):
            await asyncio.gather(*(SessionsClient(client).user_state("app", f"v{i}") for i in range(6)))
