"""The project dashboard in the admin: what one project holds, its jobs with links, its LLM tokens
per day, its last retention and backup runs; nothing of another project; behind its permission."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client

from core.jobs import job_create
from core.jobs.lifecycle import job_fail
from core.llm.usage import PROJECT_TOKENS_KEY
from core.models import Job
from core.runtime.redis_client import get_redis
from curation.admin import human_cell
from knowledge.dto import DocumentInput
from tests.conftest import Tenant
from tests.curation.test_admin import _staff
from tests.memory.helpers import assistant, count, store, user
from tests.retrieval.drift_helpers import DriftModel, ingest_with_communities, retrieve
from tests.retrieval.helpers import ingest_now
from tests.support.openai_server import FakeOpenAI, Step, count_tokens

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_graph")]


def _dashboard(client: Client, project_id: str) -> object:
    return client.get(f"/admin/core/project/{project_id}/dashboard/")


def test_a_projects_dashboard_shows_its_contents_jobs_and_tokens_only(
    tenant_a: Tenant, tenant_b: Tenant
) -> None:
    a, b = tenant_a.project.id, tenant_b.project.id
    ingest_now(a, [DocumentInput(title=f"Doc {i}", text=f"Ada Lovelace wrote note {i}.") for i in range(3)])
    ingest_now(b, [DocumentInput(title="Other", text="Grace Hopper built a compiler.")])
    stored = store(
        tenant_a.client(tenant_a.write_key),
        a,
        [user("I moved to Lisbon."), assistant("Noted.")],
        user_id="u1",
        thread_id="t1",
    )
    assert stored.status_code in (200, 201, 202), stored.content
    failed = job_create(project_id=a, kind="import")
    job_fail(job_id=failed.id, error="archive checksum mismatch")
    running = job_create(project_id=a, kind="memory_process")
    Job.objects.filter(pk=running.pk).update(
        status=Job.Status.RUNNING, phase="deriving", token_usage={"total_tokens": 1200}
    )
    backup = job_create(project_id=a, kind="backup")
    Job.objects.filter(pk=backup.pk).update(status=Job.Status.SUCCEEDED)
    other = job_create(project_id=b, kind="ingest")
    Job.objects.filter(pk=other.pk).update(token_usage={"total_tokens": 999_999})

    response = _dashboard(_staff("curator", "curation.browse_graph"), a)

    assert response.status_code == 200
    d = response.context["d"]
    assert d.counts["documents"] == 3 and [(bar.label, bar.value) for bar in d.documents] == [("ready", 3)]
    assert d.counts["chunks"] == 3 and d.counts["memories"] == count("Memory", a) > 0
    assert d.counts["conversations"] == 1
    assert [job.pk for job in d.jobs_failed] == [failed.pk]
    assert running.pk in [job.pk for job in d.jobs_running]
    # A's own jobs (the memory store's processing reports its usage too), never B's 999,999
    used = sum((j.token_usage or {}).get("total_tokens", 0) for j in Job.objects.filter(project_id=a))
    assert used >= 1200 and d.tokens_jobs == used
    # storing the messages embedded them inside the request: those tokens are the requests' part
    assert d.tokens_requests is not None and d.tokens_total == used + d.tokens_requests
    assert d.tokens_per_day[-1].value == d.tokens_total and d.tokens_per_day[-1].pct == 100
    kinds = {row["kind"]: row for row in d.jobs_by_kind}
    assert kinds["import"]["failed"] == 1 and kinds["memory_process"]["running"] == 1
    assert kinds["ingest"]["succeeded"] == 1  # A's own ingestion; B's job is not counted
    assert d.last_backup.pk == backup.pk and d.last_retention is None
    html = response.content.decode()
    assert f"/admin/core/job/{failed.pk}/change/" in html and "archive checksum mismatch" in html
    assert f'data-tokens="{d.tokens_total}"' in html and "999999" not in html
    assert "never" in html.split('id="last-retention"')[1].split("</p>")[0]
    last_backup = html.split('id="last-backup"')[1].split("</p>")[0]
    assert f"/admin/core/job/{backup.pk}/change/" in last_backup and "succeeded" in last_backup


def test_the_dashboard_is_linked_from_the_project_list_and_needs_its_permission(tenant_a: Tenant) -> None:
    curator = _staff("curator", "curation.browse_graph", "core.view_project")
    listing = curator.get("/admin/core/project/")
    assert listing.status_code == 200
    assert f"/admin/core/project/{tenant_a.project.id}/dashboard/" in listing.content.decode()
    assert _dashboard(_staff("viewer", "core.view_project"), tenant_a.project.id).status_code == 403
    assert _dashboard(Client(), tenant_a.project.id).status_code == 302  # to the login page
    assert _dashboard(curator, "no-such-project").status_code == 404


def test_list_pages_name_the_project_and_show_human_times(tenant_a: Tenant) -> None:
    ingest_now(tenant_a.project.id, [DocumentInput(title="Lovelace", text="Ada Lovelace wrote the notes.")])
    curator = _staff("curator", "curation.browse_graph")
    response = curator.get(f"/admin/curation/graphcontent/documents/?project={tenant_a.project.id}")
    assert response.status_code == 200
    (row,) = response.context["rows"]
    assert row["project_name"] == tenant_a.project.name
    cells = dict(zip(response.context["columns"], row["cells"], strict=True))
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", cells["created_at"])
    assert cells["author"] == "—" and cells["status"] == "ready"
    html = response.content.decode()
    assert f'href="/admin/core/project/{tenant_a.project.id}/dashboard/"' in html


@pytest.mark.parametrize(
    ("column", "value", "shown"),
    [
        ("last_update_time", 1772359200.5, "2026-03-01 10:00 UTC"),
        ("ended_at", "2026-03-01T11:00:00+01:00", "2026-03-01 10:00 UTC"),
        ("created_at", "2026-03-01T10:00:00.123456789+00:00", "2026-03-01 10:00 UTC"),
        ("ended_at", "not a time", "not a time"),
        ("title", None, "—"),
        ("chunk_count", 0, 0),
    ],
)
def test_human_cells(column: str, value: object, shown: object) -> None:
    assert human_cell(column, value) == shown


def test_tokens_spent_inside_requests_count_for_their_projects_day(
    tenant_a: Tenant, tenant_b: Tenant, fake_openai: FakeOpenAI, settings: Any
) -> None:
    a, b = tenant_a.project.id, tenant_b.project.id
    for pid in (a, b):
        get_redis().delete(PROJECT_TOKENS_KEY.format(pid))
    settings.LLM_PROVIDER = "none"  # ingestion without the LLM: no job spends tokens
    ingest_with_communities(a)
    settings.LLM_PROVIDER = "openai"

    # a chat turn (a request under /projects/{id}/) answered by the LLM
    answer = "Charles Babbage designed the Analytical Engine."
    fake_openai.responder = lambda body: Step(content=answer)
    turn = tenant_a.client(tenant_a.write_key).post(
        f"/api/v1/projects/{a}/conversations:chat",
        {"message": "Who designed the Analytical Engine?", "user_id": "ana"},
        format="json",
    )
    assert turn.status_code == 200 and turn.json()["mode"] == "llm", turn.content
    calls = fake_openai.requests_to("/chat/completions")
    chat_tokens = sum(
        sum(count_tokens(str(m.get("content", "")), "fake-chat") for m in call.body["messages"])
        + count_tokens(answer, "fake-chat")
        for call in calls
    )
    # a DRIFT answer (/retrieve names its project in the body); its strategy meters its own threads
    fake_openai.responder = DriftModel(followups=2)
    drift = retrieve(tenant_a.client(tenant_a.read_key), query="Analytical Engine", project_id=a)
    assert drift.status_code == 200 and drift.json()["mode"] == "llm", drift.content
    drift_tokens = drift.json()["usage"]["prompt_tokens"] + drift.json()["usage"]["completion_tokens"]
    assert chat_tokens > 0 and drift_tokens > 0

    curator = _staff("curator", "curation.browse_graph")
    d = _dashboard(curator, a).context["d"]
    jobs = sum((j.token_usage or {}).get("total_tokens", 0) for j in Job.objects.filter(project_id=a))
    assert d.tokens_requests == chat_tokens + drift_tokens and d.tokens_jobs == jobs  # embeddings
    assert d.tokens_per_day[-1].value == d.tokens_total == jobs + chat_tokens + drift_tokens
    assert f"requests {chat_tokens + drift_tokens:,}" in d.tokens_per_day[-1].detail
    other = _dashboard(curator, b).context["d"]
    assert other.tokens_requests == 0 and other.tokens_total == 0
