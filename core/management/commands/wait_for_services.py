import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core import graph
from core.errors import DependencyUnavailable
from core.runtime.redis_client import get_redis


class Command(BaseCommand):
    help = "Wait until Neo4j and Redis answer (used by the start scripts)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--timeout", type=float, default=180.0)

    def handle(self, *args: Any, **options: Any) -> None:
        deadline = time.monotonic() + options["timeout"]
        pending = {"neo4j", "redis"}
        last_error = ""
        while pending and time.monotonic() < deadline:
            for name in sorted(pending):
                try:
                    graph.ping() if name == "neo4j" else get_redis().ping()
                    pending.discard(name)
                except (DependencyUnavailable, OSError) as exc:
                    last_error = f"{name}: {exc}"
                except Exception as exc:  # noqa: BLE001 - keep waiting on any client error
                    last_error = f"{name}: {exc.__class__.__name__}: {exc}"
            if pending:
                time.sleep(0.5)
        if pending:
            raise CommandError(f"still waiting for {', '.join(sorted(pending))}: {last_error}")
        self.stdout.write("neo4j and redis are up")
