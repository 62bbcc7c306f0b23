"""A tiny OpenAI-compatible chat model for running the sample offline.

It is deterministic and transparent, not intelligent: a statement is acknowledged; a question is
answered by quoting what the user said in earlier conversations (the `## Memories` blocks the
provider put into the context), or else the best knowledge passage. Point the sample at a real
model with `OPENAI_BASE_URL`, `OPENAI_API_KEY` and `OPENAI_MODEL` instead.
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_HEAD = re.compile(r"^\[Score: [0-9.]+\](?P<fields>.*)$")


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return " ".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return str(content or "")


def _blocks(section: str) -> list[tuple[str, str]]:
    """(header fields, text) of each `[Score: …] [key: value]` block of a context section."""
    found: list[tuple[str, str]] = []
    for raw in section.strip().split("\n\n"):
        lines = raw.strip().splitlines()
        match = _HEAD.match(lines[0]) if lines else None
        if match:
            found.append((match.group("fields"), " ".join(lines[1:]).strip()))
    return found


def reply(messages: list[dict[str, Any]]) -> str:
    texts = [_text(m) for m in messages]
    context = next((t for t in texts if "## Memories" in t or "## Knowledge" in t), "")
    question = next(
        (_text(m) for m in reversed(messages) if m.get("role") == "user" and _text(m) != context), ""
    )
    if "?" not in question:
        return "Thanks, I'll remember that."
    memories = context.split("## Memories", 1)[1] if "## Memories" in context else ""
    said = [text for fields, text in _blocks(memories) if "[role: user]" in fields and "?" not in text]
    if said:
        return "From our earlier conversations: " + " ".join(dict.fromkeys(said))
    knowledge = (
        context.split("## Knowledge", 1)[1].split("## Memories", 1)[0] if "## Knowledge" in context else ""
    )
    passages = _blocks(knowledge)
    if passages:
        return "From the knowledge base: " + passages[0][1][:300]
    return "I don't know anything about that yet."


class LocalChatModel:
    """`/v1/chat/completions` on 127.0.0.1 (a free port), served from a background thread."""

    def __init__(self) -> None:
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet
        return

    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": "only chat completions here"}})
            return
        content = reply(body.get("messages") or [])
        self._send(
            200,
            {
                "id": "chatcmpl-local",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body.get("model", "local"),
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": content},
                    }
                ],
                "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
            },
        )

    def _send(self, status: int, payload: Any) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
