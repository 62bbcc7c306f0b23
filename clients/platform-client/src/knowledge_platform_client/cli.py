"""`knowledge-platform chat`: talk to a project's knowledge from a terminal (seed 003's CLI flags).

    knowledge-platform chat --project P --user U [--rag] [--persist-chat] [--conversation-id ID]

The platform's address and an API key come from the environment (`KNOWLEDGE_PLATFORM_URL`, default
http://localhost:8000, and `KNOWLEDGE_PLATFORM_API_KEY`). Each line typed is one turn; the answer is
printed with its numbered references; `/quit` (or end of input) leaves. With `--persist-chat` the
conversation is stored and its id printed, so a later session can continue it."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from typing import TextIO

from knowledge_platform_client.conversations import ConversationsClient
from knowledge_platform_client.errors import PlatformError
from knowledge_platform_client.http import AsyncPlatformClient
from knowledge_platform_client.settings import ConfigurationError, PlatformSettings, env_name

DEFAULT_URL = "http://localhost:8000"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="knowledge-platform", description="The knowledge platform's CLI.")
    commands = parser.add_subparsers(dest="command", required=True)
    chat = commands.add_parser("chat", help="chat with a project's knowledge")
    chat.add_argument("--project", required=True, help="the project id")
    chat.add_argument("--user", required=True, help="who is chatting (the conversation's user id)")
    chat.add_argument("--rag", action="store_true", help="answer from the project's documents and past chats")
    chat.add_argument(
        "--persist-chat", action="store_true", help="store the conversation in the knowledge graph"
    )
    chat.add_argument("--conversation-id", help="continue this conversation")
    chat.add_argument(
        "--mode", choices=["llm", "extractive"], help="how to answer (default: llm when the platform has one)"
    )
    chat.add_argument("--top-k", type=int, default=5, help="documents to draw on (1-20)")
    return parser


async def _chat(args: argparse.Namespace, settings: PlatformSettings, stdin: TextIO, stdout: TextIO) -> int:
    conversation_id = args.conversation_id
    async with AsyncPlatformClient(settings) as client:
        conversations = ConversationsClient(client)
        if conversation_id:
            print(f"continuing conversation {conversation_id}", file=stdout)
        print("type a message; /quit leaves", file=stdout)
        while True:
            print("you> ", end="", file=stdout, flush=True)
            line = stdin.readline()
            if not line or line.strip() == "/quit":
                return 0
            if not line.strip():
                continue
            try:
                turn = await conversations.chat(
                    line.strip(),
                    user_id=args.user,
                    conversation_id=conversation_id,
                    rag=args.rag,
                    persist=args.persist_chat,
                    mode=args.mode,
                    top_k=args.top_k,
                )
            except PlatformError as exc:
                print(f"error: {exc}", file=stdout)
                conversation_id = conversation_id or (exc.details or {}).get("conversation_id")
                continue
            if turn.conversation_id and turn.conversation_id != conversation_id:
                conversation_id = turn.conversation_id
                print(f"(conversation {conversation_id})", file=stdout)
            print(f"assistant> {turn.answer_with_references}", file=stdout, flush=True)


def main(argv: list[str] | None = None, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = PlatformSettings.from_env(
            url=os.environ.get(env_name("url"), DEFAULT_URL), project_id=args.project
        )
    except ConfigurationError as exc:
        print(f"knowledge-platform: {exc}", file=sys.stderr)
        return 2
    return asyncio.run(_chat(args, settings, stdin or sys.stdin, stdout or sys.stdout))


if __name__ == "__main__":
    raise SystemExit(main())
