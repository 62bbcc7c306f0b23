from django.apps import AppConfig


class PortabilityConfig(AppConfig):
    name = "portability"
    verbose_name = "Export and import"
    default_auto_field = "django.db.models.BigAutoField"
