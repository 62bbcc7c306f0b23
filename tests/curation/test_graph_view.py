"""The admin's graph view on the real stack: a node's neighbours in groups (relationship, direction,
label) and named walks, one keyset page at a time; a project's community hierarchy; never a node of
another project, even over a relationship that crosses projects; bad input answered as JSON errors."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.staticfiles import finders
from django.test import Client

from core import graph
from tests.conftest import Tenant
from tests.curation.helpers import tides_and_ferry
from tests.curation.test_admin import _staff

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("clean_graph")]


def _neighbours(client: Client, label: str, node_id: str, **query: str) -> Any:
    return client.get(f"/admin/curation/graphcontent/graph/{label}/{node_id}/neighbours/", query)


def _groups(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {g["key"]: g for g in body["groups"]}


def _ids(group: dict[str, Any]) -> list[str]:
    return [n["id"] for n in group["nodes"]]


def _curator() -> Client:
    return _staff("curator", "curation.browse_graph")


def _hub(project_id: str, n: int) -> str:
    """An entity named by `n` chunks of one document (a hub), written directly: the view only reads."""
    graph.write(
        """
        CREATE (d:Document {id: $p + '-hub-doc', project_id: $p, title: 'Hub source', status: 'ready'})
        CREATE (e:Entity {id: $p + '-hub', project_id: $p, name: 'Lisbon', type: 'PLACE'})
        WITH d, e UNWIND range(1, $n) AS i
        CREATE (c:Chunk {id: $p + '-c' + right('00000' + toString(i), 5), project_id: $p,
                         document_id: d.id, index: i, text: 'Lisbon chunk ' + toString(i)})
        CREATE (d)-[:HAS_CHUNK]->(c)-[:HAS_ENTITY]->(e)
        """,
        p=project_id,
        n=n,
    )
    return f"{project_id}-hub"


def test_a_documents_graph_has_its_chunks_entities_and_the_conversations_that_used_it(
    tenant_a: Tenant,
) -> None:
    tides, ferry, stored = tides_and_ferry(tenant_a)
    curator = _curator()

    body = _neighbours(curator, "Document", tides).json()

    assert body["node"]["id"] == tides and body["node"]["caption"] == "Tide tables"
    assert body["node"]["kind"] == "documents" and "embedding" not in body["node"]["properties"]
    groups = _groups(body)
    chunks = graph.read_column(
        "MATCH (c:Chunk {document_id: $d}) RETURN c.id AS id ORDER BY id", "id", d=tides
    )
    assert _ids(groups["HAS_CHUNK>Chunk"]) == chunks and groups["HAS_CHUNK>Chunk"]["total"] == len(chunks)
    entities = graph.read_column(
        "MATCH (:Document {id: $d})-[:HAS_CHUNK]->()-[:HAS_ENTITY]->(e) RETURN DISTINCT e.id AS id ORDER BY id",
        "id",
        d=tides,
    )
    assert entities and _ids(groups["via:entities"]) == entities
    assert _ids(groups["via:conversations"]) == [stored["conversation_id"]]
    message = stored["stored"][0]["id"]
    assert _ids(groups["REFERENCES<Memory"]) == [message]
    assert groups["REFERENCES<Memory"]["outgoing"] is False

    # walking on: the conversation's messages, and from an entity back to both documents that name Porto
    conversation = _groups(_neighbours(curator, "Conversation", stored["conversation_id"]).json())
    assert sorted(_ids(conversation["PART_OF<Memory"])) == sorted(m["id"] for m in stored["stored"])
    shared = graph.read_column(
        "MATCH (:Document {id: $t})-[:HAS_CHUNK]->()-[:HAS_ENTITY]->(e)<-[:HAS_ENTITY]-()<-[:HAS_CHUNK]-"
        "(:Document {id: $f}) RETURN DISTINCT e.id AS id",
        "id",
        t=tides,
        f=ferry,
    )
    assert shared, "both documents name Porto"
    documents = _groups(_neighbours(curator, "Entity", shared[0]).json())["via:documents"]
    assert sorted(_ids(documents)) == sorted([tides, ferry])


def test_a_hub_arrives_one_page_at_a_time_in_id_order(tenant_a: Tenant, settings: Any) -> None:
    settings.GRAPH_VIEW_PAGE_SIZE = 50
    hub = _hub(tenant_a.project.id, 120)
    curator = _curator()

    first = _groups(_neighbours(curator, "Entity", hub).json())["HAS_ENTITY<Chunk"]
    assert first["total"] == 120 and len(first["nodes"]) == 50 and first["after"] == first["nodes"][-1]["id"]
    seen = _ids(first)
    after = first["after"]
    while after:
        body = _neighbours(curator, "Entity", hub, group="HAS_ENTITY<Chunk", after=after).json()
        assert [g["key"] for g in body["groups"]] == ["HAS_ENTITY<Chunk"]
        page = body["groups"][0]
        seen += _ids(page)
        after = page["after"]
    expected = graph.read_column(
        "MATCH (c:Chunk)-[:HAS_ENTITY]->(:Entity {id: $e}) RETURN c.id AS id ORDER BY id", "id", e=hub
    )
    assert seen == expected and len(set(seen)) == 120
    # the chunk's caption is its index, its long properties stay readable
    assert first["nodes"][0]["caption"].startswith("chunk ")


def test_a_relationship_into_another_project_is_never_followed(tenant_a: Tenant, tenant_b: Tenant) -> None:
    a, b = tenant_a.project.id, tenant_b.project.id
    hub = _hub(a, 3)
    _hub(b, 2)
    # a link across projects (a bug or a bad import elsewhere): the view must not walk it
    graph.write(
        "MATCH (e:Entity {id: $e}), (c:Chunk {project_id: $b}) CREATE (c)-[:HAS_ENTITY]->(e)", e=hub, b=b
    )
    curator = _curator()

    chunks = _groups(_neighbours(curator, "Entity", hub).json())["HAS_ENTITY<Chunk"]
    assert chunks["total"] == 3 and all(n["properties"]["project_id"] == a for n in chunks["nodes"])
    documents = _groups(_neighbours(curator, "Entity", hub).json())["via:documents"]
    assert _ids(documents) == [f"{a}-hub-doc"]
    root = _neighbours(curator, "Project", a).json()
    assert all(n["properties"]["project_id"] == a for g in root["groups"] for n in g["nodes"])


def test_a_projects_community_hierarchy_is_browsable_from_its_roots(tenant_a: Tenant) -> None:
    pid = tenant_a.project.id
    graph.write(
        """
        CREATE (top:Community {id: $p + '-top', project_id: $p, level: 1, title: 'Harbours'})
        CREATE (c1:Community {id: $p + '-c1', project_id: $p, level: 0, title: 'Porto harbour'})
        CREATE (c2:Community {id: $p + '-c2', project_id: $p, level: 0, title: 'Lisbon harbour'})
        CREATE (e:Entity {id: $p + '-e', project_id: $p, name: 'Porto', type: 'PLACE'})
        CREATE (c1)-[:IN_COMMUNITY]->(top), (c2)-[:IN_COMMUNITY]->(top), (e)-[:IN_COMMUNITY]->(c1)
        """,
        p=pid,
    )
    curator = _curator()

    root = _groups(_neighbours(curator, "Project", pid).json())
    assert _ids(root["top_communities"]) == [f"{pid}-top"] and root["top_communities"]["total"] == 1
    top = _groups(_neighbours(curator, "Community", f"{pid}-top").json())
    assert sorted(_ids(top["IN_COMMUNITY<Community"])) == [f"{pid}-c1", f"{pid}-c2"]
    child = _groups(_neighbours(curator, "Community", f"{pid}-c1").json())
    assert _ids(child["IN_COMMUNITY>Community"]) == [f"{pid}-top"]
    assert _ids(child["IN_COMMUNITY<Entity"]) == [f"{pid}-e"]


@pytest.mark.parametrize(
    ("label", "node_id", "query", "status", "code"),
    [
        ("Nope", "x", {}, 400, "invalid_input"),
        ("Entity", "x" * 201, {}, 400, "invalid_input"),
        ("Entity", "HUB", {"group": "HAS_ENTITY<Chunk; MATCH (n) DETACH DELETE n"}, 400, "invalid_input"),
        ("Entity", "HUB", {"group": "via:nowhere"}, 400, "invalid_input"),
        ("Entity", "HUB", {"group": "HAS_ENTITY<Chunk", "after": "x" * 201}, 400, "invalid_input"),
        ("Entity", "HUB", {"group": "RELATED>Entity"}, 404, "not_found"),
        ("Entity", "missing", {}, 404, "not_found"),
        ("Project", "00000000-0000-0000-0000-000000000000", {}, 404, "not_found"),
        ("Project", "PID", {"group": "entities"}, 400, "invalid_input"),
    ],
)
def test_bad_requests_are_json_errors_and_change_nothing(
    tenant_a: Tenant, label: str, node_id: str, query: dict[str, str], status: int, code: str
) -> None:
    hub = _hub(tenant_a.project.id, 3)
    node_id = node_id.replace("HUB", hub).replace("PID", tenant_a.project.id)
    before = graph.read("MATCH (n) RETURN count(n) AS n")[0]["n"]

    response = _neighbours(_curator(), label, node_id, **query)

    assert response.status_code == status and response.json()["error"]["code"] == code
    assert graph.read("MATCH (n) RETURN count(n) AS n")[0]["n"] == before


def test_the_graph_view_needs_its_permission_and_is_linked_from_detail_pages(tenant_a: Tenant) -> None:
    hub = _hub(tenant_a.project.id, 2)
    assert _neighbours(_staff("clerk"), "Entity", hub).status_code == 403
    assert _neighbours(Client(), "Entity", hub).status_code == 302  # to the login page
    curator = _curator()

    detail = curator.get(f"/admin/curation/graphcontent/entities/{hub}/").content.decode()
    page_url = f"/admin/curation/graphcontent/graph/Entity/{hub}/"
    assert f'href="{page_url}"' in detail
    page = curator.get(page_url)
    html = page.content.decode()
    assert page.status_code == 200 and 'id="graph-root"' in html
    assert "curation/vendor/cytoscape-3.34.4.min.js" in html and "curation/graph_view.js" in html
    assert page.context["root"]["node"]["caption"] == "Lisbon"
    assert finders.find("curation/vendor/cytoscape-3.34.4.min.js"), "run `make deps` to fetch it"
    dashboard = curator.get(f"/admin/core/project/{tenant_a.project.id}/dashboard/").content.decode()
    assert f'href="/admin/curation/graphcontent/graph/Project/{tenant_a.project.id}/"' in dashboard
    assert curator.get("/admin/curation/graphcontent/graph/Nope/x/").status_code == 400


def test_a_messages_vectors_are_never_shown(tenant_a: Tenant) -> None:
    """A message of several sentences carries its sentences' vectors (memory.vectors): neither they
    nor its embedding appear in the graph view or on its detail page."""
    from tests.memory.helpers import store, user

    pid = tenant_a.project.id
    body = store(
        tenant_a.client(tenant_a.write_key),
        pid,
        [
            user(
                "The crane arrived on Monday. It lifts forty tonnes of steel. The harbour master signed for it."
            )
        ],
        user_id="ana",
    ).json()
    memory_id = body["stored"][0]["id"]
    held = graph.read(
        "MATCH (m:Memory {id: $id}) RETURN size(m.sentence_embeddings) AS n, m.embedding IS NOT NULL AS e",
        id=memory_id,
    )[0]
    assert held == {"n": 3 * 384, "e": True}
    curator = _curator()
    node = _neighbours(curator, "Memory", memory_id).json()["node"]
    assert node["id"] == memory_id
    assert not {"embedding", "sentence_embeddings"} & set(node["properties"])
    page = curator.get(f"/admin/curation/graphcontent/memories/{memory_id}/")
    assert page.status_code == 200
    assert b"The crane arrived" in page.content
    assert b"sentence_embeddings" not in page.content and b"embedding" not in page.content
