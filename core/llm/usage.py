"""Token usage accounting: every LLM and embedding call adds to the meters that are open."""

from __future__ import annotations

import contextvars
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field


@dataclass
class TokenUsage:
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    calls: int = 0
    by_model: dict[str, int] = field(default_factory=dict)

    def add(self, *, model: str, prompt: int, completion: int, total: int | None = None) -> None:
        total = total if total is not None else prompt + completion
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        self.total_tokens += total
        self.calls += 1
        self.by_model[model] = self.by_model.get(model, 0) + total

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


_meters: contextvars.ContextVar[tuple[TokenUsage, ...]] = contextvars.ContextVar("usage_meters", default=())


@contextmanager
def usage_meter() -> Iterator[TokenUsage]:
    """Collect the usage of every call made inside the block (nested meters all count)."""
    meter = TokenUsage()
    token = _meters.set((*_meters.get(), meter))
    try:
        yield meter
    finally:
        _meters.reset(token)


def record(*, model: str, prompt: int, completion: int = 0, total: int | None = None) -> None:
    for meter in _meters.get():
        meter.add(model=model, prompt=prompt, completion=completion, total=total)
