"""agent_framework_knowledge.KnowledgeContextProvider: configuration and scoping, then real Agent
Framework agents (MAF's OpenAI chat completions client on the local OpenAI-compatible server) with
the provider against the real platform, its outages and its refusals."""

from __future__ import annotations

import logging
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from agent_framework import Agent, Message
from agent_framework.openai import OpenAIChatCompletionClient
from agent_framework_knowledge import KnowledgeContextProvider, ProviderConfig
from knowledge_platform_client import (
    AsyncPlatformClient,
    AuthenticationError,
    BadRequestError,
    ConfigurationError,
    KnowledgeClient,
    MemoryClient,
    MemoryHit,
    MemoryMessage,
    NotFoundError,
    PayloadTooLargeError,
    PlatformSettings,
    UnavailableError,
)
from openai import AsyncOpenAI
from pydantic import ValidationError

from core.runtime.processes import free_port
from tests.clients.conftest import Platform
from tests.conftest import Tenant, worker_env
from tests.retrieval.corpus import DOCS
from tests.retrieval.drift_helpers import ingest_with_communities
from tests.retrieval.helpers import ingest_now
from tests.support.openai_server import FakeOpenAI
from tests.support.processes import start_web, stop
from tests.support.scripted_http import ScriptedHttp

pytestmark = pytest.mark.anyio
REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "clients" / "agent-framework" / "samples" / "memory_two_sessions.py"
ENV = {
    "KNOWLEDGE_PLATFORM_URL": "http://127.0.0.1:8000",
    "KNOWLEDGE_PLATFORM_API_KEY": "kp_x_y",
    "KNOWLEDGE_PLATFORM_PROJECT_ID": "p1",
}


def _provider(settings: PlatformSettings, **config: Any) -> KnowledgeContextProvider:
    return KnowledgeContextProvider(settings=settings, **config)


def _agent(chat: OpenAIChatCompletionClient, provider: KnowledgeContextProvider) -> Agent:
    return Agent(client=chat, instructions="Answer from the context.", context_providers=[provider])


def _sent(fake: FakeOpenAI) -> str:
    """Everything the model was sent in the last chat request."""
    body = fake.requests_to("/chat/completions")[-1].body
    return "\n".join(str(m.get("content")) for m in body["messages"])


def _in_order(memories: list[MemoryHit]) -> list[MemoryHit]:
    """Oldest first (a batch shares one timestamp; `seq` orders it)."""
    return sorted(memories, key=lambda m: (m.timestamp or "", m.seq or 0))


@pytest.fixture
def fake(fake_openai_server: FakeOpenAI) -> Iterator[FakeOpenAI]:
    fake_openai_server.reset()
    yield fake_openai_server
    fake_openai_server.reset()


@pytest.fixture
async def chat(fake: FakeOpenAI) -> AsyncIterator[OpenAIChatCompletionClient]:
    """MAF's OpenAI chat completions client on the local server; its connections are closed on
    this test's event loop (each test has its own)."""
    openai_client = AsyncOpenAI(api_key="sk-test", base_url=fake.base_url)
    yield OpenAIChatCompletionClient(model="fake-chat", async_client=openai_client)
    await openai_client.close()


# -- configuration and scoping (no platform needed) ------------------------------------------------


def test_missing_settings_name_their_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ConfigurationError) as missing:
        KnowledgeContextProvider()
    for name in ENV:
        assert name in str(missing.value)
    monkeypatch.setenv("KNOWLEDGE_PLATFORM_URL", "http://127.0.0.1:8000")
    monkeypatch.setenv("KNOWLEDGE_PLATFORM_API_KEY", "kp_secret_value")
    with pytest.raises(ConfigurationError) as one:
        KnowledgeContextProvider()
    assert one.value.problems == ["KNOWLEDGE_PLATFORM_PROJECT_ID (or the `project_id` argument) is not set"]
    monkeypatch.setenv("KNOWLEDGE_PLATFORM_PROJECT_ID", "p1")
    monkeypatch.setenv("KNOWLEDGE_PLATFORM_URL", "127.0.0.1:8000")
    with pytest.raises(ConfigurationError, match="KNOWLEDGE_PLATFORM_URL .*http://") as bad:
        KnowledgeContextProvider()
    assert "kp_secret_value" not in str(bad.value)
    monkeypatch.setenv("KNOWLEDGE_PLATFORM_URL", "http://127.0.0.1:8000")
    assert KnowledgeContextProvider().settings.project_id == "p1"
    assert KnowledgeContextProvider(project_id="p2").settings.project_id == "p2"  # arguments win


def test_configuration_is_validated() -> None:
    with pytest.raises(ValidationError, match="at least one scope"):
        ProviderConfig(memory_enabled=True)
    for scope in ({"user_id": "u"}, {"agent_id": "a"}, {"application_id": "x"}, {"thread_id": "t"}):
        assert ProviderConfig(memory_enabled=True, **scope).memory_enabled
    assert ProviderConfig(memory_enabled=True, scope_to_per_operation_thread_id=True).memory_enabled
    for bad in (
        {"top_k": 0},
        {"top_k": 101},
        {"message_history_count": 0},
        {"memory_roles": ("user", "robot")},
        {"memory_roles": ()},
        {"mode": "semantic"},
        {"knowledge_enabled": False},
        {"drift": True, "profile": "document_context"},
        {"user_id": ""},
        {"user_id": "a\x00b"},
        {"unknown_knob": 1},
    ):
        with pytest.raises(ValidationError):
            ProviderConfig(**bad)
    with pytest.raises(ValidationError):
        KnowledgeContextProvider(settings=PlatformSettings(**_settings_args()), top_k=0)


def _settings_args() -> dict[str, Any]:
    return {"url": ENV["KNOWLEDGE_PLATFORM_URL"], "api_key": "kp_x_y", "project_id": "p1"}


def test_query_text_keeps_the_last_user_and_assistant_messages_with_text() -> None:
    provider = KnowledgeContextProvider(
        settings=PlatformSettings(**_settings_args()), message_history_count=2
    )
    messages = [
        Message(role="user", contents=["first question"]),
        Message(role="assistant", contents=["first answer"]),
        Message(role="system", contents=["system text is not searched"]),
        Message(role="tool", contents=["tool output is not searched"]),
        Message(role="user", contents=["   "]),
        Message(role="user", contents=["second question"]),
    ]
    assert provider.query_text(messages) == "first answer\nsecond question"
    assert provider.query_text([Message(role="system", contents=["only system"])]) == ""


async def test_a_provider_not_entered_says_so(chat: OpenAIChatCompletionClient) -> None:
    provider = KnowledgeContextProvider(settings=PlatformSettings(**_settings_args()))
    agent = _agent(chat, provider)
    with pytest.raises(RuntimeError, match="async with provider"):
        await agent.run("hello")


# -- real agents on the real platform --------------------------------------------------------------


@pytest.fixture
def corpus(unconsumed_ingest_queue: str, client_tenant: Tenant) -> list[str]:
    """The small retrieval corpus ingested (in this process) and clustered into the client tenant."""
    return ingest_with_communities(client_tenant.project.id)


@pytest.fixture
def sourdough_elsewhere(unconsumed_ingest_queue: str, other_tenant: Tenant) -> None:
    """The other tenant's project holds only the sourdough text."""
    ingest_now(other_tenant.project.id, [DOCS[2]])


@pytest.mark.slow
async def test_agent_gets_the_projects_knowledge(
    platform_web: Platform,
    client_tenant: Tenant,
    other_tenant: Tenant,
    corpus: list[str],
    sourdough_elsewhere: None,
    fake: FakeOpenAI,
    chat: OpenAIChatCompletionClient,
) -> None:
    provider = _provider(platform_web.settings(client_tenant, key="read"), top_k=3)
    async with provider:
        reply = await _agent(chat, provider).run(
            "Who published the first algorithm for the Analytical Engine?"
        )
    assert reply.text.startswith("echo:")
    sent = _sent(fake)
    assert provider.config.context_prompt in sent
    assert "[document: Lovelace]" in sent and "Ada Lovelace worked with Charles Babbage" in sent
    assert "[Score: " in sent
    assert provider.timings.platform_took_ms is not None and provider.timings.before_run_ms is not None
    # another project's key sees only its own documents
    other = _provider(platform_web.settings(other_tenant, key="read"), top_k=3)
    async with other:
        await _agent(chat, other).run("Who published the first algorithm for the Analytical Engine?")
    assert "Lovelace" not in _sent(fake) and "Sourdough" in _sent(fake)


async def test_knowledge_and_memory_come_from_one_request(
    platform_web: Platform,
    client_tenant: Tenant,
    corpus: list[str],
    fake: FakeOpenAI,
    chat: OpenAIChatCompletionClient,
) -> None:
    """With both on, the provider asks `search:with-memory`: the model gets the project's knowledge
    and this user's memories of the same question, as the two searches would give them."""
    settings = platform_web.settings(client_tenant)
    scope = {"application_id": "lab", "user_id": "ada-fan"}
    async with AsyncPlatformClient(settings) as client:
        memory = MemoryClient(client)
        await memory.store([{"role": "user", "text": "I am reading about the Analytical Engine."}], scope)
        both = await memory.search_with_knowledge(
            "Analytical Engine algorithm", scope, knowledge_top_k=3, top_k=2, min_score=0.0
        )
        alone = await KnowledgeClient(client).search("Analytical Engine algorithm", top_k=3)
        remembered = await memory.search("Analytical Engine algorithm", scope, top_k=2, min_score=0.0)
    assert [h.chunk_id for h in both.knowledge.items] == [h.chunk_id for h in alone.items]
    assert [h.id for h in both.memory.items] == [h.id for h in remembered.items] and remembered.items
    assert both.took_ms >= max(both.knowledge.took_ms, both.memory.took_ms)
    provider = _provider(settings, top_k=3, memory_enabled=True, memory_min_score=0.0, **scope)
    async with provider:
        await _agent(chat, provider).run("Who published the first algorithm for the Analytical Engine?")
    sent = _sent(fake)
    assert "[document: Lovelace]" in sent and "## Memories" in sent
    assert "I am reading about the Analytical Engine." in sent
    assert provider.timings.platform_took_ms is not None


@pytest.mark.slow
async def test_drift_mode_puts_an_answer_with_key_facts_into_the_context(
    platform_web: Platform,
    client_tenant: Tenant,
    corpus: list[str],
    fake: FakeOpenAI,
    chat: OpenAIChatCompletionClient,
) -> None:
    provider = _provider(platform_web.settings(client_tenant, key="read"), drift=True)
    async with provider:
        await _agent(chat, provider).run("How do glaciers carve valleys?")
    sent = _sent(fake)
    assert "[DRIFT answer]" in sent and "Key facts:" in sent
    assert "[sources: " in sent and "Glaciers" in sent


@pytest.mark.slow
async def test_memory_across_sessions_and_never_across_users(
    platform_web: Platform, client_tenant: Tenant, fake: FakeOpenAI, chat: OpenAIChatCompletionClient
) -> None:
    settings = platform_web.settings(client_tenant)
    ana = _provider(settings, memory_enabled=True, application_id="shop", user_id="ana")
    bruno = _provider(settings, memory_enabled=True, application_id="shop", user_id="bruno")
    async with ana, bruno:
        agent_ana = _agent(chat, ana)
        await agent_ana.run("My name is Ana and I live in Lisbon.", session=agent_ana.create_session())
        async with AsyncPlatformClient(settings) as client:
            stored, _ = await MemoryClient(client).list({"application_id": "shop", "user_id": "ana"})
        assert [(m.role, m.text) for m in _in_order(stored)] == [
            ("user", "My name is Ana and I live in Lisbon."),
            ("assistant", "echo: My name is Ana and I live in Lisbon."),
        ]
        await agent_ana.run("Where do I live?", session=agent_ana.create_session())  # a new session
        recalled = _sent(fake)
        assert "## Memories" in recalled and "[memory: message] [role: user]" in recalled
        assert "I live in Lisbon" in recalled
        agent_bruno = _agent(chat, bruno)
        await agent_bruno.run("Where do I live?", session=agent_bruno.create_session())
        assert "Lisbon" not in _sent(fake)
        assert "## Memories" not in _sent(fake)  # Bruno has no memories yet, and sees none of Ana's
    async with AsyncPlatformClient(settings) as client:
        bruno_memories, _ = await MemoryClient(client).list({"user_id": "bruno"})
    assert {m.text for m in bruno_memories} == {"Where do I live?", "echo: Where do I live?"}


async def test_the_provider_narrows_memory_by_time(
    platform_web: Platform, client_tenant: Tenant, fake: FakeOpenAI, chat: OpenAIChatCompletionClient
) -> None:
    """`memory_when`, `memory_since`, `memory_until` and `memory_as_of` narrow the memories a run gets;
    a relative expression is resolved by the platform at each run."""
    settings = platform_web.settings(client_tenant)
    scope = {"application_id": "trips", "user_id": "lea"}
    async with AsyncPlatformClient(settings) as client:
        await MemoryClient(client).store(
            [
                {
                    "role": "user",
                    "text": "I took the night train to Vienna.",
                    "timestamp": "2023-05-08T10:00:00Z",
                },
                {
                    "role": "user",
                    "text": "I took the night train to Prague.",
                    "timestamp": "2024-02-01T10:00:00Z",
                },
            ],
            scope,
        )

    async def recalled(**config: Any) -> str:
        provider = _provider(settings, memory_enabled=True, knowledge_enabled=False, **scope, **config)
        async with provider:
            agent = _agent(chat, provider)
            await agent.run("Which night train did I take?", session=agent.create_session())
        return _sent(fake)

    everything = await recalled(memory_mode="fulltext")
    assert "Vienna" in everything and "Prague" in everything
    may = await recalled(memory_mode="fulltext", memory_when="May 2023")
    assert "Vienna" in may and "Prague" not in may
    later = await recalled(memory_mode="fulltext", memory_since="2024-01-01")
    assert "Prague" in later and "Vienna" not in later
    then = await recalled(memory_mode="fulltext", memory_as_of="2023-12-31")
    assert "Vienna" in then and "Prague" not in then
    with pytest.raises(ValidationError):
        ProviderConfig(memory_when="")


async def test_every_role_the_provider_may_store_is_stored(
    platform_web: Platform, client_tenant: Tenant, fake: FakeOpenAI, chat: OpenAIChatCompletionClient
) -> None:
    """memory_roles may name system and tool; the platform stores them (it used to drop them)."""
    settings = platform_web.settings(client_tenant)
    roles = ("user", "assistant", "system", "tool")
    provider = _provider(settings, memory_enabled=True, user_id="rolf", memory_roles=roles)
    async with provider:
        agent = _agent(chat, provider)
        messages = [
            Message(role="system", contents=["Speak briefly."]),
            Message(role="user", contents=["Hello there."]),
        ]
        await agent.run(messages, session=agent.create_session())
    async with AsyncPlatformClient(settings) as client:
        stored, _ = await MemoryClient(client).list({"user_id": "rolf"})
    assert {(m.role, m.text) for m in stored} >= {("system", "Speak briefly."), ("user", "Hello there.")}


@pytest.mark.slow
async def test_per_operation_thread_scope_binds_to_the_first_session(
    platform_web: Platform, client_tenant: Tenant, fake: FakeOpenAI, chat: OpenAIChatCompletionClient
) -> None:
    settings = platform_web.settings(client_tenant)
    provider = _provider(settings, memory_enabled=True, user_id="ana", scope_to_per_operation_thread_id=True)
    async with provider:
        agent = _agent(chat, provider)
        first = agent.create_session()
        await agent.run("I prefer window seats.", session=first)
        await agent.run("And quiet carriages.", session=first)
        with pytest.raises(ValueError, match="binds this provider to session"):
            await agent.run("Another conversation.", session=agent.create_session())
    async with AsyncPlatformClient(settings) as client:
        in_thread, _ = await MemoryClient(client).list({"user_id": "ana", "thread_id": first.session_id})
        everything, _ = await MemoryClient(client).list({"user_id": "ana"})
    assert len(in_thread) == 4 and len(everything) == 4  # nothing of the refused run was stored


@pytest.mark.slow
async def test_a_wrong_key_or_project_fails_when_entering(
    platform_web: Platform, client_tenant: Tenant, other_tenant: Tenant
) -> None:
    good = platform_web.settings(client_tenant)
    wrong_key = PlatformSettings(url=good.url, api_key="kp_nobody_secret", project_id=good.project_id)
    with pytest.raises(AuthenticationError):
        async with _provider(wrong_key):
            pass
    other_project = PlatformSettings(url=good.url, api_key=good.api_key, project_id=other_tenant.project.id)
    with pytest.raises(NotFoundError):
        async with _provider(other_project):
            pass


@pytest.mark.slow
async def test_platform_outage_fails_open_keeps_unsent_messages_and_sends_them_later(
    client_tenant: Tenant,
    fake: FakeOpenAI,
    chat: OpenAIChatCompletionClient,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    port = free_port()
    env = {**worker_env(), "VAR_DIR": str(tmp_path), "API_THROTTLE_RATE": "100000/min"}
    web, base = start_web(env, tmp_path / "web.log", port)
    settings = PlatformSettings(
        url=base,
        api_key=client_tenant.write_key.key,
        project_id=client_tenant.project.id,
        max_retries=1,
        backoff=0.05,
    )
    tolerant = _provider(settings, memory_enabled=True, user_id="ana")
    strict = _provider(settings, memory_enabled=True, user_id="strict", fail_open=False)
    try:
        async with tolerant, strict:
            stop(web)  # the platform goes down between runs
            caplog.set_level(logging.WARNING, logger="agent_framework_knowledge")
            reply = await _agent(chat, tolerant).run("I moved to Porto.")
            assert reply.text == "echo: I moved to Porto."  # the run went on without context
            assert "## Knowledge" not in _sent(fake)
            warnings = [r.getMessage() for r in caplog.records if r.name == "agent_framework_knowledge"]
            assert any("search failed" in w and "goes on without it" in w for w in warnings)
            assert any("did not store 2 messages" in w and "kept" in w for w in warnings)
            assert tolerant.pending_messages == 2
            with pytest.raises(UnavailableError):
                await _agent(chat, strict).run("This must not pass silently.")

            web, _ = start_web(env, tmp_path / "web.log", port)  # back, same address
            await _agent(chat, tolerant).run("My favourite colour is green.")
            assert tolerant.pending_messages == 0
        async with AsyncPlatformClient(settings) as client:
            stored, _ = await MemoryClient(client).list({"user_id": "ana"})
        assert [m.text for m in _in_order(stored)] == [
            "I moved to Porto.",
            "echo: I moved to Porto.",
            "My favourite colour is green.",
            "echo: My favourite colour is green.",
        ]
    finally:
        stop(web)


async def test_messages_still_unsent_on_close_are_reported(
    fake: FakeOpenAI, chat: OpenAIChatCompletionClient, caplog: pytest.LogCaptureFixture
) -> None:
    scripted = ScriptedHttp()
    try:
        settings = PlatformSettings(url=scripted.url, api_key="kp_a_b", project_id="p1", max_retries=0)
        scripted.queue(200, {"id": "p1", "name": "P"})  # the key check when entering
        scripted.queue(200, {"items": [], "mode": "hybrid", "depth": "messages", "took_ms": 1.0})
        scripted.queue(503, {"error": {"code": "dependency_unavailable", "message": "neo4j down"}})  # store
        scripted.queue(
            503, {"error": {"code": "dependency_unavailable", "message": "neo4j down"}}
        )  # on close
        provider = _provider(settings, memory_enabled=True, user_id="ana", knowledge_enabled=False)
        caplog.set_level(logging.WARNING, logger="agent_framework_knowledge")
        async with provider:
            await _agent(chat, provider).run("Remember this.")
            assert provider.pending_messages == 2
        errors = [r.getMessage() for r in caplog.records if r.levelno == logging.ERROR]
        assert errors == ["2 messages could not be stored in the knowledge platform and are lost"]
        assert [(m, p) for m, p, _ in scripted.seen] == [
            ("GET", "/api/v1/projects/p1"),
            ("POST", "/api/v1/projects/p1/memories/search"),
            ("POST", "/api/v1/projects/p1/memories"),
            ("POST", "/api/v1/projects/p1/memories"),
        ]
    finally:
        scripted.close()


async def test_429_waits_as_retry_after_says_within_the_bound(
    fake: FakeOpenAI, chat: OpenAIChatCompletionClient, caplog: pytest.LogCaptureFixture
) -> None:
    scripted = ScriptedHttp()
    try:
        settings = PlatformSettings(url=scripted.url, api_key="kp_a_b", project_id="p1", max_wait=0.3)
        scripted.queue(200, {"id": "p1", "name": "P"})
        throttled = {
            "error": {"code": "throttled", "message": "slow down", "details": {"retry_after_sec": 1}}
        }
        scripted.queue(429, throttled, Retry_After="0.1")
        scripted.queue(429, throttled, Retry_After="3600")  # longer than max_wait: capped
        hit = {"chunk_id": "c1", "document_name": "Doc", "text": "the answer", "score": 0.9}
        scripted.queue(200, {"items": [hit], "mode": "hybrid", "took_ms": 2.0})
        caplog.set_level(logging.WARNING, logger="knowledge_platform_client")
        provider = _provider(settings)
        async with provider:
            await _agent(chat, provider).run("question?")
        assert "[Score: 0.900] [document: Doc]\nthe answer" in _sent(fake)
        retries = [r.getMessage() for r in caplog.records if r.name == "knowledge_platform_client"]
        assert [w.split("; ")[1] for w in retries] == ["retry 1 in 0.10 s", "retry 2 in 0.30 s"]
    finally:
        scripted.close()


@pytest.mark.slow
async def test_a_batch_the_platform_refuses_is_reported_not_retried(
    platform_web: Platform,
    client_tenant: Tenant,
    fake: FakeOpenAI,
    chat: OpenAIChatCompletionClient,
    caplog: pytest.LogCaptureFixture,
) -> None:
    settings = platform_web.settings(client_tenant)
    huge = "x" * 40_000  # over the platform's MEMORY_MAX_MESSAGE_CHARS
    caplog.set_level(logging.WARNING, logger="agent_framework_knowledge")
    tolerant = _provider(settings, memory_enabled=True, user_id="ana", knowledge_enabled=True)
    strict = _provider(settings, memory_enabled=True, user_id="strict", fail_open=False)
    async with tolerant, strict:
        await _agent(chat, tolerant).run(huge)
        assert tolerant.pending_messages == 0
        assert any(
            r.levelno == logging.ERROR
            and "did not store 2 messages" in r.getMessage()
            and "413" in r.getMessage()
            for r in caplog.records
        )
        with pytest.raises(PayloadTooLargeError):
            await _agent(chat, strict).run(huge)
    async with AsyncPlatformClient(settings) as client:
        assert (await MemoryClient(client).list({"user_id": "ana"}))[0] == []


@pytest.mark.slow
def test_the_sample_recalls_across_sessions_offline(platform_web: Platform, client_tenant: Tenant) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": ":".join(
            str(REPO / "clients" / p / "src") for p in ("platform-client", "agent-framework")
        ),
        "KNOWLEDGE_PLATFORM_URL": platform_web.base,
        "KNOWLEDGE_PLATFORM_API_KEY": client_tenant.write_key.key,
        "KNOWLEDGE_PLATFORM_PROJECT_ID": client_tenant.project.id,
    }
    run = subprocess.run(
        [sys.executable, str(SAMPLE)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "From our earlier conversations: Hi, I'm Ana. I live in Lisbon" in run.stdout
    assert "Ana remembered across sessions: True; Bruno saw Ana's memory: False" in run.stdout


async def test_the_platform_client_searches_memory_by_time_role_and_author_and_retries_safely(
    platform_web: Platform, client_tenant: Tenant
) -> None:
    settings = platform_web.settings(client_tenant)
    scope = {"user_id": "client-filters"}
    messages = [
        {
            "role": "user",
            "text": "Booked the ferry to Madeira.",
            "message_id": "f1",
            "author_name": "Ana",
            "timestamp": "2023-05-08T10:00:00Z",
        },
        {
            "role": "assistant",
            "text": "The ferry to Madeira leaves at eight.",
            "message_id": "f2",
            "timestamp": "2023-06-02T10:00:00Z",
        },
    ]
    async with AsyncPlatformClient(settings) as client:
        memory = MemoryClient(client)
        first = await memory.store(messages, scope)
        again = await memory.store(messages, scope)  # a retry: nothing new
        assert [s.id for s in again.stored] == [s.id for s in first.stored]
        assert all(s.duplicate for s in again.stored) and not any(s.duplicate for s in first.stored)

        async def texts(**filters: Any) -> list[str]:
            found = await memory.search("ferry Madeira", scope, mode="fulltext", **filters)
            return [m.text for m in found.items]

        assert await texts(when="May 2023") == ["Booked the ferry to Madeira."]
        assert await texts(since="last month", reference_time="2023-07-01T00:00:00Z") == [
            "The ferry to Madeira leaves at eight."
        ]
        assert await texts(roles=["assistant"]) == ["The ferry to Madeira leaves at eight."]
        assert await texts(author="Ana") == ["Booked the ferry to Madeira."]
        assert await texts(as_of="2023-05-31") == ["Booked the ferry to Madeira."]
        later = await memory.store(
            [{"role": "user", "text": "Ferry moved to nine."}], scope, embed_in_worker=True
        )
        assert later.embedding_pending and later.job_id
        assert not first.embedding_pending
        with pytest.raises(BadRequestError):
            await texts(when="whenever")


async def test_the_platform_client_stores_reads_and_filters_message_metadata(
    platform_web: Platform, client_tenant: Tenant
) -> None:
    settings = platform_web.settings(client_tenant)
    scope = {"user_id": "client-metadata"}
    ticket = {"channel": "email", "priority": 2, "urgent": True, "tags": ["billing", "refund"]}
    async with AsyncPlatformClient(settings) as client:
        memory = MemoryClient(client)
        stored = await memory.store(
            [
                MemoryMessage(role="user", text="The ferry refund is late.", metadata=ticket),
                {
                    "role": "assistant",
                    "text": "The ferry refund is on its way.",
                    "metadata": {"agent": "bot"},
                },
                {"role": "user", "text": "Thanks for the ferry refund."},
            ],
            scope,
        )
        first, reply, plain = (s.id for s in stored.stored)

        async def hits(mode: str = "hybrid", **metadata: Any) -> list[MemoryHit]:
            query = "" if mode == "recency" else "ferry refund"
            found = await memory.search(query, scope, mode=mode, min_score=0, metadata=metadata or None)
            return found.items

        by_id = {hit.id: hit for hit in await hits()}
        assert by_id[first].fields == ticket and by_id[reply].fields == {"agent": "bot"}
        assert by_id[plain].fields == {} and by_id[first].metadata["seq"] == 1
        for mode in ("vector", "fulltext", "hybrid", "recency"):
            assert [h.id for h in await hits(mode, tags="refund")] == [first]
            assert [h.id for h in await hits(mode, priority=2, urgent=True)] == [first]
            assert [h.id for h in await hits(mode, agent="bot")] == [reply]
            assert await hits(mode, channel="chat") == []
        listed, _ = await memory.list(scope)
        assert {hit.id: hit.fields for hit in listed} == {first: ticket, reply: {"agent": "bot"}, plain: {}}
        with pytest.raises(BadRequestError) as refused:
            await memory.store([{"role": "user", "text": "x", "metadata": {"bad key": "x"}}], scope)
        assert "metadata" in str(refused.value.details)
        with pytest.raises(BadRequestError):
            await hits(tags=["refund"])  # one value per key: a list is refused
        assert len((await memory.list(scope))[0]) == 3
