from django.urls import path

from core.apis import JobDetailApi, ProjectDetailApi, ProjectListCreateApi

urlpatterns = [
    path("projects", ProjectListCreateApi.as_view(), name="projects"),
    path("projects/<str:project_id>", ProjectDetailApi.as_view(), name="project-detail"),
    path("jobs/<str:job_id>", JobDetailApi.as_view(), name="job-detail"),
]
