"""`knowledge-platform chat` against the real platform over HTTP (daphne, Neo4j, Redis), offline:
extractive answers, stored and continued by conversation id."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from knowledge.dto import DocumentInput
from tests.clients.conftest import Platform
from tests.conftest import Tenant
from tests.memory.helpers import count
from tests.retrieval.helpers import ingest_now

REPO = Path(__file__).resolve().parents[2]


def _cli(platform: Platform, tenant: Tenant, lines: list[str], *flags: str, key: str | None = None) -> str:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "clients" / "platform-client" / "src"),
        "KNOWLEDGE_PLATFORM_URL": platform.base,
        "KNOWLEDGE_PLATFORM_API_KEY": key or tenant.write_key.key,
    }
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "knowledge_platform_client.cli",
            "chat",
            "--project",
            tenant.project.id,
            *flags,
        ],
        input="\n".join(lines) + "\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_chat_with_rag_persists_and_continues_by_id(platform_web: Platform, client_tenant: Tenant) -> None:
    ingest_now(
        client_tenant.project.id,
        [
            DocumentInput(
                title="Lisbon trams",
                text="Tram 28 climbs from Baixa to the castle of São Jorge. It runs every ten minutes.",
                source_path="guides/lisbon.md",
            )
        ],
    )
    out = _cli(
        platform_web,
        client_tenant,
        ["Which tram climbs to the castle?", "/quit", "never sent"],
        "--user",
        "ana",
        "--rag",
        "--persist-chat",
        "--mode",
        "extractive",
    )
    assert "Tram 28 climbs from Baixa" in out
    assert "References:\n[1] Lisbon trams" in out and "Path: guides/lisbon.md" in out
    conversation_id = re.search(r"\(conversation ([0-9a-f-]{36})\)", out).group(1)  # type: ignore[union-attr]
    assert count("Memory", client_tenant.project.id) == 2

    again = _cli(
        platform_web,
        client_tenant,
        ["How often does it run?"],
        "--user",
        "ana",
        "--rag",
        "--persist-chat",
        "--conversation-id",
        conversation_id,
    )
    assert f"continuing conversation {conversation_id}" in again and "every ten minutes" in again
    assert count("Memory", client_tenant.project.id) == 4


def test_chat_without_persist_stores_nothing_and_errors_are_printed(
    platform_web: Platform, client_tenant: Tenant
) -> None:
    out = _cli(platform_web, client_tenant, ["hello"], "--user", "ana", key=client_tenant.read_key.key)
    assert "assistant> " in out
    assert count("Memory", client_tenant.project.id) == 0
    foreign = _cli(
        platform_web,
        client_tenant,
        ["hello"],
        "--user",
        "ana",
        "--conversation-id",
        "not-a-conversation",
    )
    assert "error: 404" in foreign
