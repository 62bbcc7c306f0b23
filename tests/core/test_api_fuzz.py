"""Schema-driven fuzzing of the whole HTTP API (issue 28, finding 8): schemathesis generates requests
for every operation of the OpenAPI schema (valid and invalid ones) and sends them to the real ASGI
server (daphne, as `make run` serves it) on the session's Neo4j, Redis and test database. No request
may answer 500: bad input is a 400, a missing object a 404, an unavailable dependency a 503.

The schema is generated in-process at collection time (one pytest test per operation; schemathesis'
lazy fixture loader does not run on pytest 9) and checked to be the one the live server serves at
`/api/schema/`. Path parameters are the test project's id (another id is a 404 before any view logic
runs) and, half of the time, ids of objects that exist (a session, a document, a memory, …), so
requests reach the code that writes. Per operation: the schema's examples, boundary values of valid
input (and of invalid input for the writes of nested client data), and MAX_EXAMPLES generated valid
and invalid requests, derandomized (a fixed seed): running the test again reproduces a failure.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import strategies as st
from schemathesis.core.failures import ServerError
from schemathesis.specs.openapi.checks import content_type_conformance, response_schema_conformance

from tests.conftest import make_tenant, worker_env
from tests.support.processes import start_web, stop

# django_db: the test database exists (the tests themselves only talk HTTP to the server)
pytestmark = [pytest.mark.slow, pytest.mark.django_db]

MAX_EXAMPLES = 20
SEED = 28


def _openapi() -> dict[str, Any]:
    from drf_spectacular.generators import SchemaGenerator
    from drf_spectacular.renderers import OpenApiJsonRenderer

    rendered = OpenApiJsonRenderer().render(SchemaGenerator().get_schema(request=None, public=True))
    return json.loads(rendered)


OPENAPI = _openapi()
schema = schemathesis.openapi.from_dict(
    OPENAPI,
    config=schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "suppress-health-check": ["all"],
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "mode": "all"},
            # boundary values of valid input only: its invalid variants are ~200 requests for one body
            "phases": {"coverage": {"generation": {"mode": "positive"}}},
            # ... except the writes of nested client data (ADK events, memories): a wrong type in each
            # field of their bodies
            "operations": [
                {
                    "include-path-regex": "/(events|memory|memories)$",
                    "include-method": "POST",
                    "phases": {"coverage": {"generation": {"mode": "all"}}},
                }
            ],
            "request-timeout": 60,
        }
    ),
)


@dataclass
class World:
    """The live server and, in its test project, one object of each kind the API has ids for."""

    base: str = ""
    log: Path = Path()
    headers: dict[str, str] = field(default_factory=dict)
    read_key: str = ""
    ids: dict[str, str] = field(default_factory=dict)  # path parameter → id of an existing object
    doomed: dict[str, str] = field(default_factory=dict)  # the same, for DELETE requests
    calls: dict[str, int] = field(default_factory=dict)  # requests sent per operation


WORLD = World()


def _ok(response: httpx.Response) -> dict[str, Any]:
    assert response.status_code < 300, (response.status_code, response.text[:500])
    return response.json()


def _populate(client: httpx.Client, pid: str) -> dict[str, str]:
    user = f"/api/v1/projects/{pid}/apps/fuzz-app/users/fuzz-user"
    _ok(client.post(f"{user}/sessions", json={"session_id": "fuzz-session", "state": {"k": 1}}))
    _ok(client.post(f"{user}/sessions", json={"session_id": "fuzz-doomed"}))
    event = {
        "author": "user",
        "invocation_id": "inv-1",
        "content": {"parts": [{"text": "I live in Lisbon."}, {"function_call": {"id": "c1", "name": "f"}}]},
        "actions": {"state_delta": {"k": 2}},
    }
    _ok(client.post(f"{user}/sessions/fuzz-session/events", json={"event": event}))
    _ok(client.post(f"{user}/memory", json={"session_id": "fuzz-session"}))
    document = _ok(
        client.post(
            f"/api/v1/projects/{pid}/documents",
            json={"title": "Lovelace", "text": "Ada Lovelace worked with Charles Babbage."},
        )
    )
    doomed = _ok(
        client.post(f"/api/v1/projects/{pid}/documents", json={"title": "Doomed", "text": "To be deleted."})
    )
    messages = [{"role": "user", "text": "My name is Ana."}, {"role": "user", "text": "I like tea."}]
    stored = _ok(
        client.post(
            f"/api/v1/projects/{pid}/memories", json={"messages": messages, "scope": {"user_id": "ana"}}
        )
    )
    found = _ok(client.post(f"{user}/memory/search", json={"query": "Lisbon", "mode": "fulltext"}))
    erasure = _ok(client.post(f"/api/v1/projects/{pid}/erasure-requests", json={"user_id": "nobody"}))
    return {
        "project_id": pid,
        "app_name": "fuzz-app",
        "user_id": "fuzz-user",
        "session_id": "fuzz-session",
        "document_id": document["document_id"],
        "job_id": document["job_id"],
        "memory_id": stored["stored"][0]["id"],
        "conversation_id": stored["conversation_id"],
        "request_id": str(erasure["id"]),
        # DELETE requests get objects of their own: the other requests keep theirs
        "doomed:session_id": "fuzz-doomed",
        "doomed:document_id": doomed["document_id"],
        "doomed:memory_id": stored["stored"][1]["id"],
        "doomed:session_memory_id": found["memories"][0]["id"],
    }


@pytest.fixture(scope="module", autouse=True)
def world(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[World]:  # type: ignore[no-untyped-def]
    """daphne on a free port, on the session's services and test database, and a project with keys
    committed to that database (outside any test transaction: the server must see them)."""
    from core.models import Project

    log = tmp_path_factory.mktemp("fuzz") / "web.log"
    with django_db_blocker.unblock():
        before = _platform_rows()
        tenant = make_tenant("fuzz")
    # the fuzzer sends hundreds of requests a minute, many of them 404s: no throttling here
    env = {**worker_env(), "API_THROTTLE_RATE": "1000000/min", "API_PROBE_RATE": "1000000/min"}
    proc, base = start_web(env, log)
    try:
        WORLD.base, WORLD.log, WORLD.read_key = base, log, tenant.read_key.key
        WORLD.headers = {"Authorization": f"Bearer {tenant.admin_key.key}"}
        with httpx.Client(base_url=base, headers=WORLD.headers, timeout=60) as client:
            ids = _populate(client, tenant.project.id)
        WORLD.ids = {k: v for k, v in ids.items() if not k.startswith("doomed:")}
        WORLD.doomed = {**WORLD.ids, **{k[7:]: v for k, v in ids.items() if k.startswith("doomed:")}}
        yield WORLD
    finally:
        stop(proc)
        with django_db_blocker.unblock():
            Project.objects.filter(pk=tenant.project.id).delete()
            # what the server committed (projects the fuzzer created, erasure requests, audit
            # entries…) goes too: later tests expect the test database as they left it
            for model, keys in _platform_rows().items():
                model.objects.filter(pk__in=keys - before.get(model, set())).delete()


def _platform_rows() -> dict[Any, set[Any]]:
    """The primary keys of every row of the platform's own SQL models."""
    from django.apps import apps

    own = ("core", "knowledge", "memory", "retrieval", "sessions_graph", "curation")
    return {
        model: set(model.objects.values_list("pk", flat=True))
        for label in own
        for model in apps.get_app_config(label).get_models()
        if model._meta.managed and not model._meta.proxy  # admin-only models have no table
    }


@schema.hook
def flatmap_path_parameters(context: Any, path_parameters: dict[str, Any] | None) -> Any:
    """The test project always; other ids half of the time those of existing objects (a DELETE
    deletes objects of its own)."""
    method, path = context.operation.method.upper(), context.operation.path
    ids = dict(WORLD.doomed if method == "DELETE" else WORLD.ids)
    if method == "DELETE" and path.endswith("/users/{user_id}/memory/{memory_id}"):
        ids["memory_id"] = ids["session_memory_id"]
    generated = {**(path_parameters or {}), "project_id": ids["project_id"]}
    names = [name for name in generated if name in ids and name != "project_id"]
    if not names:
        return st.just(generated)
    return st.sampled_from([{**generated, **{name: ids[name] for name in names}}, generated])


@schema.hook
def flatmap_body(context: Any, body: Any) -> Any:
    """DRIFT's body names its project: half of the time the test project."""
    if context.operation.path != "/retrieve" or not isinstance(body, dict) or "project_id" not in body:
        return st.just(body)
    return st.sampled_from([{**body, "project_id": WORLD.ids["project_id"]}, body])


def test_the_live_server_serves_this_schema(world: World) -> None:
    response = httpx.get(f"{world.base}/api/schema/?format=json", headers=world.headers, timeout=60)
    assert response.status_code == 200
    assert response.json()["paths"] == OPENAPI["paths"]


@schemathesis.check
def no_server_error(ctx: Any, response: Any, case: Any) -> None:
    """Like schemathesis' `not_a_server_error`, but a 503 of a dependency that is down is an answer
    (the test runs no Celery worker: /healthz says so with a 503)."""
    label = case.operation.label
    WORLD.calls[label] = WORLD.calls.get(label, 0) + 1
    assert response.status_code != 429, "throttled: the fuzzer would test nothing but the throttle"
    if response.status_code < 500:
        return
    if response.status_code == 503:
        body = response.json()
        if body.get("error", {}).get("code") == "dependency_unavailable" or (
            label == "GET /healthz" and body.get("components")
        ):
            return
    raise ServerError(operation=label, status_code=response.status_code)


@schema.parametrize()
def test_no_request_answers_500(case: Any, world: World) -> None:
    """No 500 for any generated request; answers with a documented status match their schema."""
    if case.meta is not None and case.meta.phase.name == "coverage":
        # the boundary-value phase draws no hooks: the test project and objects that exist
        ids = world.doomed if case.method.upper() == "DELETE" else world.ids
        for name in case.path_parameters or {}:
            case.path_parameters[name] = ids.get(name, case.path_parameters[name])
    if case.path.endswith("/events") and isinstance(case.body, dict):
        # a generated revision is stale (409 before anything is written): let events reach the write
        case.body.pop("expected_revision", None)
        case.body.pop("expected_last_update_time", None)
    case.call_and_validate(
        base_url=world.base,
        headers=world.headers,
        checks=[no_server_error, content_type_conformance, response_schema_conformance],
    )


def test_every_operation_was_fuzzed(world: World) -> None:
    operations = {f"{method.upper()} {path}" for path, item in OPENAPI["paths"].items() for method in item}
    assert set(world.calls) == operations
    assert sum(world.calls.values()) >= len(operations) * MAX_EXAMPLES


def test_the_server_logged_no_traceback(world: World) -> None:
    """A 500 the checks could not see (an error after the response started) leaves a traceback."""
    assert "Traceback" not in world.log.read_text()


def test_websocket_handshakes_are_refused_not_500(world: World) -> None:
    """On the real server: an unknown path and a path without a key are refused (403), never a 500."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    ws, pid = world.base.replace("http://", "ws://"), world.ids["project_id"]
    for path in (f"/ws/v1/nowhere/?key={world.read_key}", "/", f"/ws/v1/projects/{pid}/progress/"):
        with pytest.raises(InvalidStatus) as refused:
            connect(f"{ws}{path}", open_timeout=10).close()
        assert refused.value.response.status_code == 403, path
    with connect(f"{ws}/ws/v1/projects/{pid}/progress/?key={world.read_key}", open_timeout=10):
        pass
