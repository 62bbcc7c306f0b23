"""GET /api/v1/projects: a key sees only its own project, staff see every project."""

import pytest
from rest_framework.test import APIClient

from tests.conftest import Tenant, make_tenant


def _ids(response) -> list[str]:  # type: ignore[no-untyped-def]
    assert response.status_code == 200, response.content
    return [item["id"] for item in response.json()["items"]]


@pytest.mark.django_db
@pytest.mark.parametrize("key_name", ["read_key", "write_key", "admin_key"])
def test_a_key_lists_only_its_own_project(tenant_a: Tenant, tenant_b: Tenant, key_name: str) -> None:
    response = tenant_a.client(getattr(tenant_a, key_name)).get("/api/v1/projects")
    assert _ids(response) == [tenant_a.project.id]
    body = response.json()
    assert body["total"] == 1
    item = body["items"][0]
    assert item["name"] == "tenant A"
    assert set(item) == {"id", "name", "embedder", "embedding_dimensions", "created_at"}
    # and the other tenant's key the other project, never this one
    assert _ids(tenant_b.client(getattr(tenant_b, key_name)).get("/api/v1/projects")) == [tenant_b.project.id]


@pytest.mark.django_db
def test_staff_session_lists_every_project_by_name(django_user_model) -> None:  # type: ignore[no-untyped-def]
    zeta, alpha = make_tenant("zeta"), make_tenant("alpha")
    from django.contrib.auth.models import Permission

    staff = django_user_model.objects.create_user("curator", password="pw", is_staff=True)
    staff.user_permissions.add(Permission.objects.get(codename="api_read"))
    client = APIClient()
    client.force_login(staff)
    ids = _ids(client.get("/api/v1/projects"))
    assert ids.index(alpha.project.id) < ids.index(zeta.project.id)
    first = client.get("/api/v1/projects", {"limit": 1})
    assert len(first.json()["items"]) == 1 and first.json()["total"] == len(ids) >= 2
    second = client.get("/api/v1/projects", {"limit": 1, "offset": 1})
    assert _ids(second) == ids[1:2]


@pytest.mark.django_db
def test_project_list_needs_a_key_or_staff(django_user_model, tenant_a: Tenant) -> None:  # type: ignore[no-untyped-def]
    anonymous = APIClient().get("/api/v1/projects")
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthenticated"
    plain = django_user_model.objects.create_user("plain", password="pw")
    client = APIClient()
    client.force_login(plain)
    assert client.get("/api/v1/projects").status_code == 403


@pytest.mark.django_db
@pytest.mark.parametrize(
    "params",
    [
        {"limit": 0},
        {"limit": 101},
        {"limit": "x"},
        {"offset": -1},
        {"offset": "1e20"},
        # beyond a 64-bit integer: the database cannot take it as an OFFSET
        {"offset": str(10**20)},
        {"offset": str(2**63 - 1)},
    ],
)
def test_bad_list_parameters_are_400(tenant_a: Tenant, params: dict) -> None:
    response = tenant_a.client(tenant_a.read_key).get("/api/v1/projects", params)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_input"
