from typing import Any

from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = (
        "Start-up steps of the web process in one interpreter: wait for Neo4j and Redis, migrate SQL, "
        "apply the graph schema, collect static files and (with --demo) bootstrap the demo project."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--timeout", type=float, default=240.0)
        parser.add_argument(
            "--demo", action="store_true", help="issue the demo project, key and admin password"
        )
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        call_command("wait_for_services", timeout=options["timeout"])
        call_command("migrate", interactive=False, verbosity=0)
        call_command("graph_schema", verbosity=0, stdout=_Null())
        call_command("collectstatic", interactive=False, verbosity=0)
        if options["demo"]:
            call_command("bootstrap_demo", base_url=options["base_url"])


class _Null:
    def write(self, _text: str) -> None:
        return None

    def flush(self) -> None:
        return None
