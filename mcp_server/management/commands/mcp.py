"""`manage.py mcp --stdio`: the MCP server over standard input and output, for desktop hosts."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from mcp.server.stdio import stdio_server

from mcp_server.dispatch import Caller, key_project
from mcp_server.server import PlatformMcp


class Command(BaseCommand):
    help = (
        "Serve the MCP tools and resources over stdio (the host starts this command). The key comes "
        "from --api-key or MCP_API_KEY; its project and scopes apply to every call."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--stdio", action="store_true", required=True, help="serve over stdin/stdout")
        parser.add_argument("--api-key", default=None, help="the API key (default: MCP_API_KEY)")

    def handle(self, *args: Any, **options: Any) -> None:
        key = options["api_key"] or settings.MCP_API_KEY
        if not key:
            raise CommandError("no API key: pass --api-key or set MCP_API_KEY")
        known = key_project(key)
        if not known.ok:
            raise CommandError(f"the API key was refused ({known.status}): it is invalid, unknown or revoked")
        caller = Caller(api_key=key, project_id=known.body["id"])
        # REST calls run on threads of their own (each keeps its database connection), as in the web process
        executor = ThreadPoolExecutor(max_workers=4, thread_name_prefix="mcp")
        server = PlatformMcp(lambda ctx: caller, executor).server()

        async def serve() -> None:
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())

        try:
            anyio.run(serve)
        finally:
            executor.shutdown(wait=False, cancel_futures=True)
