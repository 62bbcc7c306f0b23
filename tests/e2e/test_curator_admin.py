"""Curator flows in headless Chromium against the real ASGI server, Celery worker, Neo4j and Redis:
log in, find a user's conversation, make it private with a 1-day retention, preview and run the
retention policy and see the conversation gone; then run an erasure request for another user."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from core import graph
from curation.models import RetentionPolicy
from tests.conftest import Tenant, make_tenant
from tests.curation.helpers import carriers
from tests.e2e.browser import admin_page
from tests.memory.helpers import assistant, store, user

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.timeout(600),
    pytest.mark.django_db(transaction=True),
    pytest.mark.usefixtures("celery_worker_process"),
]

PERMISSIONS = [
    ("curation", "browse_graph"),
    ("curation", "change_privacy"),
    ("curation", "view_retentionpolicy"),
    ("curation", "run_retentionpolicy"),
    ("curation", "view_policyrun"),
    ("curation", "add_erasurerequest"),
    ("curation", "view_erasurerequest"),
    ("curation", "run_erasurerequest"),
    ("curation", "view_auditentry"),
]


@pytest.fixture
def curated() -> dict[str, Any]:
    """A project where Ana talked three days ago and Bruno today, a curator, and the project's
    expired-conversations policy. Prepared before the browser starts (Playwright's sync API runs an
    event loop, inside which Django refuses ORM calls)."""
    tenant: Tenant = make_tenant("curated")
    client, pid = tenant.client(tenant.write_key), tenant.project.id
    old = (datetime.now(UTC) - timedelta(days=3)).isoformat()
    ana = store(
        client,
        pid,
        [
            user("Hi, I am Ana; call me at +44 20 7946 0958 about the harbour lease.", timestamp=old),
            assistant("Noted, the harbour lease.", timestamp=old),
        ],
        application_id="port",
        user_id="ana",
        thread_id="ana-1",
    ).json()
    store(
        client,
        pid,
        [user("Bruno here: the crane needs oiling, mail bruno@example.com")],
        application_id="port",
        user_id="bruno",
        thread_id="bruno-1",
    )
    curator = User.objects.create_user("curator", password="curator-pw-1", is_staff=True)
    for app_label, codename in PERMISSIONS:
        curator.user_permissions.add(
            Permission.objects.get(content_type__app_label=app_label, codename=codename)
        )
    policy = RetentionPolicy.objects.create(
        name="Expired conversations (curated)", project_id=pid, kind="expired_conversations", action="delete"
    )
    return {"pid": pid, "ana_conversation": ana["conversation_id"], "policy": policy.pk}


def _wait_status(page: Any, status: str, timeout: float = 120) -> None:
    """Reload a changelist until its first row's status column reads `status`."""
    deadline = time.monotonic() + timeout
    while (page.locator("#result_list td.field-status").first.text_content() or "").strip() != status:
        assert time.monotonic() < deadline, f"status {status!r} never reached"
        time.sleep(1)
        page.reload()


def test_curator_makes_a_conversation_private_expires_it_and_erases_a_user(
    curated: dict[str, Any], web: str, browser: Any
) -> None:
    from playwright.sync_api import expect

    pid = curated["pid"]
    page, problems = admin_page(browser, web, "curator", "curator-pw-1")
    page.get_by_role("link", name="Graph contents").click()

    # find Ana's conversation: filter by project and user, then open it
    page.select_option("#id_project", pid)
    page.fill("#id_user_id", "ana")
    page.click("#graph-filters input[type=submit]")
    rows = page.locator("#result_list tbody tr")
    expect(rows).to_have_count(1)
    rows.first.locator("a.node-link").click()
    expect(page.locator("#content-main")).to_contain_text("harbour lease")

    # private, kept for one day after its last message (three days ago): it has expired
    page.select_option("#id_accessibility", "private")
    page.fill("#id_retention_days", "1")
    page.click("#privacy input[type=submit]")
    expect(page.locator("ul.messagelist")).to_contain_text("Privacy settings saved")
    expect(page.locator("#id_accessibility")).to_have_value("private")

    # preview, then run the policy
    page.goto(f"{web}/admin/curation/retentionpolicy/")
    page.check(f"input[name=_selected_action][value='{curated['policy']}']")
    page.select_option("select[name=action]", "preview")
    page.click("button[name=index]")
    expect(page.locator("ul.messagelist")).to_contain_text("this will delete 2 messages in 1 conversations")
    assert (
        graph.read("MATCH (c:Conversation {id: $c}) RETURN count(c) AS n", c=curated["ana_conversation"])[0][
            "n"
        ]
        == 1
    )

    page.check(f"input[name=_selected_action][value='{curated['policy']}']")
    page.select_option("select[name=action]", "run_now")
    page.click("button[name=index]")
    expect(page.locator("ul.messagelist")).to_contain_text("Queued 1 run(s)")
    page.goto(f"{web}/admin/curation/policyrun/")
    _wait_status(page, "Succeeded")

    # gone: the list finds nothing for Ana, and no node holds her words
    page.goto(f"{web}/admin/curation/graphcontent/conversations/?project={pid}&user_id=ana")
    expect(page.locator("#result_list tbody")).to_contain_text("Nothing here.")
    assert carriers(pid, "harbour lease") == [] and carriers(pid, "7946 0958") == []

    # erasure request for Bruno
    page.goto(f"{web}/admin/curation/erasurerequest/add/")
    page.select_option("#id_project", pid)
    page.fill("#id_user_id", "bruno")
    page.click("input[name=_save]")
    _wait_status(page, "Succeeded")
    expect(page.locator("#result_list")).to_contain_text("bruno")
    assert carriers(pid, "bruno@example.com") == []
    assert (
        graph.read(
            "MATCH (n {project_id: $p}) WHERE n.user_id IN ['ana', 'bruno'] RETURN count(n) AS n", p=pid
        )[0]["n"]
        == 0
    )

    # the audit log shows each step, and no erased words
    page.goto(f"{web}/admin/curation/auditentry/")
    log = page.locator("#result_list").text_content() or ""
    for action in (
        "privacy settings changed",
        "retention policy previewed",
        "retention policy run",
        "erasure request",
    ):
        assert action in log, action
    assert "harbour" not in log and "bruno@example.com" not in log
    assert problems == []
