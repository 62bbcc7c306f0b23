from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from rest_framework.test import APIClient

from core import graph
from core.models import ApiKey, Project


@pytest.mark.django_db
def test_create_project_prints_id_and_writes_sql_and_graph() -> None:
    out = StringIO()
    call_command("create_project", "--name", "cli project", stdout=out)
    project_id = out.getvalue().strip()
    assert Project.objects.get(pk=project_id).name == "cli project"
    assert graph.read("MATCH (p:Project {id: $id}) RETURN p.name AS name", id=project_id) == [
        {"name": "cli project"}
    ]


@pytest.mark.django_db
def test_create_api_key_prints_a_working_key_once() -> None:
    out = StringIO()
    call_command("create_project", "--name", "keyed", stdout=out)
    project_id = out.getvalue().strip()
    out = StringIO()
    call_command(
        "create_api_key", "--project", project_id, "--name", "agent", "--scopes", "read,write", stdout=out
    )
    key = out.getvalue().strip()
    assert key.startswith("kp_")
    row = ApiKey.objects.get(project_id=project_id)
    assert sorted(row.scopes) == ["read", "write"]
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    assert client.get(f"/api/v1/projects/{project_id}").status_code == 200


@pytest.mark.django_db
@pytest.mark.parametrize("scopes", ["", "read,superuser", "READ"])
def test_create_api_key_rejects_bad_scopes_and_writes_nothing(scopes: str) -> None:
    out = StringIO()
    call_command("create_project", "--name", "p", stdout=out)
    project_id = out.getvalue().strip()
    with pytest.raises(CommandError):
        call_command(
            "create_api_key", "--project", project_id, "--name", "k", "--scopes", scopes, stdout=StringIO()
        )
    assert not ApiKey.objects.filter(project_id=project_id).exists()


@pytest.mark.django_db
def test_create_api_key_for_unknown_project_fails() -> None:
    with pytest.raises(CommandError, match="does not exist"):
        call_command("create_api_key", "--project", "nope", "--name", "k", stdout=StringIO())
    assert ApiKey.objects.count() == 0


@pytest.mark.django_db
def test_create_api_key_rejects_bad_rate_limit() -> None:
    out = StringIO()
    call_command("create_project", "--name", "p", stdout=out)
    project_id = out.getvalue().strip()
    with pytest.raises(CommandError, match="rate limit"):
        call_command(
            "create_api_key",
            "--project",
            project_id,
            "--name",
            "k",
            "--rate-limit",
            "lots",
            stdout=StringIO(),
        )
    assert ApiKey.objects.count() == 0


@pytest.mark.django_db
def test_create_project_rejects_empty_name() -> None:
    with pytest.raises(CommandError):
        call_command("create_project", "--name", "  ", stdout=StringIO())
    assert Project.objects.count() == 0
