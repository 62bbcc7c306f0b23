"""Retries of LLM and embedding calls: 429, 5xx, timeouts and lost connections.

Exponential backoff with jitter per RETRY_* settings (seed 002's names and defaults); a server's
Retry-After header, when present, is honoured up to RETRY_BACKOFF_MAX_SEC.
"""

from __future__ import annotations

import json
import logging
import random
from collections.abc import Callable
from typing import TypeVar

import openai
from django.conf import settings
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

logger = logging.getLogger(__name__)
T = TypeVar("T")


def is_retryable(exc: BaseException) -> bool:
    """Rate limits, server errors, timeouts, lost connections and garbled (non-JSON) responses."""
    if isinstance(exc, openai.RateLimitError | openai.APITimeoutError | openai.APIConnectionError):
        return True
    if isinstance(exc, json.JSONDecodeError | openai.APIResponseValidationError):
        return True
    return isinstance(exc, openai.APIStatusError) and exc.status_code >= 500


def _retry_after(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    raw = response.headers.get("retry-after")
    try:
        return max(0.0, float(raw)) if raw is not None else None
    except ValueError:
        return None


def backoff_wait(state: RetryCallState) -> float:
    """base * factor^(attempt-1), capped, with full jitter; Retry-After wins when given."""
    cap = settings.RETRY_BACKOFF_MAX_SEC
    exc = state.outcome.exception() if state.outcome else None
    hinted = _retry_after(exc)
    if hinted is not None:
        return min(hinted, cap)
    ceiling = min(
        cap, settings.RETRY_BACKOFF_BASE_SEC * settings.RETRY_BACKOFF_FACTOR ** (state.attempt_number - 1)
    )
    return random.uniform(ceiling / 2, ceiling)


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    logger.warning(
        "llm call failed (attempt %s/%s), retrying: %s",
        state.attempt_number,
        settings.RETRY_MAX_ATTEMPTS,
        exc.__class__.__name__ if exc else "?",
    )


def call_with_retries(fn: Callable[[], T]) -> T:
    retrying = Retrying(
        retry=retry_if_exception(is_retryable),
        stop=stop_after_attempt(max(1, settings.RETRY_MAX_ATTEMPTS)),
        wait=backoff_wait,
        before_sleep=_log_retry,
        reraise=True,
    )
    return retrying(fn)
