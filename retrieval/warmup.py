"""Retrieval's steps of the start-up warm-up (core.runtime.warmup): each search mode, and DRIFT when
it runs without an LLM (with one, a warm-up would spend tokens; its retrieval half is warmed by the
search modes), each sent through its API view with the API's defaults, as an agent sends it."""

from __future__ import annotations

from django.urls import reverse

from core.llm.client import llm_configured
from core.runtime.warmup import WarmUpStep, api_post, warmup_register
from retrieval.retrievers import RETRIEVERS


def _search(mode: str) -> WarmUpStep:
    def step(project_id: str, query: str) -> None:
        path = reverse("search", kwargs={"project_id": project_id})
        api_post(path, {"query": query, "mode": mode}, project_id=project_id)

    return step


def _drift(project_id: str, query: str) -> None:
    if not llm_configured():
        api_post(reverse("retrieve"), {"query": query, "project_id": project_id}, project_id=project_id)


def register() -> None:
    for mode in RETRIEVERS:
        warmup_register(f"search {mode}", _search(mode))
    warmup_register("drift", _drift)
