"""Knowledge's part of the start-up warm-up (core.runtime.warmup): questions that name the project's
documents (the warm-up asks them in its rounds: a title the graph walk links, other index terms and
records than the generic question's), and one read of the records search results are built from."""

from __future__ import annotations

from django.conf import settings

from core import graph
from core.runtime.warmup import warmup_questions_register, warmup_register
from knowledge import cypher


def titled_questions(project_id: str, count: int) -> list[str]:
    rows = graph.read(cypher.WARM_UP_TITLES, project_id=project_id, limit=count)
    return [f"What does {row['title']} say?" for row in rows]


def chunks_read(project_id: str, _query: str) -> None:
    graph.read(cypher.WARM_UP_CHUNKS_READ, project_id=project_id, limit=settings.WARM_UP_CHUNKS)


def register() -> None:
    warmup_questions_register(titled_questions)
    warmup_register("chunk records", chunks_read, once=True)
