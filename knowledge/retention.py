"""Knowledge's services for retention: entities that nothing refers to any more are stamped, then
pruned once the stamp is old enough; communities that lost entities are marked stale. Curation's
retention runs call these."""

from __future__ import annotations

from dataclasses import dataclass

from core import graph
from knowledge import cypher


@dataclass(frozen=True)
class OrphanCount:
    prunable: int  # orphaned, stamped before the cutoff
    unstamped: int  # orphaned, not stamped yet (a run starts their clock)


def entities_orphaned_count(*, project_id: str, cutoff: str) -> OrphanCount:
    row = graph.read(cypher.ENTITIES_ORPHANED_PREVIEW, project_id=project_id, cutoff=cutoff)[0]
    return OrphanCount(prunable=int(row["entities"]), unstamped=int(row["newly_orphaned"]))


def entities_orphans_stamp(*, project_id: str, now: str, batch: int) -> tuple[int, int]:
    """Remove the stamp of entities referred to again, stamp the newly orphaned ones with `now`
    (in batches). Returns (unstamped, stamped)."""
    unstamped = int(graph.write(cypher.ENTITIES_UNSTAMP, project_id=project_id)[0]["unstamped"])
    stamped = 0
    while True:
        done = int(
            graph.write(cypher.ENTITIES_STAMP, project_id=project_id, now=now, batch=batch)[0]["stamped"]
        )
        stamped += done
        if done < batch:
            return unstamped, stamped


def entities_orphans_prune(*, project_id: str, cutoff: str, batch: int) -> int:
    """Delete up to `batch` entities orphaned since before `cutoff`; when any went, the project's
    communities are marked stale (their next rebuild drops them). Returns how many were deleted."""
    deleted = int(
        graph.write(cypher.ENTITIES_PRUNE, project_id=project_id, cutoff=cutoff, batch=batch)[0]["deleted"]
    )
    if deleted:
        graph.write(cypher.COMMUNITIES_MARK_STALE, project_id=project_id)
    return deleted
