from django.urls import path

from core.apis import JobDetailApi, ProjectCreateApi, ProjectDetailApi

urlpatterns = [
    path("projects", ProjectCreateApi.as_view(), name="project-create"),
    path("projects/<str:project_id>", ProjectDetailApi.as_view(), name="project-detail"),
    path("jobs/<str:job_id>", JobDetailApi.as_view(), name="job-detail"),
]
