"""Conversations of one project: chat turns (seed 003's agent loop) and what a conversation referenced."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from knowledge_platform_client._models import ApiModel
from knowledge_platform_client.http import AsyncPlatformClient

AnswerMode = Literal["llm", "extractive"]


class ChatReference(ApiModel):
    n: int
    document_id: str
    title: str | None = None
    author: str | None = None
    updated_at: str | None = None
    source_path: str | None = None


class ChatTurn(ApiModel):
    turn_id: str
    conversation_id: str | None = None
    message_id: str | None = None
    reply_id: str | None = None
    answer: str
    references: list[ChatReference] = Field(default_factory=list)
    answer_with_references: str
    mode: str
    timings_ms: dict[str, float] = Field(default_factory=dict)


class ConversationsClient:
    """Calls under `/projects/{project}/conversations`."""

    def __init__(self, client: AsyncPlatformClient) -> None:
        self.client = client

    async def chat(
        self,
        message: str,
        *,
        user_id: str,
        conversation_id: str | None = None,
        rag: bool = True,
        persist: bool = True,
        mode: AnswerMode | None = None,
        top_k: int = 5,
    ) -> ChatTurn:
        """One turn. Not retried on a 429 or 5xx answer: the platform may already have stored the
        question (a failed turn's error names the stored ids); a refused connection is retried."""
        body: dict[str, Any] = {"message": message, "user_id": user_id, "rag": rag, "persist": persist}
        body.update({k: v for k, v in {"conversation_id": conversation_id, "mode": mode}.items() if v})
        body["top_k"] = top_k
        data = await self.client.request(
            "POST", self.client.project_path("conversations:chat"), json=body, retry_statuses=False
        )
        return ChatTurn.model_validate(data)

    async def references(self, conversation_id: str, *, user_id: str | None = None) -> list[dict[str, Any]]:
        """The documents the conversation's messages referenced."""
        data = await self.client.request(
            "GET",
            self.client.project_path("conversations", conversation_id, "references"),
            params={"user_id": user_id},
        )
        return list(data["items"])
