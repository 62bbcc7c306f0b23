from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import PlatformError
from core.services import api_key_create


class Command(BaseCommand):
    help = "Create an API key for a project and print it (shown this once only)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", required=True, help="project id")
        parser.add_argument("--name", required=True)
        parser.add_argument("--scopes", default="read", help="comma-separated: read,write,admin")
        parser.add_argument("--rate-limit", default="", help="e.g. 100/min; default API_THROTTLE_RATE")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            issued = api_key_create(
                project_id=options["project"],
                name=options["name"],
                scopes=options["scopes"].split(","),
                rate_limit=options["rate_limit"],
            )
        except PlatformError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(issued.key)
