"""An ADK model that talks to an OpenAI-compatible server through the `openai` package (in tests, the
local FakeOpenAI server): ADK's `BaseLlm` is its documented extension point for other providers."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.genai import types
from openai import AsyncOpenAI


def _text(content: types.Content | str | None) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(p.text for p in content.parts or [] if p.text)


class OpenAIChatModel(BaseLlm):
    base_url: str
    api_key: str = "test-key"

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        messages: list[dict[str, Any]] = []
        system = llm_request.config.system_instruction if llm_request.config else None
        if system:
            messages.append({"role": "system", "content": _text(system)})  # type: ignore[arg-type]
        for content in llm_request.contents:
            text = _text(content)
            if text:
                messages.append({"role": "assistant" if content.role == "model" else "user", "content": text})
        client = AsyncOpenAI(base_url=self.base_url, api_key=self.api_key)
        try:
            answer = await client.chat.completions.create(model=self.model, messages=messages)  # type: ignore[arg-type]
        finally:
            await client.close()
        reply = answer.choices[0].message.content or ""
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=reply)]))
