"""Embedders: `openai` (OpenAI / Azure / compatible) and `local` (all-MiniLM-L6-v2, offline)."""

from core.embeddings.base import Embedder, embed_soon, get_embedder, make_embedder

__all__ = ["Embedder", "embed_soon", "get_embedder", "make_embedder"]
