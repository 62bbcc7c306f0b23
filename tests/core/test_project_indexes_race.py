"""Two processes that start a new project's ingestion at once both create its per-project indexes;
neither fails (the later CREATE … IF NOT EXISTS of the same index is answered "equivalent rule")."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable

from core import graph
from knowledge import tenancy


def _at_once(create: Callable[[str], None], project_id: str, threads: int = 6) -> list[BaseException]:
    start = threading.Barrier(threads)
    errors: list[BaseException] = []

    def run() -> None:
        start.wait()
        try:
            create(project_id)
        except BaseException as exc:  # noqa: BLE001 (collected and asserted on)
            errors.append(exc)

    workers = [threading.Thread(target=run) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return errors


def test_creating_a_projects_indexes_concurrently_never_fails() -> None:
    names = []
    try:
        for _ in range(5):  # the race needs two commits to interleave: try a few new projects
            project_id = str(uuid.uuid4())
            names += [tenancy.chunk_fulltext_index(project_id), tenancy.chunk_vector_index(project_id)]
            assert _at_once(tenancy.project_fulltext_create, project_id) == []
            assert _at_once(tenancy.project_index_create, project_id) == []
            existing = {
                r["name"]
                for r in graph.read("SHOW INDEXES YIELD name WHERE name IN $n RETURN name", n=names[-2:])
            }
            assert existing == set(names[-2:])
    finally:
        for name in names:
            graph.write_autocommit(f"DROP INDEX {name} IF EXISTS")
