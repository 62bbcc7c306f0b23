from django.apps import AppConfig


class MemoryConfig(AppConfig):
    name = "memory"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # conversation-aware search lives here (memory owns conversations) and is offered to
        # retrieval's POST /search, which sits below memory and cannot import it
        from memory.conversation_search import conversation_search
        from retrieval.conversation import conversation_search_register

        conversation_search_register(conversation_search)

        from memory import warmup

        warmup.register()
