"""Embedders: `openai` (OpenAI / Azure / compatible) and `local` (all-MiniLM-L6-v2, offline)."""

from core.embeddings.base import Embedder, get_embedder, make_embedder

__all__ = ["Embedder", "get_embedder", "make_embedder"]
