"""Conversations as knowledge (seed 003): title and sentiment derived in the background, topics from
the communities of the concepts they mention, listing and detail with users and privacy respected."""

from __future__ import annotations

from typing import Any

import pytest

from core import graph
from core.models import Job
from knowledge.dto import DocumentInput, EntityInput, RelationInput
from knowledge.tasks import communities_rebuild_job
from memory import extraction
from memory.tasks import memory_process
from tests.conftest import make_tenant
from tests.memory.helpers import assistant, store, user
from tests.retrieval.helpers import ingest_now

pytestmark = pytest.mark.django_db


def _process(body: dict[str, Any]) -> Job:
    memory_process.apply(args=(body["job_id"],))  # the job a store queued, in this process
    return Job.objects.get(pk=body["job_id"])


def _graph_with_communities(client: Any, project_id: str) -> None:
    names = ["Tram 28", "Lisbon", "Castle of São Jorge", "Douro", "Porto", "Port wine"]
    ingest_now(
        project_id,
        [
            DocumentInput(
                title="Travel notes",
                text="Tram 28 climbs through Lisbon to the Castle of São Jorge. Port wine ages in Porto by the Douro.",
                entities=[EntityInput(n, "PLACE") for n in names],
                relations=[
                    RelationInput("Tram 28", "Lisbon"),
                    RelationInput("Lisbon", "Castle of São Jorge"),
                    RelationInput("Tram 28", "Castle of São Jorge"),
                    RelationInput("Port wine", "Porto"),
                    RelationInput("Porto", "Douro"),
                    RelationInput("Port wine", "Douro"),
                ],
            )
        ],
    )
    rebuild = client.post(f"/api/v1/projects/{project_id}/communities:rebuild")
    communities_rebuild_job(rebuild.json()["job_id"])
    assert Job.objects.get(pk=rebuild.json()["job_id"]).status == "succeeded"


def test_title_sentiment_topics_and_messages_with_mentions(settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_PROVIDER = "none"
    tenant = make_tenant("conversations")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    _graph_with_communities(client, pid)
    body = store(
        client,
        pid,
        [
            user("I loved riding Tram 28 up to the castle of são jorge in Lisbon, thanks for the tip!"),
            assistant("Glad you enjoyed Lisbon."),
        ],
        user_id="ana",
        thread_id="t1",
    ).json()
    job = _process(body)
    assert job.status == "succeeded", job.errors
    assert job.counts["described"] == 1
    listed = client.get(f"/api/v1/projects/{pid}/conversations", {"user_id": "ana"}).json()
    assert listed["total"] == 1
    header = listed["items"][0]
    assert header["id"] == body["conversation_id"]
    assert header["title"] == "I loved riding Tram 28 up to the castle of são jorge in…"
    assert header["sentiment"] == "positive"

    detail = client.get(f"/api/v1/projects/{pid}/conversations/{body['conversation_id']}").json()
    assert [m["seq"] for m in detail["messages"]] == [1, 2]
    assert set(detail["messages"][0]["mentions"]) >= {"Tram 28", "Lisbon"}
    top = detail["topics"][0]
    assert top["community_id"] is not None and set(top["entities"]) >= {"Tram 28", "Lisbon"}
    assert not any("Porto" in t["entities"] for t in detail["topics"])
    page = client.get(
        f"/api/v1/projects/{pid}/conversations/{body['conversation_id']}?limit=1&offset=1"
    ).json()
    assert [m["text"] for m in page["messages"]] == ["Glad you enjoyed Lisbon."]
    # the title quotes the first message: deleting it takes the title too
    deleted = client.delete(f"/api/v1/projects/{pid}/memories/{detail['messages'][0]['id']}")
    assert deleted.status_code in (200, 204)
    assert (
        client.get(f"/api/v1/projects/{pid}/conversations/{body['conversation_id']}").json()["title"] is None
    )


def test_listing_and_detail_respect_users_privacy_and_projects(settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_PROVIDER = "none"
    tenant, other = make_tenant("conversations-tenancy"), make_tenant("conversations-tenancy-other")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    ana = store(client, pid, [user("hello")], user_id="ana", thread_id="t1").json()["conversation_id"]
    bo = store(client, pid, [user("secret")], user_id="bo", thread_id="t2").json()["conversation_id"]
    graph.write("MATCH (c:Conversation {id: $c}) SET c.accessibility = 'private'", c=bo)
    base = f"/api/v1/projects/{pid}/conversations"
    assert [c["id"] for c in client.get(base).json()["items"]] == [ana]
    assert [c["id"] for c in client.get(base, {"user_id": "bo"}).json()["items"]] == [bo]
    assert client.get(f"{base}/{bo}").status_code == 404
    assert client.get(f"{base}/{ana}", {"user_id": "bo"}).status_code == 404
    assert client.get(f"{base}/{bo}", {"user_id": "bo"}).status_code == 200
    outsider = other.client(other.write_key)
    assert outsider.get(f"/api/v1/projects/{other.project.id}/conversations/{ana}").status_code == 404
    assert outsider.get(f"/api/v1/projects/{other.project.id}/conversations").json()["total"] == 0
    assert client.get(base, {"limit": 0}).status_code == 400
    assert client.get(base, {"user_id": ""}).status_code == 400


@pytest.mark.parametrize(
    ("texts", "sentiment"),
    [
        (["Thanks, that was great and helpful!"], "positive"),
        (["This is broken and I am frustrated, terrible."], "negative"),
        (["What time is it in Lisbon?"], "neutral"),
        (["Great tips, thanks, but the app is broken and I am frustrated."], "mixed"),
    ],
)
def test_extractive_sentiment(texts: list[str], sentiment: str) -> None:
    messages = [extraction.Message(str(i), "user", t, "") for i, t in enumerate(texts)]
    assert extraction.describe_extractive(messages)[1] == sentiment
