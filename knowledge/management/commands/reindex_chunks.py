from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from core.errors import Conflict, NotFound
from core.models import Project
from knowledge.reindex import ReindexResult, chunks_reindex


class Command(BaseCommand):
    help = (
        "Rebuild every chunk's search text (document title, heading path, text), its embedding and the "
        "project's own fulltext index (recreated when its analyzer is not RETRIEVAL_FULLTEXT_ANALYZER)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--project", action="append", help="a project id (repeatable); default: all")
        parser.add_argument(
            "--no-embeddings",
            action="store_true",
            help="keep the stored embeddings (search text and index only)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        ids = options["project"] or list(Project.objects.order_by("created_at").values_list("id", flat=True))
        for project_id in ids:
            self.stdout.write(f"project {project_id}")

            def report(done: ReindexResult) -> None:
                self.stdout.write(f"  {done.documents} document(s), {done.chunks} chunk(s)")

            try:
                result = chunks_reindex(
                    project_id=str(project_id), embed=not options["no_embeddings"], progress=report
                )
            except (NotFound, Conflict) as exc:
                raise CommandError(f"project {project_id}: {exc}") from exc
            recreated = " (fulltext index recreated)" if result.index_recreated else ""
            done = f"project {project_id}: {result.documents} document(s), {result.chunks} chunk(s)"
            self.stdout.write(self.style.SUCCESS(done + recreated))
