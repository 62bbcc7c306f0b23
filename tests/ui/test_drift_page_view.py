"""The DRIFT page's shell: served to anyone, no server data in it, a strict content security policy."""

from pathlib import Path

import pytest
from django.test import Client


@pytest.mark.django_db
def test_drift_page_is_served_with_its_script_and_a_strict_policy() -> None:
    response = Client().get("/ui/drift/", HTTP_HOST="127.0.0.1:8000")
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/html")
    html = response.content.decode()
    for test_id in (
        "api-key",
        "project",
        "question",
        "search",
        "thought-panel",
        "progress-bar",
        "final-answer",
        "key-facts",
        "no-data",
        "chunk-panel",
        "chunk-text",
    ):
        assert f'data-testid="{test_id}"' in html
    assert '<script src="/static/retrieval/drift.js" defer></script>' in html
    assert "<script>" not in html  # no inline script: the policy below forbids it
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "default-src 'none'" in policy
    assert "connect-src 'self' ws://127.0.0.1:8000 wss://127.0.0.1:8000" in policy
    assert response["Referrer-Policy"] == "no-referrer"


@pytest.mark.django_db
def test_drift_page_only_answers_get() -> None:
    assert Client().post("/ui/drift/").status_code == 405


def test_drift_script_never_parses_server_text_as_html() -> None:
    script = (Path(__file__).resolve().parents[2] / "retrieval/static/retrieval/drift.js").read_text()
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in script, sink
