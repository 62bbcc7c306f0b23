"""Knowledge retrieval of one project: search (vector, fulltext, hybrid, graph) and DRIFT search."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from knowledge_platform_client._models import ApiModel
from knowledge_platform_client.http import AsyncPlatformClient

SearchMode = Literal["vector", "fulltext", "hybrid", "graph"]


class ProjectInfo(ApiModel):
    id: str
    name: str
    embedder: str | None = None
    embedding_dimensions: int | None = None


class SearchHit(ApiModel):
    """One chunk found. With an enrichment profile, `text` and `score` are the profile's and its
    extra columns are in `metadata`."""

    chunk_id: str
    document_id: str | None = None
    document_name: str | None = None
    text: str
    score: float
    metadata: dict[str, Any] = Field(default_factory=dict)


class SearchResult(ApiModel):
    items: list[SearchHit]
    mode: str
    took_ms: float
    timings_ms: dict[str, float] = Field(default_factory=dict)
    context: str | None = None  # seed 000's formatted blocks, when asked for
    # mode graph: the mode that ranked instead ({"mode": "hybrid", "reason": ...}) when the project
    # has no graph to walk, and what the walk linked and seeded when `debug` was asked for
    fallback: dict[str, str] | None = None
    debug: dict[str, Any] | None = None


class Citation(ApiModel):
    chunk_id: str
    span: str | None = None
    document_name: str | None = None


class KeyFact(ApiModel):
    fact: str
    citations: list[Citation] = Field(default_factory=list)


class DriftResult(ApiModel):
    """A DRIFT answer. Citations the platform could not enrich (a bare chunk id) become `Citation`s
    with only `chunk_id`."""

    final_answer: str = ""
    key_facts: list[KeyFact] = Field(default_factory=list)
    residual_uncertainty: str = ""
    no_data_found: bool = False
    mode: str | None = None
    retrieval_id: str | None = None
    usage: dict[str, Any] = Field(default_factory=dict)
    took_ms: float | None = None

    @classmethod
    def from_answer(cls, data: dict[str, Any]) -> DriftResult:
        facts = []
        for fact in data.get("key_facts") or []:
            citations = [{"chunk_id": c} if isinstance(c, str) else c for c in fact.get("citations") or []]
            facts.append({**fact, "citations": citations})
        return cls.model_validate({**data, "key_facts": facts})


class KnowledgeClient:
    """`POST /projects/{project}/search`, `POST /retrieve` and the project itself."""

    def __init__(self, client: AsyncPlatformClient) -> None:
        self.client = client

    async def project(self) -> ProjectInfo:
        """The project the settings name: a cheap call that proves the key works for it (401 for an
        unknown key, 404 for another project's id)."""
        return ProjectInfo.model_validate(await self.client.request("GET", self.client.project_path()))

    async def search(
        self,
        query: str,
        *,
        mode: SearchMode = "hybrid",
        top_k: int = 10,
        profile: str | None = None,
        filters: dict[str, Any] | None = None,
        include_context: bool = False,
        debug: bool = False,
    ) -> SearchResult:
        """`debug` (mode graph only) returns the titles the walk linked and the seeds it started from."""
        body: dict[str, Any] = {"query": query, "mode": mode, "top_k": top_k}
        if profile:
            body["profile"] = profile
        if filters:
            body["filters"] = filters
        if include_context:
            body["include_context"] = True
        if debug:
            body["debug"] = True
        data = await self.client.request("POST", self.client.project_path("search"), json=body)
        return SearchResult.model_validate(data)

    async def drift(
        self,
        query: str,
        *,
        top_k: int | None = None,
        max_depth: int | None = None,
        max_followups: int | None = None,
        community_level: int | None = None,
        retrieval_id: str | None = None,
    ) -> DriftResult:
        """DRIFT search (seed 002's `POST /retrieve`); progress goes to the project's websocket."""
        knobs = {
            "top_k": top_k,
            "max_depth": max_depth,
            "max_followups": max_followups,
            "community_level": community_level,
            "retrieval_id": retrieval_id,
        }
        body = {
            "query": query,
            "project_id": self.client.settings.project_id,
            **{k: v for k, v in knobs.items() if v is not None},
        }
        return DriftResult.from_answer(await self.client.request("POST", "/retrieve", json=body))
