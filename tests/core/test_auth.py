"""API keys, scopes, tenancy and the error envelope."""

import pytest
from django.utils import timezone
from rest_framework.test import APIClient

from core import graph
from core.auth.keys import KEY_EPOCH
from core.models import ApiKey, Project
from core.runtime.redis_client import get_redis
from core.services import api_key_revoke
from tests.conftest import Tenant


def _error(response) -> dict:  # type: ignore[no-untyped-def]
    body = response.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    return body["error"]


def _counts() -> tuple[int, int]:
    return Project.objects.count(), graph.read("MATCH (p:Project) RETURN count(p) AS n")[0]["n"]


@pytest.mark.django_db
def test_missing_key_is_401(tenant_a: Tenant) -> None:
    response = APIClient().get(f"/api/v1/projects/{tenant_a.project.id}")
    assert response.status_code == 401
    assert _error(response)["code"] == "unauthenticated"
    assert response["WWW-Authenticate"].startswith("Bearer")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "header",
    [
        "Bearer kp_00000000_" + "a" * 43,  # well-formed, unknown
        "Bearer not-a-key",
        "Bearer",
        "Bearer a b",
        "Token kp_00000000_" + "a" * 43,  # other scheme: anonymous, so 401
    ],
)
def test_invalid_key_is_401(tenant_a: Tenant, header: str) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=header)
    response = client.get(f"/api/v1/projects/{tenant_a.project.id}")
    assert response.status_code == 401
    assert _error(response)["code"] == "unauthenticated"


@pytest.mark.django_db
def test_wrong_secret_with_real_prefix_is_401(tenant_a: Tenant) -> None:
    prefix = tenant_a.read_key.prefix
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer kp_{prefix}_{'Z' * 43}")
    assert client.get(f"/api/v1/projects/{tenant_a.project.id}").status_code == 401


@pytest.mark.django_db
def test_revoked_key_is_401_on_the_next_request(tenant_a: Tenant) -> None:
    client = tenant_a.client(tenant_a.read_key)
    for _ in range(2):  # the second request uses the row kept by the first
        assert client.get(f"/api/v1/projects/{tenant_a.project.id}").status_code == 200
    api_key_revoke(key_id=tenant_a.read_key.id)
    response = client.get(f"/api/v1/projects/{tenant_a.project.id}")
    assert response.status_code == 401


@pytest.mark.django_db
def test_key_changed_through_the_orm_is_read_again_on_the_next_request(tenant_a: Tenant) -> None:
    client = tenant_a.client(tenant_a.write_key)
    url = f"/api/v1/projects/{tenant_a.project.id}/documents"
    assert client.get(url).status_code == 200
    row = ApiKey.objects.get(pk=tenant_a.write_key.id)
    row.scopes = []  # as the admin's change form saves it
    row.save()
    assert client.get(url).status_code == 403
    row.delete()
    assert client.get(url).status_code == 401


@pytest.mark.django_db
def test_key_row_edited_behind_the_orm_is_read_again_once_the_epoch_changes(tenant_a: Tenant) -> None:
    """A raw UPDATE sets no epoch: the kept row is used until another process's change (simulated
    by setting the epoch in Redis, as any process changing a key does) or AUTH_KEY_CACHE_SEC."""
    client = tenant_a.client(tenant_a.read_key)
    url = f"/api/v1/projects/{tenant_a.project.id}"
    assert client.get(url).status_code == 200
    ApiKey.objects.filter(pk=tenant_a.read_key.id).update(revoked_at=timezone.now())
    assert client.get(url).status_code == 200
    get_redis().set(KEY_EPOCH, "set-by-another-process")
    assert client.get(url).status_code == 401


@pytest.mark.django_db
def test_key_rows_are_not_kept_when_the_cache_is_off(tenant_a: Tenant, settings) -> None:  # type: ignore[no-untyped-def]
    settings.AUTH_KEY_CACHE_SEC = 0
    client = tenant_a.client(tenant_a.read_key)
    url = f"/api/v1/projects/{tenant_a.project.id}"
    assert client.get(url).status_code == 200
    ApiKey.objects.filter(pk=tenant_a.read_key.id).update(revoked_at=timezone.now())
    assert client.get(url).status_code == 401


@pytest.mark.django_db
def test_valid_key_reads_own_project_and_records_use(tenant_a: Tenant) -> None:
    response = tenant_a.client(tenant_a.read_key).get(f"/api/v1/projects/{tenant_a.project.id}")
    assert response.status_code == 200
    assert response.json()["id"] == tenant_a.project.id
    assert response.json()["embedding_dimensions"] == 384
    assert ApiKey.objects.get(pk=tenant_a.read_key.id).last_used_at is not None


@pytest.mark.django_db
def test_key_of_project_a_on_project_b_is_404(tenant_a: Tenant, tenant_b: Tenant) -> None:
    for key in (tenant_a.read_key, tenant_a.admin_key):
        response = tenant_a.client(key).get(f"/api/v1/projects/{tenant_b.project.id}")
        assert response.status_code == 404
        assert _error(response)["code"] == "not_found"
    # and a project id that does not exist at all looks the same
    response = tenant_a.client(tenant_a.read_key).get("/api/v1/projects/does-not-exist")
    assert response.status_code == 404


@pytest.mark.django_db
def test_only_the_secret_hash_is_stored(tenant_a: Tenant) -> None:
    row = ApiKey.objects.get(pk=tenant_a.read_key.id)
    assert tenant_a.read_key.key not in (row.secret_hash, row.prefix)
    assert tenant_a.read_key.key.split("_")[2] not in row.secret_hash


@pytest.mark.django_db
@pytest.mark.parametrize("key_name", ["read_key", "write_key"])
def test_key_without_admin_scope_cannot_create_projects(tenant_a: Tenant, key_name: str) -> None:
    before = _counts()
    response = tenant_a.client(getattr(tenant_a, key_name)).post(
        "/api/v1/projects", {"name": "x"}, format="json"
    )
    assert response.status_code == 403
    assert _error(response)["code"] == "forbidden"
    assert _counts() == before


@pytest.mark.django_db
def test_admin_key_creates_project_in_sql_and_graph(tenant_a: Tenant) -> None:
    response = tenant_a.client(tenant_a.admin_key).post(
        "/api/v1/projects", {"name": " Research "}, format="json"
    )
    assert response.status_code == 201
    body = response.json()
    assert body["name"] == "Research"
    assert Project.objects.filter(pk=body["id"]).exists()
    nodes = graph.read(
        "MATCH (p:Project {id: $id}) RETURN p.project_id AS pid, p.name AS name", id=body["id"]
    )
    assert nodes == [{"pid": body["id"], "name": "Research"}]


@pytest.mark.django_db
def test_an_unknown_field_in_a_new_project_is_400_and_creates_nothing(tenant_a: Tenant) -> None:
    before = _counts()
    response = tenant_a.client(tenant_a.admin_key).post(
        "/api/v1/projects", {"name": "Research", "embeder": "openai"}, format="json"
    )
    assert response.status_code == 400
    assert _error(response)["code"] == "invalid_input"
    assert "embeder" in _error(response)["details"]["fields"]
    assert _counts() == before


@pytest.mark.django_db
def test_staff_session_creates_project(django_user_model) -> None:  # type: ignore[no-untyped-def]
    from django.contrib.auth.models import Permission

    staff = django_user_model.objects.create_user("curator", password="pw", is_staff=True)
    client = APIClient()
    client.force_login(staff)
    # being staff is not enough: creating projects needs core.add_project
    assert client.post("/api/v1/projects", {"name": "staff project"}, format="json").status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="add_project"))
    client.force_login(django_user_model.objects.get(pk=staff.pk))
    response = client.post("/api/v1/projects", {"name": "staff project"}, format="json")
    assert response.status_code == 201
    # a non-staff user is not enough
    plain = django_user_model.objects.create_user("plain", password="pw")
    client.force_login(plain)
    assert client.post("/api/v1/projects", {"name": "nope"}, format="json").status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize("payload", [{}, {"name": ""}, {"name": "   "}, {"name": "x" * 201}, {"name": ["a"]}])
def test_bad_project_input_is_400_and_writes_nothing(tenant_a: Tenant, payload: dict) -> None:
    before = _counts()
    response = tenant_a.client(tenant_a.admin_key).post("/api/v1/projects", payload, format="json")
    assert response.status_code == 400
    error = _error(response)
    assert error["code"] == "invalid_input"
    assert "name" in error["details"]["fields"]
    assert _counts() == before


@pytest.mark.django_db
def test_malformed_json_is_400_and_writes_nothing(tenant_a: Tenant) -> None:
    before = _counts()
    response = tenant_a.client(tenant_a.admin_key).post(
        "/api/v1/projects", data='{"name": "x"', content_type="application/json"
    )
    assert response.status_code == 400
    assert _error(response)["code"] == "malformed_request"
    assert _counts() == before


@pytest.mark.django_db
def test_oversized_body_is_413_and_writes_nothing(tenant_a: Tenant, settings) -> None:  # type: ignore[no-untyped-def]
    settings.API_MAX_BODY_BYTES = 1024
    before = _counts()
    response = tenant_a.client(tenant_a.admin_key).post(
        "/api/v1/projects", {"name": "x" * 2000}, format="json"
    )
    assert response.status_code == 413
    assert _error(response)["code"] == "payload_too_large"
    assert _counts() == before


@pytest.mark.django_db
def test_unknown_route_is_404_in_envelope() -> None:
    response = APIClient().get("/api/v1/no/such/route")
    assert response.status_code == 404
    assert _error(response)["code"] == "not_found"


@pytest.mark.django_db
def test_wrong_method_is_405_in_envelope(tenant_a: Tenant) -> None:
    response = tenant_a.client(tenant_a.admin_key).delete("/api/v1/projects")
    assert response.status_code == 405
    assert _error(response)["code"] == "method_not_allowed"


@pytest.mark.django_db
def test_throttled_key_gets_429_with_retry_after(tenant_a: Tenant) -> None:
    from django.core.cache import cache

    cache.clear()
    ApiKey.objects.filter(pk=tenant_a.read_key.id).update(rate_limit="3/min")
    client = tenant_a.client(tenant_a.read_key)
    url = f"/api/v1/projects/{tenant_a.project.id}"
    statuses = [client.get(url).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    response = client.get(url)
    assert response.status_code == 429
    error = _error(response)
    assert error["code"] == "throttled"
    retry_after = int(response["Retry-After"])
    assert retry_after >= 1 and retry_after <= 60
    assert error["details"]["retry_after_sec"] == retry_after
    # another key of the same project has its own bucket
    assert tenant_a.client(tenant_a.write_key).get(url).status_code == 200


@pytest.mark.django_db
def test_openapi_schema_and_docs_are_served() -> None:
    schema = APIClient().get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert schema.status_code == 200
    assert "/api/v1/projects" in schema.json()["paths"]
    docs = APIClient().get("/api/docs/")
    assert docs.status_code == 200
    assert b"swagger" in docs.content.lower()


@pytest.mark.django_db
def test_a_concurrent_burst_cannot_slip_past_the_throttle(tenant_a: Tenant) -> None:
    """Twenty requests checked at the same instant on twenty threads: exactly the key's limit pass
    (a read-then-write history would let every one of them through)."""
    import threading

    from rest_framework.request import Request as DrfRequest
    from rest_framework.test import APIRequestFactory

    from core.api.throttling import ApiKeyRateThrottle

    key = ApiKey.objects.get(pk=tenant_a.read_key.id)
    key.rate_limit = "3/min"
    start = threading.Barrier(20)
    allowed: list[bool] = []

    def one() -> None:
        request = DrfRequest(APIRequestFactory().get("/"))
        request._authenticator, request._user, request._auth = None, None, key  # as the auth sets them
        throttle = ApiKeyRateThrottle()
        start.wait()
        allowed.append(throttle.allow_request(request, None))

    threads = [threading.Thread(target=one) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(allowed) == [False] * 17 + [True] * 3
