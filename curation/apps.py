from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "curation"
    verbose_name = "Curation: privacy, retention and erasure"
    default_auto_field = "django.db.models.BigAutoField"
