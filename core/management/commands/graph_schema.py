from typing import Any

from django.core.management.base import BaseCommand

from core.graph.schema import apply_schema


class Command(BaseCommand):
    help = "Create all Neo4j constraints and indexes (idempotent)."

    def handle(self, *args: Any, **options: Any) -> None:
        statements = apply_schema()
        for statement in statements:
            self.stdout.write(f"  {statement}")
        self.stdout.write(self.style.SUCCESS(f"graph schema ready: {len(statements)} constraints/indexes"))
