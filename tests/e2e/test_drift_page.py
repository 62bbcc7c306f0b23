"""The DRIFT page (/ui/drift/) in headless Chromium against the real ASGI server: key, project picker,
live progress over the websocket, answer with key facts, and a citation opening its chunk's text."""

from __future__ import annotations

import time
from typing import Any

import pytest

from core import graph
from core.models import Job
from tests.conftest import Tenant, make_tenant
from tests.knowledge.helpers import wait_job

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.django_db(transaction=True),  # the web process must see the tenant and its key
    pytest.mark.usefixtures("celery_worker_process"),
]

HOSTILE_TITLE = 'Babbage <img src=x onerror="window.__xss = 1">'
DOCUMENTS = [
    {
        "title": "Lovelace",
        "text": "Ada Lovelace worked with Charles Babbage on the Analytical Engine. She published the first "
        "algorithm intended for the Analytical Engine.",
    },
    {
        # a title that would run script if the page ever inserted server text as HTML
        "title": HOSTILE_TITLE,
        "text": "Charles Babbage designed the Difference Engine and later the Analytical Engine, a mechanical "
        "general-purpose computer with a mill and a store.",
    },
    {
        "title": "Sourdough",
        "text": "Sourdough bread rises with a starter of wild yeast. Bakers feed the starter with flour and "
        "water and let the dough ferment overnight.",
    },
    {
        "title": "Glaciers",
        "text": "Glaciers form where snow accumulates faster than it melts. The ice flows downhill and carves "
        "valleys, leaving moraines when it retreats.",
    },
]


def _ingest_with_communities(tenant: Tenant) -> None:
    client = tenant.client(tenant.write_key)
    pid = tenant.project.id
    submitted = client.post(f"/api/v1/projects/{pid}/documents", {"documents": DOCUMENTS}, format="json")
    assert submitted.status_code == 202, submitted.content
    assert wait_job(submitted.json()["job_id"]).status == Job.Status.SUCCEEDED
    rebuild = client.post(f"/api/v1/projects/{pid}/communities:rebuild")
    assert rebuild.status_code == 202, rebuild.content
    assert wait_job(rebuild.json()["job_id"]).status == Job.Status.SUCCEEDED
    # the worker's own debounced rebuild after ingestion must not swap communities mid-search
    deadline = time.monotonic() + 120
    unfinished = Job.objects.filter(project_id=pid, kind="communities").exclude(
        status__in=[Job.Status.SUCCEEDED, Job.Status.FAILED]
    )
    while unfinished.exists():
        assert time.monotonic() < deadline, "a community rebuild never finished"
        time.sleep(0.3)
    communities = graph.read("MATCH (c:Community {project_id: $p}) RETURN count(c) AS n", p=pid)[0]["n"]
    assert communities > 0


@pytest.fixture
def drift_tenant() -> Tenant:
    """A tenant with a clustered corpus, and another project its key must not see. Prepared before the
    browser starts: Playwright's sync API runs an event loop, inside which Django refuses ORM calls."""
    tenant = make_tenant("drift page")
    make_tenant("someone else")
    _ingest_with_communities(tenant)
    return tenant


def test_drift_page_streams_progress_answers_and_opens_cited_chunks(
    drift_tenant: Tenant, web: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    tenant, pid = drift_tenant, drift_tenant.project.id

    page = browser.new_page()
    problems: list[str] = []
    page.on(
        "console", lambda m: problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.set_default_timeout(30_000)
    page.goto(f"{web}/ui/drift/")

    page.get_by_test_id("api-key").fill(tenant.read_key.key)
    page.get_by_test_id("key-use").click()
    picker = page.get_by_test_id("project")
    expect(picker).to_have_attribute("data-loaded", "true")
    offered = picker.locator("option").evaluate_all("options => options.map(o => o.value)")
    assert offered == [pid]  # only the key's own project
    picker.select_option(pid)
    # the key lives in this tab's sessionStorage only
    stored = page.evaluate("() => [sessionStorage.getItem('kp.drift.apiKey'), localStorage.length]")
    assert stored == [tenant.read_key.key, 0]

    page.get_by_test_id("question").fill("Who designed the Analytical Engine?")
    page.get_by_test_id("search").click()
    expect(page.locator("#app")).to_have_attribute("data-state", "done", timeout=180_000)
    expect(page.get_by_test_id("status")).to_be_hidden()
    # the socket was open before the search was posted, so the stream starts with the first phase
    expect(page.get_by_test_id("stream-state")).to_have_attribute("data-state", "closed")
    retrieval_id = page.locator("#app").get_attribute("data-retrieval-id")
    assert retrieval_id and retrieval_id.startswith("ui-")

    phases = page.get_by_test_id("thought-event").evaluate_all("items => items.map(i => i.dataset.phase)")
    assert phases[0] == "initializing", phases
    assert phases[-1] == "completed", phases
    assert "error" not in phases
    expect(page.get_by_test_id("progress-bar")).to_have_attribute("data-pct", "100")
    expect(page.get_by_test_id("progress-pct")).to_have_text("100")
    assert page.get_by_test_id("progress-bar").evaluate("bar => bar.style.width") == "100%"

    expect(page.get_by_test_id("no-data")).to_be_hidden()
    answer = page.get_by_test_id("final-answer").text_content() or ""
    assert "Babbage" in answer
    assert f"retrieval {retrieval_id}" in (page.get_by_test_id("answer-meta").text_content() or "")
    facts = page.get_by_test_id("key-fact")
    assert facts.count() >= 1
    chips = page.get_by_test_id("citation")
    assert chips.count() >= 1

    project_chunks = {
        r["id"]: r
        for r in graph.read(
            "MATCH (c:Chunk {project_id: $p}) MATCH (d:Document {id: c.document_id}) "
            "RETURN c.id AS id, c.text AS text, d.title AS title",
            p=pid,
        )
    }
    labels = []
    for index in range(chips.count()):
        chip = chips.nth(index)
        chunk_id = chip.get_attribute("data-chunk-id")
        assert chunk_id in project_chunks
        labels.append(chip.text_content())
        assert chip.text_content() == project_chunks[chunk_id]["title"]  # labelled with the document name

    # every citation opens its chunk: the text shown is the chunk's text in Neo4j, exactly
    for index in range(chips.count()):
        chip = chips.nth(index)
        chunk_id = chip.get_attribute("data-chunk-id")
        chip.click()
        panel = page.get_by_test_id("chunk-panel")
        expect(panel).to_have_attribute("data-state", "loaded")
        expect(panel).to_have_attribute("data-chunk-id", chunk_id or "")
        assert page.get_by_test_id("chunk-text").text_content() == project_chunks[chunk_id]["text"]
        assert page.get_by_test_id("chunk-document").text_content() == project_chunks[chunk_id]["title"]

    # the hostile document title is cited and shown as text, never run as HTML
    assert HOSTILE_TITLE in labels
    assert page.evaluate("() => window.__xss") is None
    assert page.locator("main img").count() == 0
    sources = page.locator('[data-testid="thought-event"][data-phase="completed"] strong')
    expect(sources.first).to_have_text("Sources:")
    assert problems == []

    page.get_by_test_id("chunk-close").click()
    expect(page.get_by_test_id("chunk-panel")).to_be_hidden()
