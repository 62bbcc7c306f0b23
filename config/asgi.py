"""ASGI entry point: Django (HTTP, admin, DRF) and Channels (websockets)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from core.routing import websocket_urlpatterns  # noqa: E402
from core.ws_auth import OriginCheck  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": OriginCheck(URLRouter(websocket_urlpatterns)),
    }
)
