"""The error envelope for failures that no endpoint produces on purpose."""

from __future__ import annotations

import neo4j.exceptions
import pytest
import redis.exceptions

from core import graph
from core.errors import DependencyUnavailable, api_exception_handler

pytestmark = pytest.mark.unit


class _View:
    pass


def _body(response) -> dict:  # type: ignore[no-untyped-def]
    return response.data


def test_unexpected_exception_is_500_envelope_without_details() -> None:
    response = api_exception_handler(RuntimeError("secret internals: password=hunter2"), {"view": _View()})
    assert response.status_code == 500
    assert _body(response) == {
        "error": {"code": "internal_error", "message": "internal server error", "details": {}}
    }


def _database_unavailable() -> neo4j.exceptions.Neo4jError:
    """The error a Neo4j server answers while its database stops (seen on a query that ran as the
    server shut down): the driver's own class for the server's code."""
    exc = neo4j.exceptions.Neo4jError.hydrate(
        code="Neo.TransientError.General.DatabaseUnavailable", message="Database 'neo4j' unavailable"
    )
    assert isinstance(exc, neo4j.exceptions.DatabaseUnavailable)
    return exc


def test_driver_and_redis_connection_errors_are_503() -> None:
    for exc, dependency in (
        (neo4j.exceptions.ServiceUnavailable("Couldn't connect to 127.0.0.1:7687"), "neo4j"),
        (neo4j.exceptions.SessionExpired("gone"), "neo4j"),
        (_database_unavailable(), "neo4j"),
        (redis.exceptions.ConnectionError("Connection refused"), "redis"),
        (DependencyUnavailable("llm", "timeout"), "llm"),
    ):
        response = api_exception_handler(exc, {"view": _View()})
        assert response.status_code == 503
        assert response["Retry-After"] == "5"
        error = _body(response)["error"]
        assert error["code"] == "dependency_unavailable"
        assert error["details"]["dependency"] == dependency


def test_graph_calls_report_a_stopping_database_as_neo4j_unavailable() -> None:
    with pytest.raises(DependencyUnavailable) as raised, graph.translate_errors():
        raise _database_unavailable()
    assert raised.value.dependency == "neo4j"
