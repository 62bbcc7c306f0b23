from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Platform core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core import graph, schema, signals  # noqa: F401  (OpenAPI extensions, model signals)

        # neomodel gets the platform's one shared driver (created lazily, no I/O here).
        graph.attach_neomodel()
