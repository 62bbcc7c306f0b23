from django.urls import path

from core.apis import ProjectCreateApi, ProjectDetailApi

urlpatterns = [
    path("projects", ProjectCreateApi.as_view(), name="project-create"),
    path("projects/<str:project_id>", ProjectDetailApi.as_view(), name="project-detail"),
]
