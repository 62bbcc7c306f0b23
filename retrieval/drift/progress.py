"""Progress of one DRIFT search (seed 002's phases and percentages) as `retrieval_progress` events."""

from __future__ import annotations

import threading

from core.progress.events import ProgressEvent, publish_now

PHASE_PCT = {
    "initializing": 0,
    "expanding_query": 20,
    "retrieving_communities": 40,
    "executing_followup": 40,  # 40..80 as follow-ups finish
    "aggregating_results": 90,
    "completed": 100,
}


class Reporter:
    """Sends the events of one retrieval; the percentage never goes down."""

    def __init__(self, *, project_id: str, retrieval_id: str) -> None:
        self.project_id = project_id
        self.retrieval_id = retrieval_id
        self.pct = 0
        self.phases: list[str] = []
        self._lock = threading.Lock()

    def phase(self, phase: str, summary: str, details: str = "", *, pct: int | None = None) -> None:
        with self._lock:
            wanted = PHASE_PCT.get(phase, self.pct) if pct is None else pct
            self.pct = max(self.pct, min(100, wanted))
            self.phases.append(phase)
            event = ProgressEvent(
                message_type="retrieval_progress",
                project_id=self.project_id,
                retrieval_id=self.retrieval_id,
                phase=phase,
                progress_pct=self.pct,
                thought_summary=summary,
                details_md=details,
            )
        publish_now(event)

    def error(self, summary: str, details: str = "") -> None:
        self.phase("error", summary, details, pct=self.pct)
