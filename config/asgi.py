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

from core import heap  # noqa: E402
from core.embeddings.base import warm_in_background  # noqa: E402

# Django, DRF, Channels and the driver are loaded: keep them out of garbage collection, then load
# the embedding model in the background (it freezes its own objects once loaded; core/heap.py)
heap.freeze_long_lived()
warm_in_background()
