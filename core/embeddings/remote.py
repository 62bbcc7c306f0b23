"""Embeddings through the `openai` package (OpenAI, Azure OpenAI, or a compatible base URL)."""

from __future__ import annotations

from typing import Any

from django.conf import settings

from core.embeddings.base import Embedder
from core.errors import DependencyUnavailable
from core.llm import usage
from core.llm.client import make_client
from core.llm.retry import call_with_retries, is_retryable


class OpenAIEmbedder(Embedder):
    def __init__(self, *, provider: str, model: str, dimensions: int, batch_size: int) -> None:
        super().__init__(batch_size=batch_size)
        self.provider = provider
        self.model = model
        self.dimensions = dimensions
        self._client = make_client(
            provider=provider, api_key=settings.EMBEDDINGS_API_KEY, base_url=settings.EMBEDDINGS_BASE_URL
        )

    def _embed_batch(self, texts: list[str]) -> list[list[float]]:
        def attempt() -> list[list[float]]:
            kwargs: dict[str, Any] = {"model": self.model, "input": texts}
            if self.model.startswith("text-embedding-3"):
                kwargs["dimensions"] = self.dimensions
            response = self._client.embeddings.create(**kwargs)
            if response.usage is not None:
                usage.record(
                    model=self.model, prompt=response.usage.prompt_tokens, total=response.usage.total_tokens
                )
            ordered = sorted(response.data, key=lambda item: item.index)
            return [list(item.embedding) for item in ordered]

        try:
            return call_with_retries(attempt)
        except Exception as exc:
            if is_retryable(exc):
                raise DependencyUnavailable("embeddings", f"{exc.__class__.__name__}: {exc}") from exc
            raise
