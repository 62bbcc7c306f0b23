from django.apps import AppConfig


class SessionsGraphConfig(AppConfig):
    name = "sessions_graph"
    default_auto_field = "django.db.models.BigAutoField"
