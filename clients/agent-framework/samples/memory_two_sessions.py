"""An Agent Framework agent that remembers a user across sessions through the knowledge platform.

Run it against `make run`'s platform (it prints the demo project id and an API key):

    export KNOWLEDGE_PLATFORM_URL=http://127.0.0.1:8000
    export KNOWLEDGE_PLATFORM_API_KEY=kp_...
    export KNOWLEDGE_PLATFORM_PROJECT_ID=<demo project id>
    python clients/agent-framework/samples/memory_two_sessions.py

Without `OPENAI_BASE_URL` the chat model is `local_chat_model.py` (offline and deterministic: it
quotes what the provider put into the context); with it, any OpenAI-compatible chat model. Ana tells
the agent where she lives in one session and asks in a second one; Bruno asks the same question and
must not hear Ana's answer. The script exits with 1 if Ana is not remembered or Bruno sees her memory.
Each run uses its own `application_id` and erases its memories at the end (`--keep` keeps them).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
import uuid
from pathlib import Path

from agent_framework import Agent
from agent_framework.openai import OpenAIChatCompletionClient
from agent_framework_knowledge import KnowledgeContextProvider
from knowledge_platform_client import AsyncPlatformClient, MemoryClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from local_chat_model import LocalChatModel  # noqa: E402 - the sample's own directory

INSTRUCTIONS = "You are a friendly assistant. Use the context you are given about the user."
STATEMENT = "Hi, I'm Ana. I live in Lisbon and I play the cello."
QUESTION = "Where do I live, and which instrument do I play?"


def _agent(chat: OpenAIChatCompletionClient, provider: KnowledgeContextProvider) -> Agent:
    return Agent(client=chat, instructions=INSTRUCTIONS, context_providers=[provider], name="sample")


async def main(keep: bool) -> int:
    app = f"maf-sample-{uuid.uuid4().hex[:8]}"
    local = None if os.environ.get("OPENAI_BASE_URL") else LocalChatModel()
    chat = OpenAIChatCompletionClient(
        model=os.environ.get("OPENAI_MODEL", "local"),
        api_key=os.environ.get("OPENAI_API_KEY", "not-needed-offline"),
        base_url=os.environ.get("OPENAI_BASE_URL") or (local.base_url if local else None),
    )
    ana = KnowledgeContextProvider(memory_enabled=True, application_id=app, user_id="ana")
    bruno = KnowledgeContextProvider(memory_enabled=True, application_id=app, user_id="bruno")
    try:
        async with ana, bruno:
            agent_ana, agent_bruno = _agent(chat, ana), _agent(chat, bruno)

            first = agent_ana.create_session()
            print(f"[Ana, session 1] {STATEMENT}")
            print(f"  agent: {(await agent_ana.run(STATEMENT, session=first)).text}")

            second = agent_ana.create_session()  # a new conversation: no shared chat history
            print(f"[Ana, session 2] {QUESTION}")
            recalled = (await agent_ana.run(QUESTION, session=second)).text
            print(f"  agent: {recalled}")

            print(f"[Bruno, session 1] {QUESTION}")
            other = (await agent_bruno.run(QUESTION, session=agent_bruno.create_session())).text
            print(f"  agent: {other}")

            if not keep:
                async with AsyncPlatformClient(ana.settings) as client:
                    for user in ("ana", "bruno"):
                        await MemoryClient(client).forget({"application_id": app, "user_id": user})
    finally:
        if local is not None:
            local.close()
    remembered = "Lisbon" in recalled
    leaked = "Lisbon" in other
    print(f"Ana remembered across sessions: {remembered}; Bruno saw Ana's memory: {leaked}")
    return 0 if remembered and not leaked else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", action="store_true", help="keep the sample's memories afterwards")
    logging.basicConfig(level=logging.WARNING)
    sys.exit(asyncio.run(main(parser.parse_args().keep)))
