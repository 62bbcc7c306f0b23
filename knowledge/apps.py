from django.apps import AppConfig


class KnowledgeConfig(AppConfig):
    name = "knowledge"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.runtime.lost_tasks import expected_register
        from knowledge import warmup
        from knowledge.selectors import ingest_batches_expected

        expected_register(ingest_batches_expected)
        warmup.register()
