"""The LLM path through the real `openai` client against a local OpenAI-compatible server."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from core.errors import DependencyUnavailable
from core.llm.client import LLMInvalidOutput, LLMNotConfigured, chat, chat_json, make_client
from core.llm.usage import usage_meter
from tests.support.openai_server import FakeOpenAI, Step

pytestmark = pytest.mark.unit


class Answer(BaseModel):
    answer: str
    confidence: float


def test_chat_returns_reply_and_records_usage(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Step(content="Paris is the capital of France"))
    with usage_meter() as meter:
        text = chat([{"role": "user", "content": "capital of France?"}])
    assert text == "Paris is the capital of France"
    assert meter.calls == 1
    assert meter.completion_tokens == 6
    assert meter.total_tokens == meter.prompt_tokens + meter.completion_tokens
    assert meter.by_model == {"fake-chat": meter.total_tokens}
    request = fake_openai.requests_to("/chat/completions")[0]
    assert request.body["model"] == "fake-chat"
    assert request.headers["authorization"] == "Bearer sk-test"


def test_429_is_retried_honouring_retry_after(fake_openai: FakeOpenAI, settings) -> None:  # type: ignore[no-untyped-def]
    # the backoff alone would wait at most RETRY_BACKOFF_BASE_SEC (0.01 s) before the second try; the
    # header asks for 1 s, within the cap, so the second request can only reach the server after it
    settings.RETRY_BACKOFF_MAX_SEC = 5.0
    fake_openai.queue(Step(status=429, headers={"Retry-After": "1"}), Step(status=429), Step(content="ok"))
    assert chat([{"role": "user", "content": "hi"}]) == "ok"
    calls = fake_openai.requests_to("/chat/completions")
    assert len(calls) == 3
    assert calls[1].received_at - calls[0].received_at >= 0.9


def test_5xx_exhausting_retries_is_dependency_unavailable(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Step(status=500), Step(status=502), Step(status=503), Step(content="too late"))
    with pytest.raises(DependencyUnavailable) as info:
        chat([{"role": "user", "content": "hi"}])
    assert info.value.status_code == 503
    assert info.value.dependency == "llm"
    assert len(fake_openai.requests_to("/chat/completions")) == 3  # RETRY_MAX_ATTEMPTS


def test_timeout_is_retried(fake_openai: FakeOpenAI, settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_TIMEOUT_SEC = 0.3
    fake_openai.queue(Step(delay_sec=1.0, content="slow"), Step(content="fast"))
    assert chat([{"role": "user", "content": "hi"}]) == "fast"
    assert len(fake_openai.requests_to("/chat/completions")) == 2


def test_4xx_other_than_429_is_not_retried(fake_openai: FakeOpenAI) -> None:
    import openai

    fake_openai.queue(Step(status=400), Step(content="never"))
    with pytest.raises(openai.BadRequestError):
        chat([{"role": "user", "content": "hi"}])
    assert len(fake_openai.requests_to("/chat/completions")) == 1


def test_structured_output_is_validated(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Step(content='{"answer": "42", "confidence": 0.9}'))
    result = chat_json([{"role": "user", "content": "q"}], Answer)
    assert result == Answer(answer="42", confidence=0.9)
    assert fake_openai.requests_to("/chat/completions")[0].body["response_format"] == {"type": "json_object"}


def test_invalid_structured_output_is_retried_then_rejected(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Step(content="not json at all"), Step(content='{"answer": "x"}'), Step(content="[1, 2"))
    with pytest.raises(LLMInvalidOutput) as info:
        chat_json([{"role": "user", "content": "q"}], Answer)
    assert info.value.status_code == 502
    assert len(fake_openai.requests_to("/chat/completions")) == 3


def test_invalid_then_valid_output_is_accepted(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Step(content="{broken"), Step(content='{"answer": "ok", "confidence": 1}'))
    assert chat_json([{"role": "user", "content": "q"}], Answer).answer == "ok"


def test_malformed_http_body_is_retried_as_invalid_output(fake_openai: FakeOpenAI) -> None:
    fake_openai.queue(Step(body="<html>gateway</html>"), Step(content='{"answer": "ok", "confidence": 0.5}'))
    assert chat_json([{"role": "user", "content": "q"}], Answer).answer == "ok"


def test_azure_provider_uses_deployment_urls(fake_openai: FakeOpenAI, settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_PROVIDER = "azure"
    settings.LLM_BASE_URL = fake_openai.root_url
    settings.LLM_MODEL = "my-gpt-deployment"
    fake_openai.queue(Step(content="from azure"))
    assert chat([{"role": "user", "content": "hi"}]) == "from azure"
    request = fake_openai.requests[-1]
    assert request.path.startswith("/openai/deployments/my-gpt-deployment/chat/completions")
    assert "api-version=" in request.path
    assert request.headers["api-key"] == "sk-test"


def test_no_llm_configured_is_a_clear_error(settings) -> None:  # type: ignore[no-untyped-def]
    settings.LLM_PROVIDER = "none"
    with pytest.raises(LLMNotConfigured):
        make_client()
