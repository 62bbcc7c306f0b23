"""Anonymise now, from the admin: a conversation in place, a document re-ingested from its
anonymised text (chunks, embeddings and entities re-derived, no copy of the PII left)."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from core import graph
from core.models import Job
from curation.models import AuditEntry
from tests.conftest import make_tenant
from tests.curation.helpers import carriers
from tests.knowledge.helpers import wait_job
from tests.memory.helpers import assistant, store, user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("celery_worker_process")]


def _curator(*codenames: str) -> Client:
    account = User.objects.create_user("anonymiser", password="pw", is_staff=True)
    for codename in ("browse_graph", *codenames):
        account.user_permissions.add(
            Permission.objects.get(content_type__app_label="curation", codename=codename)
        )
    client = Client()
    client.force_login(account)
    return client


def test_anonymise_a_conversation_and_a_document_now() -> None:
    tenant = make_tenant("anonymise-now")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    cid = store(
        client,
        pid,
        [user("I am called Rita Moreno, card 4111 1111 1111 1111."), assistant("Thanks Rita Moreno.")],
        user_id="rita",
    ).json()["conversation_id"]
    submitted = client.post(
        f"/api/v1/projects/{pid}/documents",
        {
            "title": "Visit report",
            "text": "Mr Tomas Halvorsen met the Lisbon harbour board; reach him at tomas.h@example.com. "
            "Tomas Halvorsen signed the Lisbon harbour lease with the board.",
        },
        format="json",
    ).json()
    assert wait_job(submitted["job_id"]).status == Job.Status.SUCCEEDED
    (doc_id,) = (
        [d["id"] for d in submitted["documents"]] if "documents" in submitted else [submitted["document_id"]]
    )
    assert carriers(pid, "tomas.h@example.com")  # in the document and its chunk

    reader = _curator()
    url = f"/admin/curation/graphcontent/conversations/{cid}/"
    assert b'id="anonymise"' not in reader.get(url).content
    assert reader.post(url, {"action": "anonymise"}).status_code == 403
    assert carriers(pid, "Rita Moreno")

    User.objects.filter(username="anonymiser").delete()
    curator = _curator("anonymise_content")
    assert b'id="anonymise"' in curator.get(url).content
    assert curator.post(url, {"action": "anonymise"}).status_code == 302
    assert carriers(pid, "Rita Moreno") == [] and carriers(pid, "4111 1111 1111 1111") == []
    texts = graph.read("MATCH (m:Memory {conversation_id: $c}) RETURN m.text AS t ORDER BY m.seq", c=cid)
    assert [r["t"] for r in texts] == ["I am called [PERSON], card [CREDIT_CARD].", "Thanks [PERSON]."]

    response = curator.post(f"/admin/curation/graphcontent/documents/{doc_id}/", {"action": "anonymise"})
    assert response.status_code == 302
    jobs = Job.objects.filter(project_id=pid, kind="ingest").order_by("-created_at")
    assert wait_job(jobs[0].id).status == Job.Status.SUCCEEDED
    # the communities were summarised from the original text: the rebuild that follows ingestion
    # replaces them
    deadline = time.monotonic() + 120
    while not Job.objects.filter(
        project_id=pid, kind="communities", created_at__gt=jobs[0].created_at
    ).exists():
        assert time.monotonic() < deadline, "no community rebuild after the re-ingestion"
        time.sleep(0.2)
    rebuild = Job.objects.filter(
        project_id=pid, kind="communities", created_at__gt=jobs[0].created_at
    ).first()
    assert rebuild is not None and wait_job(rebuild.id).status == Job.Status.SUCCEEDED
    for canary in ("Tomas Halvorsen", "Halvorsen", "tomas.h@example.com"):
        assert carriers(pid, canary) == [], canary
    chunks = graph.read("MATCH (c:Chunk {project_id: $p}) RETURN c.text AS t", p=pid)
    assert chunks and all("[PERSON]" in c["t"] and "[EMAIL]" in c["t"] for c in chunks)
    # entities were derived again from the anonymised text (and none holds the PII: checked above)
    assert graph.read("MATCH (e:Entity {project_id: $p}) RETURN count(e) AS n", p=pid)[0]["n"] >= 1
    actions = set(
        AuditEntry.objects.filter(project_id=pid, action="anonymise").values_list("target_kind", flat=True)
    )
    assert actions == {"conversation", "document"}
