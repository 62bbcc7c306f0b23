"""A real HTTP server on 127.0.0.1 that answers from a script of (status, headers, body) steps and
records what it was asked: for testing a client's retry and error handling over real sockets."""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class ScriptedHttp:
    def __init__(self) -> None:
        self.script: deque[tuple[int, dict[str, str], Any]] = deque()
        self.seen: list[tuple[str, str, float]] = []  # method, path, monotonic time
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def queue(self, status: int, body: Any = None, **headers: str) -> None:
        self.script.append((status, {k.replace("_", "-"): v for k, v in headers.items()}, body))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # no delayed-ACK stall between headers and body

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                return

            def _answer(self) -> None:
                import time

                length = int(self.headers.get("Content-Length") or 0)
                if length:
                    self.rfile.read(length)
                server.seen.append((self.command, self.path, time.monotonic()))
                status, headers, body = server.script.popleft() if server.script else (200, {}, {})
                data = b"" if status == 204 else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = _answer  # noqa: N815

        return Handler
