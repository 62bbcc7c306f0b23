"""The one shared Neo4j driver, used by neomodel and by the apps' parameterised Cypher.

Reads go through `read()` (auto-commit, read-only), writes through `write()` or `write_tx()`; all
translate a lost or unreachable server into `DependencyUnavailable` (HTTP 503) so callers never see
a driver traceback. The driver reconnects by itself when the server comes back.
"""

from __future__ import annotations

import atexit
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import neo4j
from django.conf import settings
from neo4j import Driver, GraphDatabase, ManagedTransaction, RoutingControl
from neo4j.exceptions import DriverError, Neo4jError
from tenacity import Retrying, retry_if_exception, stop_after_attempt, stop_after_delay, wait_exponential

from core.errors import NEO4J_UNAVAILABLE, DependencyUnavailable
from core.metrics import neo4j_timed

T = TypeVar("T")

_lock = threading.Lock()
_driver: Driver | None = None
_driver_pid: int | None = None

# Errors that mean "the database is not reachable right now", as opposed to a bad query.
UNAVAILABLE_ERRORS: tuple[type[Exception], ...] = (*NEO4J_UNAVAILABLE, ConnectionError, OSError)


class Vector(list[float]):
    """An embedding on its way to Neo4j as a query parameter: a plain list to the driver, which packs
    it as one, but with a short repr. The driver (5.19, pinned by neomodel) formats every RUN's
    parameters for its debug log whether or not that log is on; for a store of 1,000 384-float
    embeddings the full repr cost ~0.2 s of CPU per request, more than packing and sending them."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"<vector of {len(self)} floats>"


def get_driver() -> Driver:
    """The process-wide driver; recreated after a fork."""
    global _driver, _driver_pid
    pid = os.getpid()
    if _driver is not None and _driver_pid == pid:
        return _driver
    with _lock:
        if _driver is None or _driver_pid != pid:
            _driver = GraphDatabase.driver(
                settings.NEO4J_URI,
                auth=(settings.NEO4J_USERNAME, settings.NEO4J_PASSWORD),
                connection_timeout=settings.NEO4J_CONNECTION_TIMEOUT_SEC,
                connection_acquisition_timeout=settings.NEO4J_CONNECTION_TIMEOUT_SEC * 2,
                max_connection_pool_size=settings.NEO4J_MAX_POOL_SIZE,
                max_transaction_retry_time=settings.NEO4J_CONNECTION_TIMEOUT_SEC,
                user_agent="knowledge-platform/0.1",
            )
            _driver_pid = pid
            atexit.register(_close_at_exit, _driver, pid)
    return _driver


def _close_at_exit(driver: Driver, pid: int) -> None:
    """Close this process's driver while the interpreter is still whole: left to the garbage
    collector at shutdown, its `__del__` says goodbye to the server after the driver's modules are
    torn down and prints a traceback (seen in a web process's log)."""
    if pid == os.getpid():
        driver.close()


def reset_driver() -> None:
    """Drop the current driver (after a fork, or in tests) and re-attach neomodel to a new one."""
    global _driver, _driver_pid
    with _lock:
        old, old_pid = _driver, _driver_pid
        _driver, _driver_pid = None, None
    # A driver inherited through fork shares its sockets with the parent: only close our own.
    if old is not None and old_pid == os.getpid():
        old.close()
    attach_neomodel()


def attach_neomodel() -> None:
    """Point neomodel (and django-neomodel) at the shared driver."""
    from neomodel import config, db  # neomodel reads Django's settings on import: loaded once they are

    driver = get_driver()
    config.DATABASE_URL = None
    config.DRIVER = driver
    config.DATABASE_NAME = settings.NEO4J_DATABASE
    # neomodel's `db` is thread-local; this thread's copy is set now, others lazily from config.
    db.driver = driver
    db._database_name = settings.NEO4J_DATABASE
    db._pid = os.getpid()


def database() -> str:
    return settings.NEO4J_DATABASE


@contextmanager
def translate_errors() -> Iterator[None]:
    try:
        yield
    except UNAVAILABLE_ERRORS as exc:
        raise DependencyUnavailable("neo4j", str(exc) or exc.__class__.__name__) from exc


def _is_retryable(exc: BaseException) -> bool:
    return isinstance(exc, Neo4jError | DriverError) and exc.is_retryable()


def _auto_read(query: str, params: dict[str, Any]) -> list[neo4j.Record]:
    """One read-only auto-commit transaction: RUN and PULL in one round trip, where the managed
    transaction of `execute_query` adds BEGIN and COMMIT (~0.5 ms of a 1 ms query). Retried like a
    managed transaction on errors the driver calls retryable, for at most NEO4J_CONNECTION_TIMEOUT_SEC;
    the driver's bookmark manager keeps it causally after `write()`s."""
    driver = get_driver()
    for attempt in Retrying(
        retry=retry_if_exception(_is_retryable),
        stop=stop_after_delay(settings.NEO4J_CONNECTION_TIMEOUT_SEC),
        wait=wait_exponential(multiplier=0.2, max=2.0),
        reraise=True,
    ):
        with (
            attempt,
            driver.session(
                database=database(),
                default_access_mode=neo4j.READ_ACCESS,
                bookmark_manager=driver.execute_query_bookmark_manager,
            ) as session,
        ):
            return list(session.run(query, params))
    raise AssertionError("unreachable")  # pragma: no cover - Retrying reraises


def read(query: str, **params: Any) -> list[dict[str, Any]]:
    """Run a read query (read-only access mode) and return plain dicts."""
    with neo4j_timed("read", query), translate_errors():
        records = _auto_read(query, params)
    return [record.data() for record in records]


def read_column(query: str, column: str, **params: Any) -> list[Any]:
    """One column of a read query's records, as the driver decoded it: no `record.data()` walk, which
    costs more than the query for a large nested list (e.g. 10,000 sessions collected in one row)."""
    with neo4j_timed("read", query), translate_errors():
        records = _auto_read(query, params)
    return [record[column] for record in records]


# A node or relationship a statement had matched was deleted by a transaction that committed before
# the statement loaded it (a job linking messages while the user forgets them). The failed transaction
# is rolled back whole, so running it again is a first run that no longer matches what is gone.
ENTITY_VANISHED = "Neo.ClientError.Statement.EntityNotFound"
VANISHED_ATTEMPTS = 3


def _vanished(exc: BaseException) -> bool:
    return isinstance(exc, Neo4jError) and exc.code == ENTITY_VANISHED


def _again_if_vanished(work: Callable[[], T]) -> T:
    """`work()`, run again (at most VANISHED_ATTEMPTS times in all) when what it matched was deleted
    concurrently; any other error is raised at once."""
    for attempt in Retrying(
        retry=retry_if_exception(_vanished), stop=stop_after_attempt(VANISHED_ATTEMPTS), reraise=True
    ):
        with attempt:
            return work()
    raise AssertionError("unreachable")  # pragma: no cover - Retrying reraises


def write(query: str, **params: Any) -> list[dict[str, Any]]:
    """Run one write query in its own transaction and return plain dicts."""
    with neo4j_timed("write", query), translate_errors():
        records, _summary, _keys = _again_if_vanished(
            lambda: get_driver().execute_query(
                query, params, database_=database(), routing_=RoutingControl.WRITE
            )
        )
    return [record.data() for record in records]


def write_autocommit(query: str, **params: Any) -> list[dict[str, Any]]:
    """Run a query in an auto-commit transaction: needed for `CALL { … } IN TRANSACTIONS`."""
    with (
        neo4j_timed("write", query),
        translate_errors(),
        get_driver().session(database=database()) as session,
    ):
        return [record.data() for record in session.run(query, params)]


def write_tx(work: Callable[[ManagedTransaction], T]) -> T:
    """Run `work(tx)` in one write transaction (retried by the driver on transient errors, and here
    when something it matched was deleted concurrently)."""
    with neo4j_timed("write"), translate_errors(), get_driver().session(database=database()) as session:
        return _again_if_vanished(lambda: session.execute_write(work))


def read_tx(work: Callable[[ManagedTransaction], T]) -> T:
    with (
        neo4j_timed("read"),
        translate_errors(),
        get_driver().session(database=database(), default_access_mode=neo4j.READ_ACCESS) as session,
    ):
        return session.execute_read(work)


def ping() -> dict[str, Any]:
    """Check connectivity and report the server version; raises DependencyUnavailable."""
    with translate_errors():
        driver = get_driver()
        driver.verify_connectivity()
        records, _s, _k = driver.execute_query(
            "CALL dbms.components() YIELD name, versions, edition RETURN versions[0] AS version, edition",
            database_=database(),
            routing_=RoutingControl.READ,
        )
    row = records[0].data() if records else {}
    return {"version": row.get("version"), "edition": row.get("edition")}
