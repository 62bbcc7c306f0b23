"""Retrieval's steps of the start-up warm-up (core.runtime.warmup): each search mode, and DRIFT when
it runs without an LLM (with one, a warm-up would spend tokens; its retrieval half is warmed by the
search modes)."""

from __future__ import annotations

from core.llm.client import llm_configured
from core.runtime.warmup import WarmUpStep, warmup_register
from retrieval.drift.services import drift_search
from retrieval.retrievers import RETRIEVERS
from retrieval.services import search_run


def _search(mode: str) -> WarmUpStep:
    def step(project_id: str, query: str, vector: list[float]) -> None:
        search_run(project_id=project_id, query=query, mode=mode, top_k=10, vector=vector)

    return step


def _drift(project_id: str, query: str, _vector: list[float]) -> None:
    if not llm_configured():
        drift_search(project_id=project_id, query=query)


def register() -> None:
    for mode in RETRIEVERS:
        warmup_register(f"search {mode}", _search(mode))
    warmup_register("drift", _drift)
