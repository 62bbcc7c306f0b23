"""Websocket consumers of the core app."""

from __future__ import annotations

from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from core.progress import project_group
from core.ws_auth import SUBPROTOCOL, key_for_project, presented_key

CLOSE_UNAUTHORISED = 4401


class ProgressConsumer(AsyncJsonWebsocketConsumer):
    """Relays a project's progress events; only a valid key of that project may listen."""

    group: str | None = None

    async def connect(self) -> None:
        project_id = self.scope["url_route"]["kwargs"]["project_id"]
        raw_key, via_subprotocol = presented_key(self.scope)
        key = await database_sync_to_async(key_for_project)(raw_key, project_id)
        if key is None:
            # Closing before accept refuses the handshake (HTTP 403).
            await self.close(code=CLOSE_UNAUTHORISED)
            return
        self.group = project_group(project_id)
        await self.channel_layer.group_add(self.group, self.channel_name)
        await self.accept(subprotocol=SUBPROTOCOL if via_subprotocol else None)

    async def disconnect(self, code: int) -> None:
        if self.group:
            await self.channel_layer.group_discard(self.group, self.channel_name)

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # The stream is one-way; a client message is answered with a hint, nothing else.
        await self.send_json({"error": {"code": "read_only", "message": "this socket only sends events"}})

    async def progress_event(self, message: dict[str, Any]) -> None:
        await self.send_json(message["event"])
