"""A benchmark's result rows: the platform's figure and what it is compared with, each comparison
labelled as what it is (issue 29), and the spread over repeated runs.

A row's comparisons, each optional and each in its own column of bench/results/README.md:
- `peer`: another system doing the same job, measured in the same run (label, value);
- `published`: a figure from elsewhere (label, value, source), not measured here;
- `floor`: a bound measured in the same run that the platform cannot beat (label, value), such as
  the time to embed the same texts alone;
- `target`: what an issue asks for (operator, value); the row says whether the median meets it.
`context` is another figure of the platform itself from the same run, shown for scale beside the
figure and never as a comparison.

A value is a number, a list of numbers shown "a / b" (p50 / p95; a target applies to the last one
unless `target_component` says otherwise), or a short text. `runs` holds the value of every
repeated run (the value shown is their median), and `peer_runs` the peer's.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

Number = int | float
Value = Number | list[Number] | str | None
OPERATORS = ("<=", ">=")


def row(
    figure: str,
    value: Value,
    unit: str,
    *,
    peer: tuple[str, Value] | None = None,
    published: tuple[str, Value, str] | None = None,
    floor: tuple[str, Value] | None = None,
    target: tuple[str, Number] | None = None,
    target_component: int = -1,
    context: tuple[str, Value] | None = None,
    runs: Sequence[Value] | None = None,
    peer_runs: Sequence[Value] | None = None,
) -> dict[str, Any]:
    out: dict[str, Any] = {"figure": figure, "value": value, "unit": unit}
    if runs is not None:
        out["runs"] = list(runs)
    if peer is not None:
        out["peer"] = {"label": peer[0], "value": peer[1]}
        if peer_runs is not None:
            out["peer"]["runs"] = list(peer_runs)
    if published is not None:
        out["published"] = {"label": published[0], "value": published[1], "source": published[2]}
    if floor is not None:
        out["floor"] = {"label": floor[0], "value": floor[1]}
    if target is not None:
        if target[0] not in OPERATORS:
            raise ValueError(f"target operator must be one of {OPERATORS}")
        out["target"] = {"op": target[0], "value": target[1], "component": target_component}
    if context is not None:
        out["context"] = {"label": context[0], "value": context[1]}
    return out


def median_value(values: Sequence[Value]) -> Value:
    """The median of repeated values, component by component for lists; text is kept when every
    run gave the same, else the runs are joined."""
    present = [v for v in values if v is not None]
    if not present:
        return None
    numbers = [float(v) for v in present if isinstance(v, int | float)]
    if len(numbers) == len(present):
        return _round(statistics.median(numbers))
    lists = [v for v in present if isinstance(v, list)]
    if len(lists) == len(present) and len({len(v) for v in lists}) == 1:
        return [_round(statistics.median(float(x) for x in c)) for c in zip(*lists, strict=True)]
    texts = [str(v) for v in present]
    return texts[0] if len(set(texts)) == 1 else " | ".join(texts)


def merge_runs(results: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Rows of repeated runs of one benchmark merged by figure: the value is the median of the runs,
    `runs` lists them (the same for the peer's value); rows that already carry `runs` (a benchmark
    that repeats inside one run) are kept as the first run gave them."""
    merged: list[dict[str, Any]] = []
    for index, first in enumerate(results[0]):
        # the same figure in each run; by position when its text changed (it may name a run's detail)
        same = [
            next((r for r in rows if r["figure"] == first["figure"]), None)
            or (rows[index] if len(rows) == len(results[0]) else None)
            for rows in results
        ]
        found = [r for r in same if r is not None]
        out = dict(first)
        if len(found) > 1 and "runs" not in first:
            out["runs"] = [r["value"] for r in found]
            out["value"] = median_value(out["runs"])
            if "peer" in first:
                peer_values = [r["peer"]["value"] for r in found if "peer" in r]
                out["peer"] = {**first["peer"], "runs": peer_values, "value": median_value(peer_values)}
            if "floor" in first:
                floors = [r["floor"]["value"] for r in found if "floor" in r]
                out["floor"] = {**first["floor"], "runs": floors, "value": median_value(floors)}
        merged.append(out)
    return merged


def met(row_: dict[str, Any]) -> bool | None:
    """Whether the row's value meets its target (None without a target or a numeric value). Repeated
    runs are judged by their median before rounding: 0.6991 is shown as 0.699 and misses 0.70."""
    target = row_.get("target")
    value = row_.get("value")
    if target is None:
        return None
    runs = row_.get("runs") or []
    if runs and all(isinstance(r, int | float) for r in runs):
        value = statistics.median(float(r) for r in runs)
    elif runs and all(isinstance(r, list) and r for r in runs) and len({len(r) for r in runs}) == 1:
        value = [statistics.median(float(x) for x in column) for column in zip(*runs, strict=True)]
    if isinstance(value, list):
        value = value[target.get("component", -1)] if value else None
    if not isinstance(value, int | float):
        return None
    return value <= target["value"] if target["op"] == "<=" else value >= target["value"]


def show(value: Value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, list):
        return " / ".join(_number(v) for v in value)
    if isinstance(value, int | float):
        return _number(value)
    return str(value)


def spread(runs: Sequence[Value] | None) -> str:
    """ "min–max over n runs", component by component; empty for fewer than two numeric runs."""
    if not runs or len(runs) < 2:
        return ""
    numeric = [v for v in runs if isinstance(v, int | float)]
    if len(numeric) == len(runs):
        return f"{_number(min(numeric))}–{_number(max(numeric))}, {len(runs)} runs"
    lists = [v for v in runs if isinstance(v, list)]
    if len(lists) == len(runs) and len({len(v) for v in lists}) == 1:
        columns = list(zip(*lists, strict=True))
        low = " / ".join(_number(min(c)) for c in columns)
        high = " / ".join(_number(max(c)) for c in columns)
        return f"min {low}, max {high}, {len(runs)} runs"
    return f"{len(runs)} runs"


def _round(x: float) -> float:
    """Three decimals below 1 (recalls and ratios near a target stay told apart), two below 100, else one."""
    return round(float(x), 3 if abs(x) < 1 else 2 if abs(x) < 100 else 1)


def _number(x: Number) -> str:
    if float(x).is_integer():
        return f"{int(x):,}" if abs(x) >= 10_000 else str(int(x))
    if abs(x) < 1:
        shown = f"{x:.3f}"
        return shown[:-1] if shown.endswith("0") else shown  # 0.560 → 0.56, 0.699 stays
    return f"{x:,.2f}" if abs(x) < 100 else f"{x:,.1f}"
