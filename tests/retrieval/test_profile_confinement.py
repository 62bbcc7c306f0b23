"""Enrichment profiles stay inside the searching project (issue 28, finding 6).

Tenant B holds a private memory and a private document; tenant A searches with its read key through
a profile that tries to reach them. Every attempt is refused when it is saved (service and admin)
and, put into the table directly, refused at run time without a byte of B's text in the answer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from core import graph
from core.errors import InvalidInput
from knowledge.dto import DocumentInput
from retrieval import profiles
from retrieval.models import RetrievalProfile, RetrievalProfileVersion
from retrieval.services import profile_save
from tests.conftest import Tenant, make_tenant
from tests.memory.helpers import store, user
from tests.retrieval.corpus import DOCS
from tests.retrieval.helpers import ingest_now, search

pytestmark = pytest.mark.django_db

MEMORY_MARK = "zebra-7741"
DOCUMENT_MARK = "okapi-5512"
SECRET_MEMORY = f"My bank PIN is 9931, {MEMORY_MARK}, keep it private"
SECRET_TITLE = f"Merger plan {DOCUMENT_MARK}"
SECRET_DOCUMENT = f"Confidential: the merger with Initech closes in March, code name {DOCUMENT_MARK}."
# what a profile returns when it learnt something about B without returning B's text
LEAK_FLAG = "LEAKED"
FIND_MEMORY = f"m.text CONTAINS '{MEMORY_MARK}'"

ESCAPES: dict[str, str] = {
    "match another label": f"MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN m.text AS text, score",
    "match any node": f"MATCH (m) WHERE {FIND_MEMORY} RETURN m.text AS text, score",
    "optional match": (
        f"OPTIONAL MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN coalesce(m.text, node.text) AS text, score"
    ),
    "call subquery": f"CALL {{ MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN m.text AS t }} RETURN t AS text, score",
    "call subquery importing node": (
        f"CALL {{ WITH node MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN m.text AS t }} RETURN t AS text, score"
    ),
    "scoped call subquery": (
        f"CALL () {{ MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN m.text AS t }} RETURN t AS text, score"
    ),
    "scoped call with star": (
        f"CALL (*) {{ MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN m.text AS t }} RETURN t AS text, score"
    ),
    "scoped call redeclaring node": (
        f"CALL () {{ MATCH (node:Memory) WHERE node.text CONTAINS '{MEMORY_MARK}' RETURN node.text AS t }} "
        "RETURN t AS text, score"
    ),
    "pattern comprehension": (
        f"RETURN [(d:Document)-[:HAS_CHUNK]->(c:Chunk) WHERE c.text CONTAINS '{DOCUMENT_MARK}' | c.text][0] "
        "AS text, score"
    ),
    "pattern comprehension of one node": (
        f"RETURN [(m:Memory) WHERE {FIND_MEMORY} | m.text][0] AS text, score"
    ),
    "exists subquery": (
        f"RETURN CASE WHEN EXISTS {{ MATCH (m:Memory) WHERE {FIND_MEMORY} }} THEN '{LEAK_FLAG}' "
        "ELSE node.text END AS text, score"
    ),
    "exists pattern": (
        f"RETURN CASE WHEN EXISTS {{ (m:Memory) WHERE {FIND_MEMORY} }} THEN '{LEAK_FLAG}' "
        "ELSE node.text END AS text, score"
    ),
    "count subquery": (
        f"RETURN CASE WHEN COUNT {{ (m:Memory) WHERE {FIND_MEMORY} }} > 0 THEN '{LEAK_FLAG}' "
        "ELSE node.text END AS text, score"
    ),
    "collect subquery": f"RETURN COLLECT {{ MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN m.text }}[0] AS text, score",
    # the planner keeps this subquery inside the expression: it is not an operator of the plan
    "collect subquery inside CASE": (
        f"RETURN CASE WHEN score > -1 THEN COLLECT {{ MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN m.text }}[0] "
        "END AS text, score"
    ),
    "pattern predicate": (
        f"RETURN CASE WHEN (:Document {{title: '{SECRET_TITLE}'}})-[:HAS_CHUNK]->() THEN '{LEAK_FLAG}' "
        "ELSE node.text END AS text, score"
    ),
    "backticked label": f"MATCH (m:`Memory`) WHERE m.`text` CONTAINS '{MEMORY_MARK}' RETURN m.`text` AS text, score",
    "backticked keyword as variable": (
        f"MATCH (`MATCH`:`Memory`) WHERE `MATCH`.text CONTAINS '{MEMORY_MARK}' RETURN `MATCH`.text AS `text`, `score`"
    ),
    "backticked node": (
        f"CALL () {{ MATCH (`node`:Memory) WHERE `node`.text CONTAINS '{MEMORY_MARK}' RETURN `node`.text AS t }} "
        "RETURN t AS text, score"
    ),
    "comments around the pattern": (
        f"MATCH /* (node)-[:HAS_CHUNK]- */ (m:Memory) // (node)--(m)\nWHERE {FIND_MEMORY} RETURN m.text AS text, score"
    ),
    "predicate inside a string": (
        f"MATCH (m:Memory) WHERE {FIND_MEMORY} AND m.text <> 'm.project_id = $project_id' "
        "RETURN m.text AS text, score"
    ),
    "escaped quote hides a pattern": (
        f"MATCH (m:Memory) WHERE {FIND_MEMORY} AND 'a\\' MATCH (node)--(m) //' <> '' RETURN m.text AS text, score"
    ),
    "not my project": (
        f"MATCH (m:Memory) WHERE m.project_id <> $project_id AND {FIND_MEMORY} RETURN m.text AS text, score"
    ),
    "my project or true": (
        f"MATCH (m:Memory) WHERE (m.project_id = $project_id OR true) AND {FIND_MEMORY} RETURN m.text AS text, score"
    ),
    "my project or anything": (
        f"MATCH (m:Memory) WHERE m.project_id = $project_id OR {FIND_MEMORY} RETURN m.text AS text, score"
    ),
    "not my project, negated": (
        f"MATCH (m:Memory) WHERE NOT m.project_id = $project_id AND {FIND_MEMORY} RETURN m.text AS text, score"
    ),
    "node rebound to another project": (
        "WITH {{project_id: '{other}'}} AS node, score MATCH (m:Memory) WHERE m.project_id = node.project_id "
        "RETURN m.text AS text, score"
    ),
    "traversal from node, then an unanchored match": (
        f"MATCH (node)<-[:HAS_CHUNK]-(d:Document) MATCH (m:Memory) WHERE {FIND_MEMORY} "
        "RETURN m.text + ' in ' + d.title AS text, score"
    ),
    "traversal from node, then a second pattern": (
        f"MATCH (node)<-[:HAS_CHUNK]-(d:Document), (m:Memory) WHERE {FIND_MEMORY} RETURN m.text AS text, score"
    ),
    "traversal after dropping node": (
        f"WITH score MATCH (node)-->(m:Memory) WHERE {FIND_MEMORY} RETURN m.text AS text, score"
    ),
    "quantified path": (
        f"MATCH p = ((d:Document)-[:HAS_CHUNK]->(c:Chunk WHERE c.text CONTAINS '{DOCUMENT_MARK}')){{1,1}} "
        "RETURN nodes(p)[1].text AS text, score"
    ),
    "union": (
        f"RETURN node.text AS text, score UNION MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN m.text AS text, "
        "1.0 AS score"
    ),
    "fulltext index": (
        f"CALL db.index.fulltext.queryNodes('memory_fulltext', '{MEMORY_MARK}') YIELD node AS m "
        "RETURN m.text AS text, score"
    ),
    "backticked fulltext index": (
        f"CALL `db`.`index`.`fulltext`.`queryNodes`('memory_fulltext', '{MEMORY_MARK}') YIELD node AS m "
        "RETURN m.text AS text, score"
    ),
    "vector index": (
        "CALL db.index.vector.queryNodes('memory_embeddings', 10000, node.embedding) YIELD node AS m "
        f"WITH m, score WHERE m.text CONTAINS '{MEMORY_MARK}' RETURN m.text AS text, score"
    ),
    "element id seek": "MATCH (m) WHERE elementId(m) = '{element_id}' RETURN m.text AS text, score",
    "unicode dashes": (
        f"MATCH (node)\u2212\u2212(x), (m:Memory) WHERE {FIND_MEMORY} RETURN m.text AS text, score"
    ),
    "breaking out of the wrapper": (
        "RETURN node.text AS t0 } WITH __node, __doc, __score "
        f"CALL () {{ MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN m.text AS text, 1.0 AS score }} "
        "CALL (__node) { RETURN 1 AS unused"
    ),
}


@dataclass
class World:
    a: Tenant
    b: Tenant
    memory_element_id: str

    def body(self, name: str) -> str:
        return (
            ESCAPES[name]
            .replace("{element_id}", self.memory_element_id)
            .replace("{{project_id: '{other}'}}", "{project_id: '" + self.b.project.id + "'}")
        )


@pytest.fixture
def world(settings) -> World:  # type: ignore[no-untyped-def]
    # as if an operator had allow-listed the index procedures: they must stay refused
    settings.RETRIEVAL_PROFILE_PROCEDURES = ["db.index.fulltext.queryNodes", "db.index.vector.queryNodes"]
    a, b = make_tenant("tenant A"), make_tenant("tenant B")
    ingest_now(a.project.id, DOCS[:2])
    ingest_now(b.project.id, [DocumentInput(title=SECRET_TITLE, text=SECRET_DOCUMENT, source_path="b.md")])
    stored = store(b.client(b.write_key), b.project.id, [user(SECRET_MEMORY)], user_id="bob")
    assert stored.status_code == 201, stored.content[:300]
    rows = graph.read(
        "MATCH (m:Memory {project_id: $p}) WHERE m.text CONTAINS $mark RETURN elementId(m) AS id",
        p=b.project.id,
        mark=MEMORY_MARK,
    )
    assert len(rows) == 1
    return World(a=a, b=b, memory_element_id=rows[0]["id"])


def _leaks(response: Any) -> bool:
    """B's text anywhere in the answer (a refusal may quote the profile, never B's data), or what a
    profile learnt about B in an item."""
    content = response.content.decode()
    # only in B's memory and document ("9931" alone also turns up inside a score or a timing)
    if any(s in content for s in ("PIN is 9931", "Initech")):
        return True
    if response.status_code != 200:
        return False
    items = json.dumps(response.json()["items"])
    return any(s in items for s in (MEMORY_MARK, DOCUMENT_MARK, LEAK_FLAG))


@pytest.mark.parametrize("name", sorted(ESCAPES))
def test_escape_is_refused_on_save(world: World, name: str) -> None:
    before = RetrievalProfile.objects.count()
    with pytest.raises(InvalidInput) as caught:
        profile_save(name="escape", retrieval_query=world.body(name))
    assert caught.value.message.startswith("retrieval_query"), caught.value.message
    assert RetrievalProfile.objects.count() == before
    assert not RetrievalProfileVersion.objects.filter(profile__name="escape").exists()


def test_a_stored_escape_leaks_nothing_at_run_time(world: World) -> None:
    """Rows put into the table without validation: every one is refused when a search uses it, and
    no answer carries B's text. (Before the fix, most of them returned B's memory.)"""
    client = world.a.client(world.a.read_key)
    leaked, answered = [], []
    for n, name in enumerate(sorted(ESCAPES)):
        RetrievalProfile.objects.create(
            name=f"tampered-{n}", retrieval_query=world.body(name), columns=["text", "score"]
        )
        response = search(client, world.a.project.id, query="Analytical Engine", profile=f"tampered-{n}")
        if _leaks(response):
            leaked.append(name)
        if response.status_code != 422:
            answered.append(f"{name}: {response.status_code}")
        else:
            assert response.json()["error"]["code"] == "profile_failed"
    assert leaked == [], f"B's data reached A through: {leaked}"
    assert answered == [], f"not refused at run time: {answered}"


def test_admin_refuses_escapes() -> None:
    user_ = get_user_model().objects.create_superuser("curator", "c@example.org", "pw-123456")
    client = Client()
    client.force_login(user_)
    inline = {
        "versions-TOTAL_FORMS": "0",
        "versions-INITIAL_FORMS": "0",
        "versions-MIN_NUM_FORMS": "0",
        "versions-MAX_NUM_FORMS": "1000",
    }
    for name in ("match another label", "backticked label", "pattern comprehension", "scoped call subquery"):
        page = client.post(
            "/admin/retrieval/retrievalprofile/add/",
            {
                "name": "escape",
                "description": "",
                "retrieval_query": ESCAPES[name],
                "enabled": "on",
                **inline,
            },
        )
        assert page.status_code == 200, name
        assert "not tied to the project" in page.content.decode(), name
        assert not RetrievalProfile.objects.filter(name="escape").exists()


LEGIT = {
    # seed 000's pattern: traversal from node
    "traversal": (
        "MATCH (node)<-[:HAS_CHUNK]-(doc:Document) "
        "RETURN node.text AS text, score, doc.title AS title ORDER BY score DESC"
    ),
    # the documented example: a lookup by id, tied to the project by node.project_id
    "documented lookup": (
        "MATCH (doc:Document {id: node.document_id}) WHERE doc.project_id = node.project_id "
        "RETURN node.text AS text, score, doc.title AS title ORDER BY score DESC"
    ),
    "project filter": (
        "MATCH (d:Document) WHERE d.project_id = $project_id AND d.title IS NOT NULL "
        "WITH node, score, count(d) AS documents RETURN node.text AS text, score, documents"
    ),
    "project property": (
        "OPTIONAL MATCH (m:Memory {project_id: $project_id}) "
        "WITH node, score, count(m) AS memories RETURN node.text AS text, score, memories"
    ),
    "pattern comprehension": (
        "RETURN node.text AS text, score, [(node)-[:HAS_ENTITY]->(e:Entity) | e.name] AS names"
    ),
    "count and exists": (
        "WITH node, score WHERE EXISTS { (node)<-[:HAS_CHUNK]-(:Document) } "
        "RETURN node.text AS text, score, COUNT { (node)-[:HAS_ENTITY]->() } AS entity_count"
    ),
    "collect inside CASE": (
        "RETURN node.text AS text, score, CASE WHEN score > -1 THEN "
        "COLLECT { MATCH (node)<-[:HAS_CHUNK]-(d:Document) RETURN d.title } END AS titles"
    ),
    "scoped call": (
        "CALL (node) { MATCH (node)<-[:HAS_CHUNK]-(d:Document) RETURN d.title AS title } "
        "RETURN node.text AS text, score, title"
    ),
}


def test_legitimate_profiles_keep_working_and_stay_in_the_project(world: World) -> None:
    client = world.a.client(world.a.read_key)
    titles = {d.title for d in DOCS[:2]}
    for n, body in enumerate(LEGIT.values()):
        profile_save(name=f"legit-{n}", retrieval_query=body)
    for profile in RetrievalProfile.objects.filter(name__startswith="legit-"):
        response = search(client, world.a.project.id, query="Analytical Engine", profile=profile.name)
        assert response.status_code == 200, (profile.retrieval_query, response.content[:500])
        items = response.json()["items"]
        assert items, profile.retrieval_query
        assert not _leaks(response), profile.retrieval_query
        for item in items:
            if "title" in item["metadata"]:
                assert item["metadata"]["title"] in titles
            if "documents" in item["metadata"]:
                assert item["metadata"]["documents"] == 2
            if "memories" in item["metadata"]:
                assert item["metadata"]["memories"] == 0  # B's memory is not counted
            if "titles" in item["metadata"]:
                assert set(item["metadata"]["titles"]) <= titles


def test_an_edge_into_another_project_is_not_followed(world: World) -> None:
    """Barrier 3: even a traversal from `node` cannot step into another project, should an edge
    between projects ever exist."""
    graph.write(
        "MATCH (c:Chunk {project_id: $a}), (d:Chunk {project_id: $b}) "
        "CREATE (c)-[:NEXT_CHUNK]->(d), (c)-[:HAS_ENTITY]->(:Entity {id: randomUUID(), project_id: $b, "
        "name: $name})",
        a=world.a.project.id,
        b=world.b.project.id,
        name=f"Entity {DOCUMENT_MARK}",
    )
    profile_save(
        name="neighbours",
        retrieval_query=(
            "OPTIONAL MATCH (node)-[:NEXT_CHUNK]->(next:Chunk) "
            "RETURN node.text + coalesce(' / ' + next.text, '') AS text, score, "
            "[(node)-[:HAS_ENTITY]->(e) | e.name] AS entities"
        ),
    )
    response = search(
        world.a.client(world.a.read_key), world.a.project.id, query="Analytical Engine", profile="neighbours"
    )
    assert response.status_code == 200, response.content[:500]
    assert response.json()["items"]
    assert not _leaks(response)
    # the builtin profiles, too
    for name in ("document_context", "entity_neighbourhood"):
        response = search(world.a.client(world.a.read_key), world.a.project.id, query="Engine", profile=name)
        assert response.status_code == 200
        assert not _leaks(response), name


@pytest.mark.parametrize(
    "body",
    [
        f"MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN m.text AS text, score",
        f"MATCH (m:Memory) WHERE m.project_id = $project_id OR {FIND_MEMORY} RETURN m.text AS text, score",
        "MATCH (m) WHERE elementId(m) = '4:x:1' RETURN m.text AS text, score",
        "MATCH ()-[r:PART_OF]->() RETURN r.note AS text, score",
        "RETURN COUNT { (m:Memory) } AS text, score",
        f"RETURN CASE WHEN score > -1 THEN COLLECT {{ MATCH (m:Memory) WHERE {FIND_MEMORY} RETURN m.text }}[0] "
        "END AS text, score",
        "WITH node, score WHERE (:Memory)-->() RETURN node.text AS text, score",
        "CALL db.index.fulltext.queryNodes('memory_fulltext', 'x') YIELD node AS m RETURN m.text AS text, score",
    ],
)
def test_the_plan_check_catches_what_the_parser_might_miss(body: str) -> None:
    """Barrier 4 on bodies that were not rewritten (as if the parser had missed their patterns)."""
    with pytest.raises(profiles.ProfileFailed) as caught:
        profiles.plan_check(profiles.wrap(body, ["text", "score"]))
    assert "project" in caught.value.message or "allow-list" in caught.value.message, caught.value.message


def test_every_node_pattern_is_rewritten_with_the_project_filter() -> None:
    body = profiles.confine(
        "MATCH (node)-[:HAS_ENTITY]->(:Entity)-[:RELATED]-(o) WHERE o.name <> '' "
        "RETURN node.text AS text, score, [(o)<-[:HAS_ENTITY]-(c) WHERE c.index > 0 OR true | c.index] AS i"
    )
    assert body.count("project_id = $project_id") == 5
    assert "( __pv1 : Entity WHERE __pv1.project_id = $project_id )" in body
    assert "( c WHERE c.project_id = $project_id )" in body
    # an inline WHERE keeps its own meaning: (old) AND filter
    assert "( c WHERE ( c . index > 0 OR true ) AND c.project_id = $project_id )" in profiles.confine(
        "RETURN node.text AS text, score, [(node)-[:NEXT_CHUNK]->(c WHERE c.index > 0 OR true) | c.index] AS i"
    )
    with pytest.raises(InvalidInput):
        profiles.confine("MATCH (m:Memory) RETURN m.text AS text, score")
