"""Expectations from IO500: the bounding box of what users can expect per system and API,
runs where 'hard' beat 'easy' (a probable system fault), the box's stability as runs
accumulate, phase tails, and where a job falls in the box (`docs/expectations.md`).

`expectations(store, ...)` is the whole view as JSON-ready data (what `iolens expect`
prints); `place(store, job_id)` and `place_job(box, bandwidth, md_rate)` are for other
analyses that want a verdict or an estimated gain.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from iolens.analyze.expect.box import BW_UNIT, MD_UNIT, VIEWS, Box, union
from iolens.analyze.expect.placement import (
    BELOW,
    CACHED,
    NEAR_BEST,
    VERDICTS,
    WITHIN,
    JobPoint,
    Placement,
    expected_gain,
    job_point,
    place_job,
    scaled,
)
from iolens.analyze.expect.runs import Group, RunResult, groups, load, systems, tail
from iolens.errors import InputError
from iolens.store.base import Store

__all__ = [
    "BELOW",
    "CACHED",
    "NEAR_BEST",
    "VERDICTS",
    "WITHIN",
    "Box",
    "JobPoint",
    "Placement",
    "expectations",
    "expected_gain",
    "job_point",
    "place",
    "place_job",
    "scaled",
]


def _box_json(b: Box | None) -> dict[str, float] | None:
    return None if b is None else dataclasses.asdict(b)


def _run_json(r: RunResult, used: set[tuple[str, str]]) -> dict[str, Any]:
    return {
        "run_id": r.run_id,
        "system": r.system,
        "api": r.api,
        "timestamp": r.timestamp,
        "nodes": r.nodes,
        "procs": r.procs,
        "score": r.score,
        "bw_score": r.bw_score,
        "md_score": r.md_score,
        "valid": r.valid,
        "format": r.format,
        "version": r.version,
        "path": r.path,
        "anomalous": r.anomalous,
        "reason": r.reason,
        "in_box": (r.system, r.run_id) in used,
        "views": {v: dataclasses.asdict(c) for v, c in r.corners.items()},
        "phases": {
            p: {"value": x.value, "unit": x.unit, "time_s": x.time_s, "valid": x.valid}
            for p, x in r.phases.items()
        },
    }


def _group_json(g: Group) -> dict[str, Any]:
    return {
        "system": g.system,
        "api": g.api,
        "runs": [r.run_id for r in g.used],
        "excluded": [r.run_id for r in g.excluded],
        "from_anomalous": g.from_anomalous,
        **{view: _box_json(b) for view, b in g.boxes.items()},
        "stability": [
            {
                "runs": s.runs,
                "run_id": s.run_id,
                **dataclasses.asdict(s.box),
                "width": s.box.width,
                "height": s.box.height,
                "area": s.box.area,
                "change": s.change,
            }
            for s in g.steps
        ],
        "stable_after": g.stable_after,
        "stable": g.stable_after is not None,
    }


def _union_json(gs: list[Group]) -> dict[str, Any] | None:
    if not any(g.used for g in gs):
        return None
    out: dict[str, Any] = {
        "groups": [f"{g.system}/{g.api}" for g in gs if g.used],
        "runs": sum(len(g.used) for g in gs),
    }
    for view in VIEWS:
        out[view] = _box_json(union(g.boxes[view] for g in gs))
    return out


def _nodes(gs: list[Group]) -> float | None:
    """IO500's client node count behind these boxes: the median over their runs."""
    n = sorted(r.nodes for g in gs for r in g.used if r.nodes)
    return float(n[len(n) // 2]) if n else None


def _choose_group(
    gs: list[Group], system: str | None, api: str | None, layer: str | None
) -> tuple[str, str | None, dict[str, Box | None], float | None]:
    """The box a job is judged against: its system's, for its API when that has runs."""
    names = sorted({g.system for g in gs if g.used})
    if not names:
        raise InputError("expect", "no IO500 runs to build a box from: `iolens import io500` first")
    if system is None:
        if len(names) > 1:
            raise InputError(
                "--system", f"IO500 runs of several systems ({', '.join(names)}): choose one"
            )
        system = names[0]
    mine = [g for g in gs if g.system == system and g.used]
    if not mine:
        raise InputError("--system", f"no usable IO500 runs of system {system!r}")
    wanted = [api] if api else (["MPIIO", "POSIX"] if layer == "mpiio" else ["POSIX"])
    for w in wanted:
        hit = [g for g in mine if (g.api or "").upper() == w.upper()]
        if hit:
            return system, hit[0].api, hit[0].boxes, _nodes(hit[:1])
    if api:
        raise InputError("--api", f"no IO500 runs of {system} with API {api}")
    return system, None, {v: union(g.boxes[v] for g in mine) for v in VIEWS}, _nodes(mine)


def _placement_json(p: Placement) -> dict[str, Any]:
    return {
        "verdict": p.verdict,
        "target": p.target,
        "meaning": p.meaning,
        "axes": [dataclasses.asdict(a) for a in p.axes],
        "gain_factor": p.gain_factor,
        "gain": expected_gain(p),
    }


def _place(
    store: Store, gs: list[Group], job_id: str, system: str | None, api: str | None
) -> dict[str, Any]:
    pt = job_point(store, job_id)
    sys_name, api_name, boxes, io500_nodes = _choose_group(gs, system, api, pt.layer)
    label = f"{sys_name}" + (f" ({api_name})" if api_name else "")

    def box(view: str) -> Box | None:
        b = boxes[view]
        return None if b is None else scaled(b, pt.nodes, io500_nodes)[0]

    factor = scaled(Box(1, 1, 1, 1), pt.nodes, io500_nodes)[1]
    agg = place_job(box("aggregate"), pt.bandwidth, pt.md_rate, label)
    out: dict[str, Any] = {
        "job_id": job_id,
        "system": sys_name,
        "api": api_name,
        "point": dataclasses.asdict(pt),
        "scale": {"job_nodes": pt.nodes, "io500_nodes": io500_nodes, "factor": factor},
        "box": _box_json(box("aggregate")),
        "boxes": {view: _box_json(box(view)) for view in VIEWS},
        **_placement_json(agg),
        "by_direction": {},
        "paper_md_rate": _paper_md(pt, box("aggregate")),
    }
    for view, bw in (("write", pt.write_bw), ("read", pt.read_bw)):
        if bw is not None:
            p = place_job(box(view), bw, pt.md_rate, label)
            out["by_direction"][view] = {"verdict": p.verdict, "gain_factor": p.gain_factor}
    if out["gain"]:
        out["gain"]["basis"] = f"IO500 easy-case bandwidth on {label}"
        if factor < 1:
            out["gain"]["basis"] += f", scaled to the job's {pt.nodes} of {io500_nodes:g} nodes"
    return out


def _paper_md(pt: JobPoint, box: Box | None) -> dict[str, Any] | None:
    """The paper's metadata rate (ops / metadata time) and where it falls in the box."""
    if pt.paper_md_rate is None:
        return None
    pos = None
    if box is not None:
        lo, hi = box.md_lo, box.md_hi
        v = pt.paper_md_rate
        pos = "below" if v < lo else "above" if v > hi else "within"
    return {
        "value": pt.paper_md_rate,
        "unit": MD_UNIT,
        "ops": pt.ops,
        "meta_time_s": pt.meta_time_s,
        "formula": "all I/O operations / metadata time (the IO500 paper's, section V)",
        "position": pos,
    }


def place(
    store: Store,
    job_id: str,
    system: str | None = None,
    api: str | None = None,
    include_anomalous: bool = False,
) -> dict[str, Any]:
    """Where `job_id` falls in its system's box: verdict, meaning, gain (JSON-ready)."""
    gs = groups(load(store, system), include_anomalous)
    return _place(store, gs, job_id, system, api)


def expectations(
    store: Store,
    system: str | None = None,
    api: str | None = None,
    include_anomalous: bool = False,
    tolerance: float = 0.0,
    job_id: str | None = None,
) -> dict[str, Any]:
    """Everything `iolens expect` shows, as JSON-ready data."""
    runs = load(store, system, api, tolerance)
    gs = groups(runs, include_anomalous)
    used = {(r.system, r.run_id) for g in gs for r in g.used}
    out: dict[str, Any] = {
        "system": system,
        "api": api,
        "units": {"bandwidth": BW_UNIT, "metadata": MD_UNIT},
        "systems": systems(store) if system is None else [system],
        "runs": [_run_json(r, used) for r in runs],
        "box": _union_json(gs),
        "boxes": [_group_json(g) for g in gs],
        "anomalous_runs": [
            {
                "run_id": r.run_id,
                "system": r.system,
                "api": r.api,
                "reason": r.reason,
                "inversions": [{**dataclasses.asdict(i), "excess": i.excess} for i in r.inversions],
            }
            for r in runs
            if r.anomalous
        ],
        "tail_latency": [t for g in gs for t in tail(g)],
    }
    if job_id is not None:
        out["job"] = _place(store, gs, job_id, system, api)
    return out
