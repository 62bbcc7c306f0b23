"""ASGI entry point: Django (HTTP, admin, DRF) and Channels (websockets)."""

import os

import django
from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)

from core.runtime.tracing import tracing_start  # noqa: E402

# before the handler loads the middleware: Django's tracing adds its own (TRACING_ENABLED; no-op if off)
tracing_start("web")
wsgi_app = get_wsgi_application()

from django.conf import settings  # noqa: E402

from core.runtime.http_threads import WsgiOnThreads  # noqa: E402

# HTTP: Django's WSGI handler on a pool of threads (core/runtime/http_threads.py says why not Django's
# ASGI handler); websockets: Channels.
http_app = WsgiOnThreads(wsgi_app, threads=settings.WEB_THREADS, max_body_bytes=settings.API_MAX_BODY_BYTES)

if settings.MCP_ENABLED:
    from mcp_server.asgi import McpHttp, PathRouter

    # /mcp: the MCP server (streamable HTTP); its tools run the REST views on the same thread pool
    http_app = PathRouter(http_app, McpHttp(http_app.pool), settings.MCP_PATH)

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from core.auth.websocket import OriginCheck  # noqa: E402
from core.progress.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": http_app,
        "websocket": OriginCheck(URLRouter(websocket_urlpatterns)),
    }
)

from core.runtime import heap  # noqa: E402
from core.runtime.warmup import warm_up_in_background  # noqa: E402

# Django, DRF, Channels and the driver are loaded: keep them out of garbage collection, then warm up
# in the background: the embedding model (it freezes its own objects once loaded; core/runtime/heap.py)
# and the hot queries (core/runtime/warmup.py)
heap.freeze_long_lived()
if settings.EMBEDDINGS_WARM_AT_START:
    warm_up_in_background()
