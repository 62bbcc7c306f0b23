"""Token usage accounting: every LLM and embedding call adds to the meters that are open."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime

logger = logging.getLogger(__name__)


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


# --- tokens spent inside API requests, per project and day ----------------------------------------------
# Jobs keep their own usage (Job.token_usage). What a request spends (a DRIFT answer, a chat turn) is
# added here, in Redis, shared by every web process: one hash per project, one field per UTC day,
# kept PROJECT_TOKENS_KEEP_DAYS after its last write. Fails open: accounting never fails a request.

PROJECT_TOKENS_KEY = "kp:llm-tokens:{}"
PROJECT_TOKENS_KEEP_DAYS = 45


def project_tokens_add(project_id: str, tokens: int, *, day: date | None = None) -> None:
    if tokens <= 0:
        return
    from core.runtime.redis_client import get_redis

    key = PROJECT_TOKENS_KEY.format(project_id)
    field_ = (day or datetime.now(UTC).date()).isoformat()
    try:
        pipe = get_redis().pipeline(transaction=False)
        pipe.hincrby(key, field_, tokens)
        pipe.expire(key, PROJECT_TOKENS_KEEP_DAYS * 86400)
        pipe.execute()
    except Exception:  # noqa: BLE001 - Redis down: the request itself must go on
        logger.debug("request tokens of project %s not recorded", project_id, exc_info=True)


def project_tokens_per_day(project_id: str, days: list[date]) -> dict[date, int] | None:
    """Tokens that requests of the project spent on each day; None when Redis cannot say."""
    from core.runtime.redis_client import get_redis

    try:
        values = get_redis().hmget(PROJECT_TOKENS_KEY.format(project_id), [d.isoformat() for d in days])
    except Exception:  # noqa: BLE001 - Redis down: the dashboard shows the jobs' tokens alone
        logger.debug("request tokens of project %s not read", project_id, exc_info=True)
        return None
    return {d: int(v or 0) for d, v in zip(days, values, strict=True)}
