"""The MCP server against the real platform: the protocol SDK's own client over streamable HTTP (daphne,
Neo4j, Redis and the test database) and over stdio (`manage.py mcp --stdio`)."""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.jsonrpc import INVALID_PARAMS

from mcp_server.dispatch import key_project
from mcp_server.server import FORBIDDEN, UNAUTHORIZED
from mcp_server.tools import TOOLS
from tests.clients.conftest import Platform
from tests.conftest import Tenant, make_tenant, worker_env
from tests.retrieval.corpus import DOCS
from tests.retrieval.drift_helpers import ingest_with_communities
from tests.retrieval.helpers import ingest_now

pytestmark = pytest.mark.anyio

SCOPE = {"application_id": "mcp-lab", "user_id": "ada"}


@asynccontextmanager
async def mcp_client(platform: Platform, key: str) -> AsyncIterator[Client]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
    async with http, Client(streamable_http_client(f"{platform.base}/mcp", http_client=http)) as client:
        yield client


def _rest(platform: Platform, key: str, method: str, path: str, body: Any = None) -> httpx.Response:
    return httpx.request(
        method, f"{platform.base}{path}", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60
    )


def _memories(platform: Platform, tenant: Tenant) -> list[dict[str, Any]]:
    answer = _rest(
        platform, tenant.write_key.key, "GET", f"/api/v1/projects/{tenant.project.id}/memories?user_id=ada"
    )
    assert answer.status_code == 200, answer.text
    return answer.json()["items"]


@pytest.fixture
def corpus(unconsumed_ingest_queue: str, client_tenant: Tenant) -> list[str]:
    return ingest_with_communities(client_tenant.project.id)


async def test_an_mcp_client_lists_the_tools_searches_and_stores_a_memory(
    platform_web: Platform, client_tenant: Tenant, corpus: list[str]
) -> None:
    async with mcp_client(platform_web, client_tenant.write_key.key) as client:
        listed = await client.list_tools()
        tools = {tool.name: tool for tool in listed.tools}
        assert set(tools) == {spec.name for spec in TOOLS}
        # the schemas are the REST serializers': their limits, no unknown fields, no project id
        search_schema = tools["search"].input_schema
        assert search_schema["properties"]["top_k"]["maximum"] == 100
        assert search_schema["additionalProperties"] is False and "query" in search_schema["required"]
        assert "project_id" not in tools["drift_search"].input_schema["properties"]
        assert tools["document_get"].input_schema["required"] == ["document_id"]
        assert tools["memory_forget"].annotations.destructive_hint is True
        assert tools["search"].annotations.read_only_hint is True

        found = await client.call_tool("search", {"query": "Analytical Engine algorithm", "top_k": 3})
        assert not found.is_error, found.content
        rest = _rest(
            platform_web,
            client_tenant.write_key.key,
            "POST",
            f"/api/v1/projects/{client_tenant.project.id}/search",
            {"query": "Analytical Engine algorithm", "top_k": 3},
        ).json()
        assert [i["chunk_id"] for i in found.structured_content["items"]] == [
            i["chunk_id"] for i in rest["items"]
        ]
        assert found.structured_content["items"][0]["document_name"] == "Lovelace"
        assert json.loads(found.content[0].text) == found.structured_content

        message = {"role": "user", "text": "I keep my sourdough starter in the fridge.", "message_id": "m1"}
        stored = await client.call_tool("memory_add", {"messages": [message], "scope": SCOPE})
        assert not stored.is_error, stored.content
        ids = [m["id"] for m in stored.structured_content["stored"]]
        assert len(ids) == 1
        again = await client.call_tool("memory_add", {"messages": [message], "scope": SCOPE})
        # a retried store changes nothing: the same id, marked a duplicate, and no new job
        assert [(m["id"], m.get("duplicate")) for m in again.structured_content["stored"]] == [(ids[0], True)]
        assert again.structured_content["job_id"] is None
        conversation = {"conversation_id": stored.structured_content["conversation_id"]}
        references = await client.call_tool("conversation_references", conversation)
        assert not references.is_error, references.content
        job = await client.call_tool("job_status", {"job_id": stored.structured_content["job_id"]})
        assert not job.is_error and job.structured_content["id"] == stored.structured_content["job_id"]
        remembered = await client.call_tool(
            "memory_search", {"query": "where is the sourdough starter", "scope": SCOPE, "mode": "fulltext"}
        )
        assert [item["id"] for item in remembered.structured_content["items"]] == ids
        assert [m["id"] for m in _memories(platform_web, client_tenant)] == ids

        forgot = await client.call_tool("memory_forget", {"scope": SCOPE})
        assert not forgot.is_error, forgot.content
    assert _memories(platform_web, client_tenant) == []


async def test_documents_are_added_read_and_served_as_resources(
    platform_web: Platform, client_tenant: Tenant, corpus: list[str]
) -> None:
    async with mcp_client(platform_web, client_tenant.write_key.key) as client:
        got = await client.call_tool("document_get", {"document_id": corpus[0]})
        assert not got.is_error and got.structured_content["title"] == "Lovelace"

        resources = await client.list_resources()
        uris = {str(r.uri) for r in resources.resources}
        assert {f"kp://documents/{doc_id}" for doc_id in corpus} <= uris
        read = await client.read_resource(f"kp://documents/{corpus[0]}")
        assert json.loads(read.contents[0].text)["id"] == corpus[0]
        templates = await client.list_resource_templates()
        assert {t.uri_template for t in templates.resource_templates} == {
            "kp://documents/{document_id}",
            "kp://chunks/{chunk_id}",
        }

        added = await client.call_tool(
            "document_add", {"title": "Glass", "text": "Glass is an amorphous solid."}
        )
        assert not added.is_error, added.content
        doc_id = added.structured_content["document_id"]
        assert added.structured_content["job_id"]
        listed = _rest(
            platform_web,
            client_tenant.read_key.key,
            "GET",
            f"/api/v1/projects/{client_tenant.project.id}/documents/{doc_id}",
        )
        assert listed.status_code == 200 and listed.json()["title"] == "Glass"


async def test_no_key_or_a_wrong_key_is_refused_before_the_protocol(platform_web: Platform) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for auth in (
        {},
        {"Authorization": "Bearer kp_00000000_wrongwrongwrongwrongwrong"},
        {"Authorization": "Basic x"},
    ):
        answer = httpx.post(f"{platform_web.base}/mcp", json=call, headers={**headers, **auth}, timeout=30)
        assert answer.status_code == 401, answer.text
        assert answer.headers["www-authenticate"].startswith("Bearer")
        assert answer.json()["error"]["code"] == UNAUTHORIZED
    with pytest.raises(Exception):  # noqa: B017 - the SDK client cannot connect without a key
        async with mcp_client(platform_web, "kp_00000000_wrongwrongwrongwrongwrong") as client:
            await client.list_tools()
    # a browser page of another origin cannot drive the server (DNS rebinding)
    evil = {**headers, "Origin": "http://evil.example", "Authorization": "Bearer x"}
    assert httpx.post(f"{platform_web.base}/mcp", json=call, headers=evil, timeout=30).status_code == 403


async def test_a_read_key_cannot_write_and_the_session_goes_on(
    platform_web: Platform, client_tenant: Tenant
) -> None:
    message = {"role": "user", "text": "I moved to Lisbon."}
    async with mcp_client(platform_web, client_tenant.read_key.key) as client:
        with pytest.raises(MCPError) as refused:
            await client.call_tool("memory_add", {"messages": [message], "scope": SCOPE})
        assert refused.value.code == FORBIDDEN and "scope" in refused.value.message
        with pytest.raises(MCPError) as refused:
            await client.call_tool("document_add", {"title": "x", "text": "y"})
        assert refused.value.code == FORBIDDEN
        # the same session still answers what the key may do
        searched = await client.call_tool("memory_search", {"query": "Lisbon", "scope": SCOPE})
        assert not searched.is_error and searched.structured_content["items"] == []
    assert _memories(platform_web, client_tenant) == []


async def test_bad_arguments_are_tool_errors_that_write_nothing(
    platform_web: Platform, client_tenant: Tenant
) -> None:
    async with mcp_client(platform_web, client_tenant.write_key.key) as client:
        # (tool, arguments, the field the error must name)
        cases: list[tuple[str, dict[str, Any], str]] = [
            ("search", {"query": "x", "top_k": 101}, "top_k"),
            ("search", {"query": "x", "topk": 3}, "topk"),
            ("search", {}, "query"),
            ("memory_add", {"messages": [{"role": "user"}], "scope": SCOPE}, "messages[0]"),
            ("memory_add", {"messages": [{"role": "user", "text": "hi"}], "scope": {}}, "scope"),
            ("document_add", {"title": "no text"}, "text"),
            ("document_get", {"document_id": ""}, "document_id"),
            ("document_get", {"document_id": "x/references"}, "document_id"),
            ("job_status", {"job_id": 7}, "job_id"),
            ("job_status", {"job_id": "j", "verbose": True}, "verbose"),
        ]
        for name, args, field in cases:
            result = await client.call_tool(name, args)
            assert result.is_error, (name, args)
            error = result.structured_content["error"]
            assert result.structured_content["status"] == 400 and error["code"] == "invalid_input", (
                name,
                error,
            )
            assert field in error["message"] or field in error["details"].get("fields", {}), (name, error)
        # an id that is no document's (any characters but '/') is not found, as over REST
        missing = await client.call_tool("document_get", {"document_id": "nö such id?#"})
        assert missing.is_error and missing.structured_content["status"] == 404
        with pytest.raises(MCPError) as unknown:
            await client.call_tool("drop_database", {})
        assert unknown.value.code == INVALID_PARAMS
        with pytest.raises(MCPError) as unknown:
            await client.read_resource("kp://secrets/1")
        assert unknown.value.code == INVALID_PARAMS
        # still serving after all of it
        assert not (await client.call_tool("search", {"query": "anything"})).is_error
    assert _memories(platform_web, client_tenant) == []
    documents = _rest(
        platform_web,
        client_tenant.read_key.key,
        "GET",
        f"/api/v1/projects/{client_tenant.project.id}/documents",
    )
    assert documents.json()["items"] == []
    # a body over MCP_MAX_BODY_BYTES is refused by the transport, unread
    huge = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "search", "arguments": {"query": "x" * (11 * 1024 * 1024)}},
    }
    answer = httpx.post(
        f"{platform_web.base}/mcp",
        json=huge,
        headers={
            "Authorization": f"Bearer {client_tenant.write_key.key}",
            "Accept": "application/json, text/event-stream",
        },
        timeout=60,
    )
    assert answer.status_code == 413


@pytest.fixture
def their_document(unconsumed_ingest_queue: str, other_tenant: Tenant) -> str:
    return ingest_now(other_tenant.project.id, [DOCS[2]])[0]


async def test_another_projects_ids_are_not_found(
    platform_web: Platform, client_tenant: Tenant, other_tenant: Tenant, their_document: str
) -> None:
    theirs = their_document
    async with mcp_client(platform_web, other_tenant.write_key.key) as client:
        stored = await client.call_tool(
            "memory_add", {"messages": [{"role": "user", "text": "secret"}], "scope": SCOPE}
        )
        their_job = stored.structured_content["job_id"]
        their_conversation = stored.structured_content["conversation_id"]
    async with mcp_client(platform_web, client_tenant.write_key.key) as client:
        for name, args in (
            ("document_get", {"document_id": theirs}),
            ("job_status", {"job_id": their_job}),
            ("conversation_references", {"conversation_id": their_conversation}),
        ):
            result = await client.call_tool(name, args)
            assert result.is_error and result.structured_content["status"] == 404, (name, result.content)
            assert "secret" not in result.content[0].text
        with pytest.raises(MCPError) as missing:
            await client.read_resource(f"kp://documents/{theirs}")
        assert missing.value.code == INVALID_PARAMS
        searched = await client.call_tool(
            "memory_search", {"query": "secret", "scope": SCOPE, "mode": "fulltext"}
        )
        assert searched.structured_content["items"] == []
        found = await client.call_tool("search", {"query": "sourdough starter wild yeast"})
        assert all(i["document_id"] != theirs for i in found.structured_content["items"])


async def test_drift_search_sends_its_phases_as_progress(
    platform_web: Platform, client_tenant: Tenant, corpus: list[str]
) -> None:
    heard: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        heard.append((progress, total, message))

    async with mcp_client(platform_web, client_tenant.read_key.key) as client:
        result = await client.call_tool(
            "drift_search", {"query": "How do glaciers carve valleys?"}, progress_callback=on_progress
        )
        assert not result.is_error, result.content
        assert result.structured_content["final_answer"]
        quiet = await client.call_tool("drift_search", {"query": "How do glaciers carve valleys?"})
        assert not quiet.is_error
    assert heard, "no progress notification"
    assert [p for p, _, _ in heard] == sorted(p for p, _, _ in heard) and heard[-1][0] == 100
    assert all(total == 100 for _, total, _ in heard) and all(m for _, _, m in heard)


@pytest.mark.slow
async def test_the_stdio_server_acts_as_its_key(client_tenant: Tenant, corpus: list[str]) -> None:
    env = {**worker_env(), "MCP_API_KEY": client_tenant.read_key.key, "EMBEDDINGS_WARM_AT_START": "false"}
    params = StdioServerParameters(command=sys.executable, args=["manage.py", "mcp", "--stdio"], env=env)
    async with Client(params) as client:
        tools = await client.list_tools()
        assert {t.name for t in tools.tools} == {spec.name for spec in TOOLS}
        found = await client.call_tool("search", {"query": "Analytical Engine algorithm", "top_k": 2})
        assert found.structured_content["items"][0]["document_name"] == "Lovelace"
        with pytest.raises(MCPError) as refused:
            await client.call_tool("document_add", {"title": "x", "text": "y"})
        assert refused.value.code == FORBIDDEN


def test_wrong_keys_at_the_gate_count_against_the_abuse_throttle(db, settings) -> None:  # type: ignore[no-untyped-def]
    """The /mcp key check counts a wrong key as REST does (per address and key prefix) and answers
    429 with Retry-After once API_PROBE_RATE is used up, even for a right key from that address."""
    settings.API_PROBE_RATE = "2/min"
    address = f"203.0.113.{uuid.uuid4().int % 250 + 1}"
    wrong = f"kp_{uuid.uuid4().hex[:8]}_{'w' * 24}"
    assert [key_project(wrong, remote_addr=address).status for _ in range(2)] == [401, 401]
    throttled = key_project(wrong, remote_addr=address)
    assert throttled.status == 429 and int(throttled.headers["retry-after"]) >= 1
    tenant = make_tenant(f"gate {uuid.uuid4().hex[:8]}")
    assert key_project(tenant.read_key.key, remote_addr=address).status == 429
    known = key_project(tenant.read_key.key, remote_addr="198.51.100.9")
    assert known.status == 200 and known.body["id"] == tenant.project.id
