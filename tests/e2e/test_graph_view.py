"""The admin's graph view in headless Chromium against the real ASGI server, Neo4j and Redis: a curator
finds a document, opens its graph, walks to its entities and to the conversation that used it with the
mouse; a hub with 10,000 neighbours arrives a page at a time and stays responsive; a project's
community hierarchy opens from its dashboard.

With GRAPH_VIEW_SCREENSHOTS=<dir> the test also saves the pictures shown in docs/curation.md."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from core import graph
from tests.conftest import make_tenant
from tests.curation.helpers import tides_and_ferry
from tests.e2e.browser import admin_page

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.django_db(transaction=True),
]

HUB_SIZE = 10_000


@pytest.fixture
def walked() -> Iterator[dict[str, Any]]:
    """Two documents, a conversation that referenced one of them, a hub entity named by 10,000 chunks, a
    two-level community hierarchy (in a second project) and a curator. Prepared before the browser starts (Playwright's sync
    API runs an event loop, inside which Django refuses ORM calls)."""
    tenant = make_tenant("graph-view")
    pid = tenant.project.id
    tides, _ferry, stored = tides_and_ferry(tenant)
    graph.write(
        """
        CREATE (e:Entity {id: $p + '-hub', project_id: $p, name: 'Atlantic', type: 'PLACE'})
        WITH e UNWIND range(1, $n) AS i
        CREATE (:Chunk {id: $p + '-c' + right('0000' + toString(i), 5), project_id: $p, index: i,
                        text: 'Atlantic chunk ' + toString(i)})-[:HAS_ENTITY]->(e)
        """,
        p=pid,
        n=HUB_SIZE,
    )
    # the hierarchy in a project of its own: the documents' project gets its communities rebuilt by the
    # session's worker after the ingestion commits, which replaces that project's communities
    atlas = make_tenant("graph-view-atlas").project.id
    graph.write(
        """
        CREATE (top:Community {id: $p + '-top', project_id: $p, level: 1, title: 'Coasts'})
        CREATE (:Community {id: $p + '-north', project_id: $p, level: 0, title: 'Northern ports'})
               -[:IN_COMMUNITY]->(top)
        CREATE (:Community {id: $p + '-south', project_id: $p, level: 0, title: 'Southern ports'})
               -[:IN_COMMUNITY]->(top)
        """,
        p=atlas,
    )
    curator = User.objects.create_user("walker", password="walker-pw-1", is_staff=True)
    for codename in ("browse_graph",):
        curator.user_permissions.add(
            Permission.objects.get(content_type__app_label="curation", codename=codename)
        )
    curator.user_permissions.add(
        Permission.objects.get(content_type__app_label="core", codename="view_project")
    )
    yield {
        "pid": pid,
        "tides": tides,
        "conversation": stored["conversation_id"],
        "hub": f"{pid}-hub",
        "atlas": atlas,
    }
    for project_id in (pid, atlas):
        graph.write("MATCH (n:Chunk|Entity|Community {project_id: $p}) DETACH DELETE n", p=project_id)


def _shot(page: Any, name: str) -> None:
    folder = os.environ.get("GRAPH_VIEW_SCREENSHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name))


def _labels(page: Any) -> list[str]:
    return page.evaluate("() => curationGraph.cy.nodes().not('.more').map(n => n.data('node').label).sort()")


def _point(page: Any, key: str) -> tuple[float, float]:
    """Where a node is drawn on the screen (the canvas offset plus the node's rendered position)."""
    x, y = page.evaluate(
        """(key) => {
          const n = curationGraph.cy.getElementById(key), p = n.renderedPosition();
          const r = curationGraph.cy.container().getBoundingClientRect();
          return [r.left + p.x, r.top + p.y];
        }""",
        key,
    )
    return x, y


def _settled(page: Any) -> None:
    page.wait_for_function("() => window.curationGraph && curationGraph.pending() === 0")


def test_a_curator_walks_from_a_document_to_its_entities_and_conversations(
    walked: dict[str, Any], web: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    page, problems = admin_page(browser, web, "walker", "walker-pw-1")

    # find the document, open its page, then its graph
    page.goto(f"{web}/admin/curation/graphcontent/documents/")
    page.select_option("#id_project", walked["pid"])
    page.fill("#id_q", "tides")
    page.click("#graph-filters input[type=submit]")
    page.locator("#result_list tbody tr", has_text="Tide tables").locator("a.node-link").click()
    page.click("#graph-link")
    _settled(page)
    labels = _labels(page)
    assert {"Document", "Chunk", "Entity", "Conversation", "Memory"} <= set(labels), labels
    expect(page.locator("#graph-status")).to_contain_text(f"{len(labels)} nodes shown")
    _shot(page, "graph-view-document.png")

    # double-click the conversation: its messages join the picture; a click shows it in the panel
    conversation = f"Conversation:{walked['conversation']}"
    page.mouse.dblclick(*_point(page, conversation))
    page.wait_for_function(
        "(key) => curationGraph.cy.getElementById(key).hasClass('expanded')", arg=conversation
    )
    _settled(page)
    texts = page.evaluate(
        "() => curationGraph.cy.nodes().not('.more').map(n => n.data('node').properties.text || '')"
    )
    assert "At noon, by the tide tables." in texts
    page.mouse.click(*_point(page, conversation))
    expect(page.locator("#graph-selected h3")).to_contain_text("Conversation")
    expect(page.locator("#graph-selected")).to_contain_text("PART_OF ← Memory: 2 of 2")
    page.locator("#graph-selected a", has_text="detail page").click()
    expect(page.locator("#content-main")).to_contain_text("At noon, by the tide tables.")
    assert problems == []


def test_a_hub_of_ten_thousand_neighbours_arrives_page_by_page(
    walked: dict[str, Any], web: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    page, problems = admin_page(browser, web, "walker", "walker-pw-1")

    page.goto(f"{web}/admin/curation/graphcontent/graph/Entity/{walked['hub']}/")
    _settled(page)
    # one page of 50 chunks and a "more" node, never the hub
    assert _labels(page).count("Chunk") == 50
    group = page.locator("#graph-selected .group[data-group='HAS_ENTITY<Chunk']")
    expect(group).to_contain_text("50 of 10,000")
    more = page.evaluate("() => curationGraph.cy.nodes('.more').map(n => n.id())")
    assert len(more) == 1 and "9,950 more" in page.evaluate(
        "(id) => curationGraph.cy.getElementById(id).data('caption')", more[0]
    )
    _shot(page, "graph-view-hub.png")

    # the "more" node, clicked with the mouse, brings the next page; the panel's button the one after
    page.mouse.click(*_point(page, more[0]))
    expect(group).to_contain_text("100 of 10,000")
    group.locator("button", has_text="more").click()
    expect(group).to_contain_text("150 of 10,000")
    _settled(page)
    chunks = page.evaluate(
        "() => curationGraph.cy.nodes().not('.more').filter(n => n.data('node').label === 'Chunk')"
        ".map(n => n.data('node').id)"
    )
    expected = graph.read_column(
        "MATCH (c:Chunk)-[:HAS_ENTITY]->(:Entity {id: $e}) RETURN c.id AS id ORDER BY id LIMIT 150",
        "id",
        e=walked["hub"],
    )
    assert sorted(chunks) == expected
    # still answering: a click selects a chunk and the panel shows it
    page.mouse.click(*_point(page, f"Chunk:{expected[0]}"))
    expect(page.locator("#graph-selected h3")).to_contain_text("Chunk: chunk 1")
    assert problems == []


def test_a_projects_community_hierarchy_opens_from_its_dashboard(
    walked: dict[str, Any], web: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    page, problems = admin_page(browser, web, "walker", "walker-pw-1")

    page.goto(f"{web}/admin/core/project/{walked['atlas']}/dashboard/")
    page.click("#graph-link")
    _settled(page)
    top = f"Community:{walked['atlas']}-top"
    assert page.evaluate("(key) => curationGraph.cy.getElementById(key).nonempty()", top)
    page.mouse.dblclick(*_point(page, top))
    page.wait_for_function("(key) => curationGraph.cy.getElementById(key).hasClass('expanded')", arg=top)
    _settled(page)
    titles = page.evaluate(
        "() => curationGraph.cy.nodes().not('.more').map(n => n.data('node').caption).sort()"
    )
    assert {"Coasts", "Northern ports", "Southern ports"} <= set(titles)
    _shot(page, "graph-view-communities.png")
    expect(page.locator("#graph-status")).to_have_text(f"{len(titles)} nodes shown")

    # a node deleted since it was drawn: expanding it says so and leaves it as it was
    north = f"Community:{walked['atlas']}-north"
    graph.write("MATCH (c:Community {id: $id}) DETACH DELETE c", id=f"{walked['atlas']}-north")
    page.mouse.dblclick(*_point(page, north))
    expect(page.locator("#graph-status")).to_contain_text("could not expand: no Community with this id")
    assert not page.evaluate("(key) => curationGraph.cy.getElementById(key).hasClass('expanded')", north)
    assert problems == []
