"""Routes of export and import (mounted under /api/v1/, before core's `projects/<id>`)."""

from django.urls import path

from portability.apis import ProjectExportApi, ProjectExportDownloadApi, ProjectImportApi

urlpatterns = [
    path("projects:import", ProjectImportApi.as_view(), name="project-import"),
    path("projects/<str:project_id>:export", ProjectExportApi.as_view(), name="project-export"),
    path(
        "projects/<str:project_id>/exports/<str:job_id>",
        ProjectExportDownloadApi.as_view(),
        name="project-export-download",
    ),
]
