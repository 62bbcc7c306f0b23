"""Warm-up at start: the first query after a start comes close to the tenth (docs/operations.md).

A fresh web process pays on its first queries for what later ones find ready: the embedding model,
the URLconf and every API module behind it, lazily built Python objects, Neo4j's query plans and the
JIT of the code paths a query runs. So the web process, on a background thread while it already
serves, loads the embedder and then runs each registered step a few times against the project
ingested last (apps register their hot queries: `warmup_register`). Each round asks another question:
a generic one, then questions the apps draw from the project (`warmup_questions_register`: the
knowledge app names its documents' titles), so the branches a real question takes (a title the graph
walk links, the index terms and records of more than one answer) are warm too, not only those of one
question asked again. A step sends its query as an agent does, through the API view (`api_post`:
the view, its permissions, serializers, the service with the API's defaults and the rendering of the
answer), so the first request of each kind finds its code, its query texts and their plans ready.
Steps only read; one that fails is logged and skipped. `/healthz` reports the state and the time each
step's first and last run took.
"""

from __future__ import annotations

import io
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from django.conf import settings
from django.core.handlers.wsgi import WSGIRequest
from django.db import connection
from django.urls import get_resolver, resolve

from core.auth.keys import KeyUser
from core.embeddings import get_embedder
from core.errors import PlatformError
from core.models import ApiKey, Job, Project

logger = logging.getLogger(__name__)

WARM_UP_QUERY = "What is this collection about?"

# a step runs its queries for (project id, the question); its API call embeds the question
WarmUpStep = Callable[[str, str], None]
# a question source gives up to `count` questions about a project: (project id, count) -> questions
QuestionSource = Callable[[str, int], list[str]]
_steps: dict[str, tuple[WarmUpStep, bool]] = {}
_question_sources: list[QuestionSource] = []


def warmup_register(name: str, step: WarmUpStep, *, once: bool = False) -> None:
    """Register a step of the start-up warm-up (an app's ready()); it must only read. `once`: it
    runs in the first round only (a step that reads the same records whatever the question)."""
    _steps[name] = (step, once)


def warmup_questions_register(source: QuestionSource) -> None:
    """Register a source of questions about a project for the warm-up's rounds; it must only read."""
    _question_sources.append(source)


def warm_questions(project_id: str, count: int) -> list[str]:
    """`count` questions for the warm-up's rounds: the generic one, then those the sources draw
    from the project, and the same again in turn when they have too few."""
    questions = [WARM_UP_QUERY]
    for source in _question_sources:
        try:
            questions += [q for q in source(project_id, count) if q not in questions]
        except Exception as exc:  # noqa: BLE001 - the generic question still warms the code paths
            logger.warning("warm-up questions failed: %s", exc, exc_info=not isinstance(exc, PlatformError))
    return [questions[i % len(questions)] for i in range(count)]


class WarmUpRequestFailed(RuntimeError):
    """A warm-up request was answered with an error (the step is reported failed, the server serves)."""


def api_post(path: str, body: dict[str, Any], *, project_id: str) -> int:
    """POST `body` as JSON to the API view at `path` in this process, as a `read` key of `project_id`
    would send it; returns the status, and raises WarmUpRequestFailed for anything but 2xx.

    The request runs the view as a request does (permissions, including the key's project and scope,
    the serializers, the service, the rendering of the answer), but holds no key: the warm-up writes
    nothing, so it has no key row to check (nor a `last_used_at` to set) and counts against no
    throttle bucket. The view sees an unsaved key through DRF's forced authentication, which only
    code in this process can set (an attribute of the request object, never a header)."""
    raw = orjson.dumps(body)
    request = WSGIRequest(
        {
            "REQUEST_METHOD": "POST",
            "PATH_INFO": path,
            "SCRIPT_NAME": "",
            "QUERY_STRING": "",
            "CONTENT_TYPE": "application/json",
            "CONTENT_LENGTH": str(len(raw)),
            "SERVER_NAME": "warm-up",
            "SERVER_PORT": "0",
            "wsgi.input": io.BytesIO(raw),
            "wsgi.url_scheme": "http",
        }
    )
    key = ApiKey(project_id=project_id, name="warm-up", prefix="warm-up", scopes=["read"])
    request._force_auth_user = KeyUser(api_key=key)
    request._force_auth_token = key
    match = resolve(path)
    view = match.func.view_class.as_view(throttle_classes=())
    response = view(request, *match.args, **match.kwargs)
    response.render()
    if not 200 <= response.status_code < 300:
        raise WarmUpRequestFailed(f"{path} answered {response.status_code}: {response.content[:200]!r}")
    return int(response.status_code)


@dataclass
class WarmUpState:
    status: str = "off"  # off, running, done
    project_id: str | None = None
    took_ms: float | None = None
    steps: dict[str, dict[str, Any]] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "took_ms": self.took_ms, "steps": self.steps}


state = WarmUpState()


def warm_project() -> str | None:
    """The project whose ingestion finished last, else the oldest project; None without projects."""
    latest = (
        Job.objects.filter(kind="ingest", status=Job.Status.SUCCEEDED)
        .order_by("-finished_at")
        .values_list("project_id", flat=True)
        .first()
    )
    return latest or Project.objects.order_by("created_at").values_list("id", flat=True).first()


def _ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def warm_up(*, rounds: int) -> WarmUpState:
    """Load the embedder, then (with `rounds` > 0) run each registered step `rounds` times."""
    started = time.perf_counter()
    state.status = "running"
    try:
        get_embedder().warm()
        get_resolver().url_patterns  # noqa: B018 - imports the URLconf and the API modules it names
        project_id = warm_project() if rounds > 0 and _steps else None
        state.project_id = project_id
        if project_id is not None:
            clock = time.perf_counter()
            questions = warm_questions(project_id, rounds)
            get_embedder().embed_one(questions[0])  # the load figure; each step's API call embeds its own
            state.steps["embedding"] = {"first_ms": _ms(clock), "questions": len(set(questions))}
            for name, (step, once) in _steps.items():
                state.steps[name] = _run_step(step, project_id, questions[:1] if once else questions)
    finally:
        state.took_ms = _ms(started)
        state.status = "done"
    logger.info("warm-up done in %.0f ms: %s", state.took_ms, state.steps)
    return state


def _run_step(step: WarmUpStep, project_id: str, questions: list[str]) -> dict[str, Any]:
    took: list[float] = []
    for question in questions:
        clock = time.perf_counter()
        try:
            step(project_id, question)
        except Exception as exc:  # a warm-up step never stops the server; the real query reports it
            # an outage (a PlatformError) or an error answer (the view logged its own) is one line, as
            # the requests it fails log it; a bug of the warm-up itself is traced
            traced = not isinstance(exc, PlatformError | WarmUpRequestFailed)
            logger.warning("warm-up step failed: %s", exc, exc_info=traced)
            return {"error": f"{exc.__class__.__name__}: {str(exc)[:200]}"}
        took.append(_ms(clock))
    return {"first_ms": took[0], "last_ms": took[-1]}


def warm_up_in_background() -> threading.Thread:
    """Start the warm-up on a daemon thread (the server answers meanwhile)."""

    def run() -> None:
        try:
            warm_up(rounds=settings.WARM_UP_ROUNDS)
        except Exception:  # the first real call reports the problem to its caller
            logger.exception("warm-up failed")
        finally:
            connection.close()  # this thread's SQL connection

    state.status = "running"
    thread = threading.Thread(target=run, name="warm-up", daemon=True)
    thread.start()
    return thread
