import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from core.auth.secrets import write_private
from core.models import ApiKey, Project
from core.services import api_key_create, api_key_revoke, project_create
from knowledge.dto import DocumentInput
from knowledge.services import documents_submit

DEMO_PROJECT_NAME = "demo"
DEMO_KEY_NAME = "make run"
CREDENTIALS_FILE = "credentials"
SAMPLE_CORPUS = Path(__file__).resolve().parents[2] / "sample_corpus"


class Command(BaseCommand):
    help = (
        "make run: ensure the demo project, revoke the previous demo key, issue a fresh one and an admin "
        "password into VAR_DIR/credentials (0600), print URLs."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")

    def handle(self, *args: Any, **options: Any) -> None:
        existing = Project.objects.filter(name=DEMO_PROJECT_NAME).order_by("created_at").first()
        project_id = existing.id if existing else project_create(name=DEMO_PROJECT_NAME).id
        sample = self._ingest_sample_corpus(project_id)
        # the key of the previous start stops working: one live demo key at a time
        for old in ApiKey.objects.filter(project_id=project_id, name=DEMO_KEY_NAME, revoked_at__isnull=True):
            api_key_revoke(key_id=old.pk)
        issued = api_key_create(project_id=project_id, name=DEMO_KEY_NAME, scopes=["read", "write", "admin"])

        user_model = get_user_model()
        password = settings.ADMIN_PASSWORD or secrets.token_urlsafe(12)
        admin, _ = user_model.objects.get_or_create(username="admin", defaults={"email": "admin@localhost"})
        admin.is_staff = admin.is_superuser = True
        admin.set_password(password)
        admin.save()

        base = options["base_url"].rstrip("/")
        credentials = settings.VAR_DIR / CREDENTIALS_FILE
        write_private(
            credentials,
            "\n".join(
                [
                    "# written by `make run` at each start; readable by its owner only",
                    "ADMIN_USER=admin",
                    f"ADMIN_PASSWORD={password}",
                    f"DEMO_PROJECT_ID={project_id}",
                    f"DEMO_API_KEY={issued.key}",
                    "",
                ]
            ),
        )
        # Secrets go to the 0600 file, never to the log.
        lines = [
            "",
            "Knowledge platform is up",
            f"  API            {base}/api/v1/",
            f"  API docs       {base}/api/docs/",
            f"  health         {base}/healthz",
            f"  admin          {base}/admin/   (user admin)",
            f"  DRIFT page     {base}/ui/drift/",
            *(
                [f"  MCP            {base}{settings.MCP_PATH}   (streamable HTTP, Bearer API key)"]
                if settings.MCP_ENABLED
                else []
            ),
            f"  progress (ws)  {base.replace('http', 'ws', 1)}/ws/v1/projects/{project_id}/progress/",
            f"  demo project   {project_id}",
            f"  sample corpus  {sample}",
            f"  credentials    {credentials}   (admin password and demo API key kp_{issued.prefix}_…)",
            "",
            f'  try: . {credentials} && curl -H "Authorization: Bearer $DEMO_API_KEY" '
            f"{base}/api/v1/projects/{project_id}",
            "",
        ]
        self.stdout.write("\n".join(lines))

    def _ingest_sample_corpus(self, project_id: str) -> str:
        """Queue the sample corpus (knowledge/sample_corpus); unchanged files are a no-op."""
        files = sorted(SAMPLE_CORPUS.glob("*.md"))
        documents = [
            DocumentInput(
                title=path.read_text().splitlines()[0].lstrip("# ").strip(),
                text=path.read_text(),
                source_path=f"sample/{path.name}",
                mime_type="text/markdown",
            )
            for path in files
        ]
        result = documents_submit(project_id=project_id, documents=documents)
        queued = sum(1 for d in result.documents if d.status == "queued")
        return f"{len(files)} documents, {queued} queued for ingestion (job {result.job_id})"
