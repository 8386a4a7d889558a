"""IO500 runs from the store, grouped per system and API, with their boxes and tails."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from iolens.analyze.expect import box as bx
from iolens.errors import NotFound
from iolens.store.base import Store


@dataclass
class PhaseResult:
    phase: str
    value: float | None
    unit: str | None
    time_s: float | None
    valid: bool | None
    rank_items_min: int | None = None
    rank_items_max: int | None = None
    rank_time_p50: float | None = None
    rank_time_p90: float | None = None
    rank_time_p99: float | None = None
    rank_time_max: float | None = None


@dataclass
class RunResult:
    run_id: str
    system: str
    api: str | None
    timestamp: datetime | None
    nodes: int | None
    procs: int | None
    score: float | None
    bw_score: float | None
    md_score: float | None
    valid: bool | None
    format: str | None
    version: str | None
    path: str | None
    phases: dict[str, PhaseResult] = field(default_factory=dict)
    corners: dict[str, bx.Corners] = field(default_factory=dict)
    inversions: list[bx.Inversion] = field(default_factory=list)

    @property
    def anomalous(self) -> bool:
        return bool(self.inversions)

    @property
    def reason(self) -> str | None:
        return bx.anomaly_reason(self.inversions)

    def values(self) -> dict[str, float | None]:
        return {p: r.value for p, r in self.phases.items()}

    def box(self, view: str = "aggregate") -> bx.Box | None:
        c = self.corners.get(view)
        return c.box() if c is not None else None


@dataclass
class Group:
    """The runs of one system and API, and what they say together."""

    system: str
    api: str | None
    runs: list[RunResult]  # oldest first
    used: list[RunResult]  # the runs the box is made of
    excluded: list[RunResult]  # anomalous runs left out

    @property
    def from_anomalous(self) -> bool:
        """The box is made of anomalous runs: the system had no clean run to build it from."""
        return any(r.anomalous for r in self.used)

    boxes: dict[str, bx.Box | None]
    steps: list[bx.Step]
    stable_after: int | None


def systems(store: Store) -> list[str]:
    return (
        store.query("SELECT DISTINCT system FROM io500_runs ORDER BY system")
        .column("system")
        .to_pylist()
    )


def load(
    store: Store,
    system: str | None = None,
    api: str | None = None,
    tolerance: float = 0.0,
) -> list[RunResult]:
    """Stored runs (of `system` / `api` when given), oldest first, with corners and flags."""
    where, params = [], []
    if system is not None:
        where.append("system = ?")
        params.append(system)
    if api is not None:
        where.append("upper(api) = upper(?)")
        params.append(api)
    sql = "SELECT * FROM io500_runs" + (f" WHERE {' AND '.join(where)}" if where else "")
    rows = store.query(sql + ' ORDER BY "timestamp" NULLS LAST, system, run_id', params)
    runs = [
        RunResult(
            run_id=r["run_id"],
            system=r["system"],
            api=r["api"],
            timestamp=r["timestamp"],
            nodes=r["nodes"],
            procs=r["procs"],
            score=r["score"],
            bw_score=r["bw_score"],
            md_score=r["md_score"],
            valid=r["valid"],
            format=r["format"],
            version=r["version"],
            path=r["path"],
        )
        for r in rows.to_pylist()
    ]
    if not runs:
        known = systems(store)
        if system is not None and system not in known:
            raise NotFound(
                f"no IO500 runs of system {system!r} in {store.location}"
                + (f" (known: {', '.join(known)})" if known else "")
            )
        return []
    by_key = {(r.system, r.run_id): r for r in runs}
    cols = ", ".join(f.name for f in PHASE_FIELDS)
    phases = store.query(f"SELECT system, run_id, {cols} FROM io500_phases").to_pylist()
    for p in phases:
        run = by_key.get((p["system"], p["run_id"]))
        if run is not None:
            run.phases[p["phase"]] = PhaseResult(**{f.name: p[f.name] for f in PHASE_FIELDS})
    for run in runs:
        vals = run.values()
        run.corners = bx.corners(vals)
        run.inversions = bx.inversions(vals, tolerance)
    return runs


PHASE_FIELDS = dataclasses.fields(PhaseResult)


def groups(runs: Sequence[RunResult], include_anomalous: bool = False) -> list[Group]:
    """Runs per (system, API), each with its union boxes and their growth."""
    keyed: dict[tuple[str, str | None], list[RunResult]] = {}
    for r in runs:
        keyed.setdefault((r.system, r.api), []).append(r)
    out = []
    for (system, api), rs in sorted(keyed.items(), key=lambda kv: (kv[0][0], kv[0][1] or "")):
        used = [r for r in rs if include_anomalous or not r.anomalous]
        if not used:  # only anomalous runs: a flagged box beats none; `from_anomalous` says so
            used = list(rs)
        excluded = [r for r in rs if r not in used]
        boxes = {view: bx.union(r.box(view) for r in used) for view in bx.VIEWS}
        steps = bx.stability([(r.run_id, r.box("aggregate")) for r in used])
        out.append(Group(system, api, rs, used, excluded, boxes, steps, bx.stable_after(steps)))
    return out


def tail(group: Group) -> list[dict[str, Any]]:
    """Per phase: the runtime distribution over runs (the paper's Figure 11) and, where the
    result directories had them, each run's per-rank spread (stonewall work and runtimes)."""
    phases = sorted({p for r in group.runs for p in r.phases if p in bx.BOX_PHASES or p == "find"})
    out = []
    for phase in phases:
        got = [(r, r.phases[phase]) for r in group.runs if phase in r.phases]
        times = [p.time_s for _, p in got if p.time_s is not None]
        ranks = []
        for r, p in got:
            if p.rank_items_min is None and p.rank_time_max is None:
                continue
            spread = (
                p.rank_items_max / p.rank_items_min
                if p.rank_items_min and p.rank_items_max is not None
                else None
            )
            tail_ratio = (
                p.rank_time_max / p.rank_time_p50
                if p.rank_time_max is not None and p.rank_time_p50
                else None
            )
            ranks.append(
                {
                    "run_id": r.run_id,
                    "rank_items_min": p.rank_items_min,
                    "rank_items_max": p.rank_items_max,
                    "items_spread": spread,
                    "rank_time_p50": p.rank_time_p50,
                    "rank_time_p90": p.rank_time_p90,
                    "rank_time_p99": p.rank_time_p99,
                    "rank_time_max": p.rank_time_max,
                    "tail_ratio": tail_ratio,
                }
            )
        out.append(
            {
                "system": group.system,
                "api": group.api,
                "phase": phase,
                "runs": len(times),
                "time_s": bx.percentiles(times),
                "ranks": ranks,
            }
        )
    return out
