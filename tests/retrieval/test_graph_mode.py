"""mode "graph": a personalized PageRank over the passage graph (chunks linked to the documents whose
titles they name), seeded with the titles the query names and hybrid's best chunks."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from knowledge.dto import DocumentInput
from knowledge.services import document_delete
from retrieval import passage_graph
from tests.conftest import Tenant, make_tenant
from tests.retrieval.helpers import ingest_now, search

pytestmark = pytest.mark.django_db


def _doc(title: str, text: str) -> DocumentInput:
    return DocumentInput(title=title, text=text, source_path=f"wiki/{title}.txt")


# A two-hop question: the film's page names its director; the director's page says where she was
# born. Other directors' pages match "director" and "born" better than the film's director does.
FILM = _doc(
    "Ember Harbor",
    "Ember Harbor is a 1998 drama film about a lighthouse keeper. It was directed by Marta Vell "
    "and shot on the northern coast.",
)
DIRECTOR = _doc("Marta Vell", "Marta Vell is a screenwriter and painter whose family came from Quillon.")
DISTRACTORS = [
    _doc(
        name,
        f"{name} was a film director born in {city}. As a director, {name} was born to make films "
        f"and directed dramas about the birthplace of cinema.",
    )
    for name, city in [
        ("Oskar Lind", "Malmo"),
        ("Ines Duarte", "Porto"),
        ("Pavel Horak", "Brno"),
        ("Lena Vogt", "Kassel"),
        ("Tomas Rey", "Cadiz"),
        ("Aino Salo", "Turku"),
    ]
]
QUESTION = "Where was the director of the film Ember Harbor born?"


@pytest.fixture
def films() -> tuple[Tenant, dict[str, str]]:
    tenant = make_tenant("graph mode")
    docs = [FILM, DIRECTOR, *DISTRACTORS]
    ids = ingest_now(tenant.project.id, docs)
    return tenant, {d.title: i for d, i in zip(docs, ids, strict=True)}


def _ranked(tenant: Tenant, mode: str, query: str = QUESTION, **body: object) -> list[str]:
    response = search(tenant.client(tenant.read_key), tenant.project.id, query=query, mode=mode, **body)
    assert response.status_code == 200, response.json()
    return [i["document_id"] for i in response.json()["items"]]


def test_graph_mode_walks_from_the_named_film_to_its_director(films) -> None:  # type: ignore[no-untyped-def]
    tenant, ids = films
    hybrid = _ranked(tenant, "hybrid", top_k=10)
    graph = _ranked(tenant, "graph", top_k=10)
    assert graph[:2] == [ids["Ember Harbor"], ids["Marta Vell"]]
    assert hybrid.index(ids["Marta Vell"]) > 1  # what the walk adds: hybrid alone ranks it lower
    assert sorted(graph) == sorted(set(graph))


def test_the_debug_block_shows_linked_titles_seeds_and_the_graph(films) -> None:  # type: ignore[no-untyped-def]
    tenant, ids = films
    client = tenant.client(tenant.read_key)
    body = search(client, tenant.project.id, query=QUESTION, mode="graph", debug=True).json()
    debug = body["debug"]
    assert debug["linked"] == [
        {"name": "Ember Harbor", "documents": [{"id": ids["Ember Harbor"], "title": "Ember Harbor"}]}
    ]
    assert debug["graph"]["chunks"] == 8 and debug["graph"]["links"] == 1
    seeds = {s["chunk_id"]: s for s in debug["seeds"]}
    film_chunk = body["items"][0]["chunk_id"]
    assert seeds[film_chunk]["from"] == "title" and seeds[film_chunk]["weight"] > 1.0
    assert {s["from"] for s in debug["seeds"]} == {"title", "hybrid"}
    assert {"graph_load", "hybrid", "pagerank"} <= set(body["timings_ms"])
    assert "fallback" not in body
    # asked again, the graph comes from the cache; without `debug` there is no block
    assert search(client, tenant.project.id, query=QUESTION, mode="graph", debug=True).json()["debug"][
        "graph"
    ]["cached"]
    assert "debug" not in search(client, tenant.project.id, query=QUESTION, mode="graph").json()


def test_the_graph_follows_ingestion_and_deletion(films) -> None:  # type: ignore[no-untyped-def]
    tenant, ids = films
    client = tenant.client(tenant.read_key)
    first = search(client, tenant.project.id, query=QUESTION, mode="graph", debug=True).json()["debug"][
        "graph"
    ]
    document_delete(project_id=tenant.project.id, document_id=ids["Marta Vell"])
    after_delete = search(
        client, tenant.project.id, query=QUESTION, mode="graph", top_k=20, debug=True
    ).json()
    assert after_delete["debug"]["graph"]["cached"] is False
    assert after_delete["debug"]["graph"]["version"] > first["version"]
    assert after_delete["debug"]["graph"]["chunks"] == first["chunks"] - 1
    assert ids["Marta Vell"] not in {i["document_id"] for i in after_delete["items"]}
    # a new page for the director, ingested later, is linked from the film's stored chunk
    (new_id,) = ingest_now(tenant.project.id, [_doc("Marta Vell", "Marta Vell grew up in Quillon.")])
    assert _ranked(tenant, "graph")[:2] == [ids["Ember Harbor"], new_id]


def test_a_project_without_title_links_is_ranked_by_hybrid_and_says_so() -> None:
    tenant = make_tenant("no links")
    ingest_now(tenant.project.id, DISTRACTORS)
    client = tenant.client(tenant.read_key)
    graph = search(client, tenant.project.id, query="director born in Porto", mode="graph").json()
    hybrid = search(client, tenant.project.id, query="director born in Porto", mode="hybrid").json()
    assert graph["mode"] == "graph"
    assert graph["fallback"]["mode"] == "hybrid" and "title" in graph["fallback"]["reason"]
    assert [i["chunk_id"] for i in graph["items"]] == [i["chunk_id"] for i in hybrid["items"]]
    assert "fallback" not in hybrid
    # an empty project: nothing to rank, no error
    empty = make_tenant("empty graph")
    body = search(empty.client(empty.read_key), empty.project.id, query="anything", mode="graph").json()
    assert body["items"] == [] and body["fallback"]["mode"] == "hybrid"


def test_a_hub_named_by_half_the_chunks_does_not_rise_to_the_top() -> None:
    """Ten river pages name the map maker "Northwind Atlas"; a question about rivers seeds them all.
    The hub's page says nothing about rivers: the walk must not lift it above them."""
    tenant = make_tenant("hub")
    rivers = [
        _doc(
            f"River {name}",
            f"The River {name} flows past the old mill town of {town} and was surveyed by Northwind Atlas.",
        )
        for name, town in [
            ("Arden", "Kell"),
            ("Brume", "Sorrow"),
            ("Cald", "Penmoor"),
            ("Dunmere", "Ashby"),
            ("Esk", "Tollen"),
            ("Fennow", "Harth"),
            ("Gael", "Wick"),
            ("Holm", "Brae"),
            ("Ise", "Carran"),
            ("Jura", "Dunn"),
        ]
    ]
    hub = _doc("Northwind Atlas", "Northwind Atlas is a company that sells printed maps and globes.")
    others = [_doc(f"Recipe {n}", f"Recipe {n} needs flour, butter and {n} eggs.") for n in range(9)]
    ids = ingest_now(tenant.project.id, [*rivers, hub, *others])
    hub_id = ids[len(rivers)]
    ranked = _ranked(tenant, "graph", query="Which river flows past an old mill town?", top_k=20)
    assert hub_id in ranked  # reached by the walk ...
    assert ranked.index(hub_id) >= len(rivers)  # ... and ranked below every river page


# The question names the cricketer; what it asks for is the record whose page names him. His own page
# names nothing, so only the walk back along the record's link reaches it. The bowlers' pages share
# the question's other words and his name's words, so hybrid ranks them above the record.
CRICKETER = _doc("Rook Allen", "Rook Allen is a cricketer from Pellham who bowls left-arm spin.")
RECORD = _doc("Night Orchard", "Night Orchard is a 2009 set of demo songs, partly made by Rook Allen.")
BOWLERS = [
    _doc(
        f"{name} (cricketer)",
        f"{name} is a cricketer from Pellham. {name} bowled with Allen Stone and Rook Marsh and "
        f"made a record number of wickets as a cricketer who helped Pellham.",
    )
    for name in ("Ned Ashe", "Tam Birch", "Ori Cole", "Lev Dorn", "Kit Eames", "Sol Frith")
]
BACKWARD_QUESTION = "What record did the cricketer Rook Allen help make?"


@pytest.mark.parametrize("backward", [0.5, 0.0])
def test_the_walk_goes_back_from_a_named_page_to_the_page_that_names_it(settings, backward) -> None:  # type: ignore[no-untyped-def]
    settings.RETRIEVAL_GRAPH_BACKWARD_WEIGHT = backward
    passage_graph.forget_graphs()  # the weight is read when a graph is built
    tenant = make_tenant("backward")
    docs = [CRICKETER, RECORD, *BOWLERS]
    ids = dict(zip((d.title for d in docs), ingest_now(tenant.project.id, docs), strict=True))
    hybrid = _ranked(tenant, "hybrid", query=BACKWARD_QUESTION, top_k=10)
    graph = _ranked(tenant, "graph", query=BACKWARD_QUESTION, top_k=10)
    passage_graph.forget_graphs()
    assert hybrid.index(ids["Night Orchard"]) > 1
    assert graph[0] == ids["Rook Allen"]
    if backward:
        assert graph[1] == ids["Night Orchard"]
    else:  # without the walk back the record stays where hybrid put it
        assert graph.index(ids["Night Orchard"]) > 1


def test_titles_that_are_common_words_link_nothing_in_a_query() -> None:
    tenant = make_tenant("common words")
    ingest_now(
        tenant.project.id,
        [
            _doc("It", "It is a horror novel by Stephen King about a clown."),
            _doc("Green", "Green is a colour between yellow and blue."),
            _doc("Stephen King", "Stephen King is an American author of horror fiction such as It."),
        ],
    )
    client = tenant.client(tenant.read_key)
    body = search(
        client, tenant.project.id, query="it rained on the green hills", mode="graph", debug=True
    ).json()
    assert body["debug"]["linked"] == []
    named = search(client, tenant.project.id, query="Who wrote It?", mode="graph", debug=True).json()
    assert [entry["name"] for entry in named["debug"]["linked"]] == ["It"]


def test_graph_mode_never_links_or_returns_another_projects_documents(films) -> None:  # type: ignore[no-untyped-def]
    tenant, ids = films
    other = make_tenant("other films")
    (other_id,) = ingest_now(
        other.project.id, [_doc("Ember Harbor", "Ember Harbor was directed by Marta Vell, born in Quillon.")]
    )
    body = search(
        tenant.client(tenant.read_key), tenant.project.id, query=QUESTION, mode="graph", top_k=50, debug=True
    ).json()
    assert {d["id"] for entry in body["debug"]["linked"] for d in entry["documents"]} == {ids["Ember Harbor"]}
    assert {i["document_id"] for i in body["items"]} <= set(ids.values())
    # and the other project's key cannot search this project at all
    response = search(other.client(other.read_key), tenant.project.id, query=QUESTION, mode="graph")
    assert response.status_code in (403, 404)
    assert other_id not in response.text


def test_a_document_filter_keeps_the_walk_inside_it(films) -> None:  # type: ignore[no-untyped-def]
    tenant, ids = films
    allowed = [ids["Marta Vell"], ids["Oskar Lind"]]
    ranked = _ranked(tenant, "graph", filters={"document_ids": allowed}, top_k=10)
    assert set(ranked) <= set(allowed) and ids["Marta Vell"] in ranked


@pytest.mark.django_db(transaction=True)
@pytest.mark.usefixtures("unconsumed_ingest_queue")  # ingested here, not by a worker
def test_graph_searches_while_the_project_changes_give_whole_answers() -> None:
    """Documents naming the film come and go while graph searches run: every answer is a 200 with
    distinct chunks of documents of the project, in score order."""
    tenant = make_tenant("graph churn")
    pid = tenant.project.id
    ingest_now(pid, [FILM, DIRECTOR, *DISTRACTORS])
    done, errors = threading.Event(), []

    def churn() -> None:
        try:
            for n in range(5):
                (new,) = ingest_now(
                    pid, [_doc(f"Review {n}", f"Review {n} of Ember Harbor praises Marta Vell.")]
                )
                document_delete(project_id=pid, document_id=new)
        except BaseException as exc:  # noqa: BLE001 (asserted on below)
            errors.append(exc)
        finally:
            connection.close()
            done.set()

    worker = threading.Thread(target=churn)
    worker.start()
    client, answers = tenant.client(tenant.read_key), 0
    while not done.is_set() or answers < 3:
        response = search(client, pid, query=QUESTION, mode="graph", top_k=5)
        assert response.status_code == 200, response.content[:300]
        items = response.json()["items"]
        assert len({i["chunk_id"] for i in items}) == len(items) >= 1
        assert [i["score"] for i in items] == sorted((i["score"] for i in items), reverse=True)
        answers += 1
    worker.join()
    assert errors == []
    final = search(client, pid, query=QUESTION, mode="graph", top_k=20).json()["items"]
    assert not any(i["document_name"].startswith("Review") for i in final)
