"""Run (or preview) a retention policy now, in this process, and print what it did as JSON. For
operators without Celery beat (cron), and for the retention benchmark."""

from __future__ import annotations

import json
import time
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from curation import services
from curation.models import PolicyRun, RetentionPolicy


class Command(BaseCommand):
    help = "Run a retention policy now (one run per project of the policy) and print the counts."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--policy", type=int, required=True, help="the policy's id")
        parser.add_argument("--project", help="only this project (policies for every project)")
        parser.add_argument("--dry-run", action="store_true", help="preview: count, write nothing")

    def handle(self, *args: Any, **options: Any) -> None:
        policy = RetentionPolicy.objects.filter(pk=options["policy"]).first()
        if policy is None:
            raise CommandError(f"no retention policy {options['policy']}")
        actor = "cli:retention_run"
        if options["dry_run"]:
            previews = services.policy_preview(
                policy_id=policy.pk, project_id=options["project"], actor=actor
            )
            self.stdout.write(json.dumps(previews))
            return
        results = []
        for run_id in services.policy_runs_create(
            policy_id=policy.pk, actor=actor, project_id=options["project"]
        ):
            started = time.perf_counter()
            run = services.policy_run_execute(run_id=run_id)
            results.append(
                {
                    "run_id": run.pk,
                    "project_id": run.project_id,
                    "status": run.status,
                    "counts": run.counts,
                    "took_s": round(time.perf_counter() - started, 2),
                }
            )
        self.stdout.write(json.dumps(results))
        if any(r["status"] != PolicyRun.Status.SUCCEEDED for r in results):
            raise CommandError("a run did not succeed")
