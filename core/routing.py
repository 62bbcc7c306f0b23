from django.urls import path

from core.consumers import ProgressConsumer

websocket_urlpatterns = [
    path("ws/v1/projects/<str:project_id>/progress/", ProgressConsumer.as_asgi()),
]
