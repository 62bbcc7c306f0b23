"""HTTP under the ASGI server: Django's WSGI handler on a fixed pool of threads.

Every HTTP view of the platform is synchronous (DRF). Django's own ASGI handler runs each request on
a thread created for that request and crosses between the event loop and threads several times
(around the middleware, the view, the signals and the response); a new thread also means a new
database connection per request. Measured on a 2-core machine: ~9 ms for an authenticated GET that
takes ~2.5 ms inside Django. Here the ASGI server (daphne, which also serves the websockets) reads
the request body, one pool thread runs the whole WSGI request, and the loop sends the response:
one hand-over each way, and each thread keeps its database connection (DB_CONN_MAX_AGE).

Bodies are read up to API_MAX_BODY_BYTES; a longer one is not read on, and Django answers 413
(core.api.middleware.BodySizeLimitMiddleware) from its declared or counted length.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from tempfile import SpooledTemporaryFile
from typing import Any

from asgiref.wsgi import WsgiToAsgiInstance

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Scope = dict[str, Any]

SPOOL_IN_MEMORY_BYTES = 1024 * 1024  # larger request bodies spill to a temporary file


class WsgiOnThreads:
    """An ASGI application for `http` scopes that runs `wsgi_app` on `threads` worker threads."""

    def __init__(self, wsgi_app: WsgiApp, *, threads: int, max_body_bytes: int) -> None:
        self.wsgi_app = wsgi_app
        self.max_body_bytes = max_body_bytes
        self.pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="http")

    async def __call__(self, scope: Scope, receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] != "http":
            raise ValueError(f"WsgiOnThreads serves http scopes, not {scope['type']!r}")
        with SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY_BYTES) as body:
            size = 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    return  # the client went away before sending its whole request
                chunk = message.get("body", b"")
                if size <= self.max_body_bytes:  # past the limit: counted, not kept
                    body.write(chunk)
                size += len(chunk)
                if not message.get("more_body"):
                    break
            body.seek(0)
            loop = asyncio.get_running_loop()
            status, headers, content = await loop.run_in_executor(self.pool, self._run, scope, body, size)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def _run(self, scope: Scope, body: Any, size: int) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """The whole WSGI request on this pool thread; the response is collected here (the
        platform's responses are JSON documents and small static files)."""
        adapter = WsgiToAsgiInstance(self.wsgi_app)
        adapter.scope = scope  # build_environ reads the scope from the instance
        try:
            environ = adapter.build_environ(scope, body)
        except ValueError:  # too many repeats of one header
            return 400, [(b"content-type", b"text/plain")], b"Bad Request: too many duplicate headers"
        if "CONTENT_LENGTH" not in environ or size > self.max_body_bytes:
            environ["CONTENT_LENGTH"] = str(size)  # a chunked body, or one too large to read on
        started: dict[str, Any] = {}

        def start_response(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            started["status"] = int(status.split(" ", 1)[0])
            started["headers"] = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in headers]
            return lambda data: None  # the legacy write() callable; Django never uses it

        result = self.wsgi_app(environ, start_response)
        try:
            content = b"".join(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()  # Django's request_finished: database connections are returned here
        return started["status"], started["headers"], content
