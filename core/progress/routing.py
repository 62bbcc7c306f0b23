from typing import Any

from django.urls import path, re_path

from core.progress.consumers import ProgressConsumer

CLOSE_NOT_FOUND = 4404


async def unknown_path(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Every other websocket path: the handshake is refused (the server answers HTTP 403), with close
    code 4404 for clients that see it. Without this route Channels' router raises for a path it does
    not know, and the server answers the handshake with a 500."""
    message = await receive()
    if message["type"] == "websocket.connect":
        await send({"type": "websocket.close", "code": CLOSE_NOT_FOUND})


websocket_urlpatterns = [
    path("ws/v1/projects/<str:project_id>/progress/", ProgressConsumer.as_asgi()),
    re_path(r"", unknown_path),
]
