"""Websocket consumers of the core app."""

from __future__ import annotations

import time
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer
from django.conf import settings

from core.auth.websocket import SUBPROTOCOL, key_for_project, key_group, key_still_valid, presented_key
from core.progress.events import project_group

CLOSE_UNAUTHORISED = 4401


class ProgressConsumer(AsyncJsonWebsocketConsumer):
    """Relays a project's progress events; only a valid key of that project may listen.

    The socket also joins its key's group: revoking or deleting the key closes it at once
    (core.auth.signals). Should that message be lost, the key is checked again before an event is sent
    when the last check is older than WS_KEY_RECHECK_SEC.
    """

    groups_joined: tuple[str, ...] = ()
    key_pk: int | None = None
    checked_at: float = 0.0

    async def connect(self) -> None:
        project_id = self.scope["url_route"]["kwargs"]["project_id"]
        raw_key, via_subprotocol = presented_key(self.scope)
        key = await database_sync_to_async(key_for_project)(raw_key, project_id)
        if key is None:
            # Closing before accept refuses the handshake (HTTP 403).
            await self.close(code=CLOSE_UNAUTHORISED)
            return
        self.key_pk, self.checked_at = key.pk, time.monotonic()
        self.groups_joined = (project_group(project_id), key_group(key.prefix))
        for group in self.groups_joined:
            await self.channel_layer.group_add(group, self.channel_name)
        await self.accept(subprotocol=SUBPROTOCOL if via_subprotocol else None)

    async def disconnect(self, code: int) -> None:
        for group in self.groups_joined:
            await self.channel_layer.group_discard(group, self.channel_name)
        self.groups_joined = ()

    async def receive_json(self, content: Any, **kwargs: Any) -> None:
        # The stream is one-way; a client message is answered with a hint, nothing else.
        await self.send_json({"error": {"code": "read_only", "message": "this socket only sends events"}})

    async def progress_event(self, message: dict[str, Any]) -> None:
        if not self.groups_joined:
            return
        if time.monotonic() - self.checked_at > settings.WS_KEY_RECHECK_SEC:
            if not await database_sync_to_async(key_still_valid)(self.key_pk):
                await self._close_revoked()
                return
            self.checked_at = time.monotonic()
        await self.send_json(message["event"])

    async def key_revoked(self, message: dict[str, Any]) -> None:
        await self._close_revoked()

    async def _close_revoked(self) -> None:
        await self.disconnect(CLOSE_UNAUTHORISED)
        await self.close(code=CLOSE_UNAUTHORISED)
