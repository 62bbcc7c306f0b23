from django.conf import settings
from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from core.apis import HealthzApi
from core.metrics import metrics_view
from retrieval.drift.apis import RetrieveApi
from retrieval.ui import drift_page

handler400 = "core.errors.handler400"
handler403 = "core.errors.handler403"
handler404 = "core.errors.handler404"
handler500 = "core.errors.handler500"

urlpatterns = [
    path("healthz", HealthzApi.as_view(), name="healthz"),
    *([path("metrics", metrics_view, name="metrics")] if settings.METRICS_ENABLED else []),
    path("retrieve", RetrieveApi.as_view(), name="retrieve"),
    path("ui/drift/", drift_page, name="ui-drift"),
    path("admin/", admin.site.urls),
    path("api/schema/", SpectacularAPIView.as_view(), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="api-docs"),
    # portability before core: core's projects/<id> would take "<id>:export" for a project id
    path("api/v1/", include("portability.urls")),
    path("api/v1/", include("core.urls")),
    path("api/v1/", include("knowledge.urls")),
    path("api/v1/", include("memory.urls")),
    path("api/v1/", include("retrieval.urls")),
    path("api/v1/", include("sessions_graph.urls")),
    path("api/v1/", include("curation.urls")),
]
