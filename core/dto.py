"""Plain typed values that cross app boundaries."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class ProjectData:
    id: str
    name: str
    embedder: str
    embedding_dimensions: int
    created_at: datetime


@dataclass(frozen=True)
class IssuedApiKey:
    id: int
    project_id: str
    name: str
    prefix: str
    scopes: list[str]
    key: str  # the full secret key; shown once, never stored
