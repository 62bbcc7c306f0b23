"""The LLM: one `openai` client for OpenAI, Azure OpenAI or any OpenAI-compatible base URL.

All chat calls go through `chat()` / `chat_json()`: retried per RETRY_*, usage recorded, and
structured output validated with pydantic (invalid output is retried, then rejected).
"""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any, TypeVar

import openai
from django.conf import settings
from pydantic import BaseModel, ValidationError

from core.errors import DependencyUnavailable, PlatformError
from core.llm import usage
from core.llm.retry import call_with_retries, is_retryable
from core.metrics import llm_call_record
from core.runtime.tracing import llm_span

logger = logging.getLogger(__name__)
M = TypeVar("M", bound=BaseModel)


class LLMNotConfigured(PlatformError):
    status_code = 503
    code = "llm_not_configured"


class LLMInvalidOutput(PlatformError):
    status_code = 502
    code = "llm_invalid_output"


_clients: dict[tuple[int, str, str, str, float, str], openai.OpenAI] = {}
_clients_lock = threading.Lock()


def make_client(
    *,
    api_key: str | None = None,
    base_url: str | None = None,
    provider: str | None = None,
    timeout: float | None = None,
) -> openai.OpenAI:
    """A client for the configured provider, one per configuration and process (building one costs
    ~30 ms: an SSL context and a connection pool; clients are thread-safe and keep connections alive).
    SDK-level retries are off: tenacity does them."""
    provider = provider or settings.LLM_PROVIDER
    api_key = api_key if api_key is not None else settings.LLM_API_KEY
    base_url = base_url if base_url is not None else settings.LLM_BASE_URL
    timeout = timeout if timeout is not None else settings.LLM_TIMEOUT_SEC
    # keyed by process too: a forked worker must not share its parent's connections
    key = (os.getpid(), provider, api_key, base_url, float(timeout), settings.AZURE_OPENAI_API_VERSION)
    client = _clients.get(key)
    if client is None:
        with _clients_lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = _build_client(provider, api_key, base_url, timeout)
    return client


def _build_client(provider: str, api_key: str, base_url: str, timeout: float) -> openai.OpenAI:
    if provider == "azure":
        return openai.AzureOpenAI(
            api_key=api_key,
            azure_endpoint=base_url,
            api_version=settings.AZURE_OPENAI_API_VERSION,
            timeout=timeout,
            max_retries=0,
        )
    if provider == "openai":
        return openai.OpenAI(
            api_key=api_key or "not-needed", base_url=base_url or None, timeout=timeout, max_retries=0
        )
    raise LLMNotConfigured("no LLM is configured (LLM_PROVIDER=none)")


def llm_configured() -> bool:
    return settings.LLM_PROVIDER != "none"


def chat(messages: list[dict[str, Any]], *, json_mode: bool = False, **options: Any) -> str:
    """One chat completion's text."""
    client = make_client()
    model = options.pop("model", settings.LLM_MODEL)
    kwargs: dict[str, Any] = {"model": model, "messages": messages, "temperature": settings.LLM_TEMPERATURE}
    if json_mode:
        kwargs["response_format"] = {"type": "json_object"}
    kwargs.update(options)

    def attempt() -> str:
        with llm_span(model) as span:
            try:
                response = client.chat.completions.create(**kwargs)
            except Exception:
                llm_call_record(ok=False)
                raise
            tokens = response.usage
            if tokens is not None:
                span.set_attribute("gen_ai.usage.input_tokens", tokens.prompt_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", tokens.completion_tokens)
        llm_call_record(
            ok=True,
            prompt_tokens=tokens.prompt_tokens if tokens else 0,
            completion_tokens=tokens.completion_tokens if tokens else 0,
        )
        if tokens is not None:
            usage.record(
                model=model,
                prompt=tokens.prompt_tokens,
                completion=tokens.completion_tokens,
                total=tokens.total_tokens,
            )
        return response.choices[0].message.content or ""

    try:
        return call_with_retries(attempt)
    except Exception as exc:
        if is_retryable(exc):
            raise DependencyUnavailable("llm", f"{exc.__class__.__name__}: {exc}") from exc
        raise


def chat_json(messages: list[dict[str, Any]], schema: type[M], **options: Any) -> M:
    """A chat completion parsed into `schema`. Malformed or invalid JSON is asked again, at most
    RETRY_MAX_ATTEMPTS times, then rejected with LLMInvalidOutput."""
    attempts = max(1, settings.RETRY_MAX_ATTEMPTS)
    last_error = ""
    for attempt in range(1, attempts + 1):
        text = chat(messages, json_mode=True, **options)
        try:
            return schema.model_validate(json.loads(text))
        except (json.JSONDecodeError, ValidationError) as exc:
            last_error = str(exc)[:500]
            logger.warning("llm output rejected (attempt %s/%s): %s", attempt, attempts, last_error)
    raise LLMInvalidOutput("the LLM returned invalid structured output", details={"error": last_error})


def llm_ping(*, timeout_sec: float) -> dict[str, Any]:
    """Health: list models once, no retries."""
    client = make_client(timeout=timeout_sec)
    page = client.models.list()
    return {"provider": settings.LLM_PROVIDER, "model": settings.LLM_MODEL, "models_listed": len(page.data)}
