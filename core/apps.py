from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    verbose_name = "Platform core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # registered on import, once the app registry is ready: OpenAPI extensions, model signals
        from core import graph  # noqa: F401
        from core.api import schema  # noqa: F401
        from core.auth import signals  # noqa: F401

        # neomodel gets the platform's one shared driver (created lazily, no I/O here).
        graph.attach_neomodel()
