from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import PlatformError
from core.services import project_create


class Command(BaseCommand):
    help = "Create a project (SQL row + graph node) and print its id."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--name", required=True)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            project = project_create(name=options["name"])
        except PlatformError as exc:
            raise CommandError(exc.message) from exc
        self.stdout.write(project.id)
