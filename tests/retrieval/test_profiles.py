"""Enrichment profiles: validated with EXPLAIN on save, versioned, read-only even if tampered with."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from core import graph
from core.errors import InvalidInput
from retrieval import profiles
from retrieval.models import RetrievalProfile, RetrievalProfileVersion
from retrieval.services import profile_save
from tests.conftest import Tenant, make_tenant
from tests.retrieval.corpus import DOCS
from tests.retrieval.helpers import ingest_now, node_count, search

pytestmark = pytest.mark.django_db

REFUSED = {
    "create": "CREATE (x:Pwned {at: 1}) RETURN node.text AS text, score",
    "detach delete": "DETACH DELETE node RETURN 'gone' AS text, score",
    "merge": "MERGE (x:Pwned) RETURN node.text AS text, score",
    "set": "SET node.text = 'changed' RETURN node.text AS text, score",
    "remove": "REMOVE node.text RETURN 'x' AS text, score",
    "apoc procedure": "CALL apoc.load.json('http://example.org') YIELD value RETURN node.text AS text, score",
    "backticked procedure": "CALL `apoc`.`load`.`json`('x') YIELD value RETURN node.text AS text, score",
    "procedure outside allow-list": "CALL db.labels() YIELD label RETURN label AS text, score",
    "plugin function": "RETURN apoc.text.join(['a'], ',') AS text, score",
    "load csv": "LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line[0] AS text, score",
    "in transactions": "CALL () { MATCH (x) DETACH DELETE x } IN TRANSACTIONS RETURN node.text AS text, score",
    "other database": "USE system SHOW DATABASES YIELD name RETURN name AS text, 1.0 AS score",
    "no text": "RETURN node.id AS id, score",
    "no score": "RETURN node.text AS text",
    "reserved column": "RETURN node.text AS text, score, 1 AS __chunk_id",
    "syntax error": "MATCH (node)-[:HAS_ENTITY->(e) RETURN e.name AS text, score",
    "unknown function": "RETURN frobnicate(node.text) AS text, score",
    "empty": "   ",
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_on_save(name: str) -> None:
    before_nodes, before_rows = node_count(), RetrievalProfile.objects.count()
    with pytest.raises(InvalidInput) as caught:
        profile_save(name="attempt", retrieval_query=REFUSED[name])
    assert caught.value.message.startswith("retrieval_query")
    assert RetrievalProfile.objects.count() == before_rows
    assert not RetrievalProfileVersion.objects.filter(profile__name="attempt").exists()
    assert node_count() == before_nodes
    assert graph.read("MATCH (x:Pwned) RETURN count(x) AS n")[0]["n"] == 0


def test_allow_list_admits_a_named_procedure(settings) -> None:  # type: ignore[no-untyped-def]
    settings.RETRIEVAL_PROFILE_PROCEDURES = ["db.labels"]
    query = "CALL db.labels() YIELD label WITH node, score, collect(label) AS labels RETURN node.text AS text, score, labels"
    assert profiles.profile_check(query) == ["text", "score", "labels"]


def test_words_inside_strings_and_comments_are_not_clauses() -> None:
    query = "// CREATE nothing here\nRETURN node.text + ' (SET, CREATE, LOAD CSV)' AS text, score, 'DELETE' AS note"
    assert profiles.profile_check(query) == ["text", "score", "note"]
    # property names that happen to be keywords are not clauses either
    assert profiles.profile_check("RETURN node.text AS text, score, node.set AS s, node.use AS u") == [
        "text",
        "score",
        "s",
        "u",
    ]


def test_builtin_profiles_pass_their_own_checks() -> None:
    for profile in RetrievalProfile.objects.filter(builtin=True):
        assert profiles.profile_check(profile.retrieval_query) == profile.columns, profile.name
    assert set(RetrievalProfile.objects.filter(builtin=True).values_list("name", flat=True)) == {
        "document_context",
        "entity_neighbourhood",
    }


def test_every_change_is_a_new_version() -> None:
    first = profile_save(name="titles", retrieval_query="RETURN node.text AS text, score", user="ann")
    assert (first.version, first.columns) == (1, ["text", "score"])
    same = profile_save(name="titles", retrieval_query="RETURN node.text AS text, score;", description="d")
    assert same.version == 1  # only the description changed
    second = profile_save(
        name="titles",
        retrieval_query="RETURN node.text AS text, score, node.index AS chunk_index",
        user="bob",
    )
    assert second.version == 2
    versions = list(
        RetrievalProfileVersion.objects.filter(profile=second).values_list("version", "created_by")
    )
    assert versions == [(2, "bob"), (1, "ann")]


@pytest.fixture
def tenant() -> Tenant:
    tenant = make_tenant("profiles")
    ingest_now(tenant.project.id, DOCS[:2])
    return tenant


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("CREATE (x:Pwned {at: 1}) RETURN node.text AS text, score", "write"),
        ("DETACH DELETE node RETURN 'gone' AS text, score", "write"),
        ("SET node.text = 'changed' RETURN node.text AS text, score", "write"),
        (
            "CALL apoc.load.json('http://example.org') YIELD value RETURN node.text AS text, score",
            "allow-list",
        ),
        ("LOAD CSV FROM 'file:///etc/passwd' AS line RETURN line[0] AS text, score", "LOAD CSV"),
    ],
)
def test_a_tampered_profile_cannot_write(tenant: Tenant, body: str, message: str) -> None:
    """A row put into the table without validation still runs read-only and is refused."""
    RetrievalProfile.objects.create(name="tampered", retrieval_query=body, columns=["text", "score"])
    before = node_count()
    texts = graph.read("MATCH (c:Chunk {project_id: $p}) RETURN c.text AS t ORDER BY t", p=tenant.project.id)
    response = search(tenant.client(tenant.read_key), tenant.project.id, query="engine", profile="tampered")
    assert response.status_code == 422, response.content[:300]
    assert response.json()["error"]["code"] == "profile_failed"
    assert message in response.json()["error"]["message"]
    assert node_count() == before
    assert graph.read("MATCH (x:Pwned) RETURN count(x) AS n")[0]["n"] == 0
    assert (
        graph.read("MATCH (c:Chunk {project_id: $p}) RETURN c.text AS t ORDER BY t", p=tenant.project.id)
        == texts
    )


def test_read_only_transaction_is_the_last_line(tenant: Tenant) -> None:
    """Even past the text checks, Neo4j itself refuses a write in the profile's transaction."""
    chunk = graph.read("MATCH (c:Chunk {project_id: $p}) RETURN c.id AS id LIMIT 1", p=tenant.project.id)[0][
        "id"
    ]
    with pytest.raises(profiles.ProfileFailed):
        profiles.execute_read_only(
            body="CREATE (x:Pwned) RETURN node.text AS text, score",
            columns=["text", "score"],
            project_id=tenant.project.id,
            hits=[{"chunk_id": chunk, "score": 1.0}],
        )
    assert graph.read("MATCH (x:Pwned) RETURN count(x) AS n")[0]["n"] == 0


def test_slow_profile_times_out(tenant: Tenant, settings) -> None:  # type: ignore[no-untyped-def]
    settings.RETRIEVAL_PROFILE_TIMEOUT_SEC = 0.5
    profile_save(
        name="slow",
        retrieval_query=(
            "UNWIND range(1, 100000000) AS x WITH node, score, sum(x) AS s RETURN node.text AS text, score, s"
        ),
    )
    response = search(tenant.client(tenant.read_key), tenant.project.id, query="engine", profile="slow")
    assert response.status_code == 422
    assert response.json()["error"]["code"] == "profile_failed"


def test_disabled_or_other_projects_profile_is_unknown(tenant: Tenant) -> None:
    other = make_tenant("other")
    profile_save(
        name="theirs", retrieval_query="RETURN node.text AS text, score", project_id=other.project.id
    )
    profile_save(name="off", retrieval_query="RETURN node.text AS text, score", enabled=False)
    client = tenant.client(tenant.read_key)
    for name in ("theirs", "off"):
        response = search(client, tenant.project.id, query="engine", profile=name)
        assert response.status_code == 400
        assert name not in response.json()["error"]["details"]["profiles"]
    assert (
        search(other.client(other.read_key), other.project.id, query="engine", profile="theirs").status_code
        == 200
    )


def test_admin_validates_and_versions() -> None:
    user = get_user_model().objects.create_superuser("curator", "c@example.org", "pw-123456")
    client = Client()
    client.force_login(user)
    add = "/admin/retrieval/retrievalprofile/add/"
    inline = {
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
        "versions-MIN_NUM_FORMS": "0",
        "versions-MAX_NUM_FORMS": "1000",
    }
    refused = client.post(
        add,
        {"name": "bad", "description": "", "retrieval_query": REFUSED["create"], "enabled": "on", **inline},
    )
    assert refused.status_code == 200
    assert "write clauses are not allowed" in refused.content.decode()
    assert not RetrievalProfile.objects.filter(name="bad").exists()

    created = client.post(
        add,
        {
            "name": "plain",
            "description": "",
            "retrieval_query": "RETURN node.text AS text, score",
            "enabled": "on",
            **inline,
        },
    )
    assert created.status_code == 302, created.content.decode()[:2000]
    profile = RetrievalProfile.objects.get(name="plain")
    assert (profile.version, profile.columns, profile.updated_by) == (1, ["text", "score"], "curator")

    change = f"/admin/retrieval/retrievalprofile/{profile.pk}/change/"
    page = client.get(change)
    assert page.status_code == 200
    edited = client.post(
        change,
        {
            "description": "with index",
            "retrieval_query": "RETURN node.text AS text, score, node.index AS chunk_index",
            "enabled": "on",
            "versions-TOTAL_FORMS": "1",
            "versions-INITIAL_FORMS": "1",
            "versions-MIN_NUM_FORMS": "0",
            "versions-MAX_NUM_FORMS": "1000",
            "versions-0-id": str(profile.versions.get().pk),
            "versions-0-profile": str(profile.pk),
        },
    )
    assert edited.status_code == 302, edited.content.decode()[:3000]
    profile.refresh_from_db()
    assert (profile.version, profile.columns) == (2, ["text", "score", "chunk_index"])
    assert list(profile.versions.values_list("version", flat=True)) == [2, 1]
