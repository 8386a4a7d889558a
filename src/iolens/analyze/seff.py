"""`iolens seff JOBID`: the I/O efficiency of one job, in the spirit of Slurm's `seff`.

What a user wants at the end of a run: how much of it was I/O, what that cost in
core-hours, the one change most likely to help (the finding with the largest estimated
saving, `analyze/savings.py`), and what that change would have saved over their recent
runs of the same application - the sum of the same finding's savings on each run that
had it, so the number is only as big as the evidence behind it.

Core-hours waiting on I/O are the slowest rank's I/O time times the job's processes
(cores when the process count is unknown: its nodes): ranks wait for the slowest one at
the next synchronisation, which is how the time is lost to the allocation.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from iolens.analyze import report as job_report
from iolens.store.base import Store

#: Earlier runs of the same user and application looked at.
RUNS = 10


def seff(
    store: Store, job_id: str, runs: int = RUNS, now: datetime | None = None
) -> dict[str, Any]:
    """JSON-ready efficiency figures of `job_id`; NotFound for an unknown job. A job that
    has not ended (the epilog of one of its steps asks) is measured up to `now`."""
    rep = job_report.build(store, job_id)
    cores = int(rep.nprocs or rep.nodes or 1)
    runtime = float(rep.runtime_s or 0.0) or _so_far(rep.start, rep.end, now)
    io = min(float(rep.io_time_s or 0.0), runtime) if runtime else float(rep.io_time_s or 0.0)
    ranked = [f for f in rep.findings if (f.get("gain") or {}).get("seconds") is not None]
    ranked.sort(key=lambda f: -float(f["gain"]["seconds"]))
    top = ranked[0] if ranked and ranked[0]["gain"]["seconds"] > 0 else None
    out: dict[str, Any] = {
        "job_id": job_id,
        "user": rep.user,
        "app": rep.app,
        "state": rep.state,
        "runtime_s": runtime or None,
        "running": rep.end is None and runtime > 0,
        "cores": cores,
        "core_hours": round(runtime * cores / 3600, 3) if runtime else None,
        "io_time_s": round(io, 1),
        "io_share": round(io / runtime, 4) if runtime else None,
        "io_core_hours": round(io * cores / 3600, 3),
        "read_bytes": rep.read_bytes,
        "write_bytes": rep.write_bytes,
        "findings": len(rep.findings),
        "top": _top(top) if top else None,
        "history": _history(store, rep, top, runs) if top else None,
    }
    return out


def _so_far(start: datetime | None, end: datetime | None, now: datetime | None) -> float:
    """Seconds from a running job's start to now (store times are naive UTC); 0 if unknown."""
    if start is None or end is not None:
        return 0.0
    now = now or datetime.now(UTC).replace(tzinfo=None)
    if start.tzinfo is not None:
        now = now.replace(tzinfo=UTC)
    return max((now - start).total_seconds(), 0.0)


def _top(f: dict[str, Any]) -> dict[str, Any]:
    g = f["gain"]
    return {
        "code": f["code"],
        "title": (f.get("title") or f["name"]).rstrip("."),
        "recommendation": f["recommendation"],
        "seconds": g["seconds"],
        "range_s": g.get("range_s"),
        "core_hours": g.get("core_hours"),
        "core_hours_range": g.get("core_hours_range"),
        "model": g.get("model"),
    }


def _history(store: Store, rep: Any, top: dict[str, Any], runs: int) -> dict[str, Any]:
    """The top finding's savings summed over the user's last `runs` runs of the app (this
    one included), from each run's own stored estimate."""
    rows = store.query(
        """
        WITH mine AS (
            SELECT job_id, "start" FROM jobs
            WHERE "user" = ? AND app IS NOT DISTINCT FROM ?
              AND ("start" <= (SELECT "start" FROM jobs WHERE job_id = ?) OR job_id = ?)
            ORDER BY "start" DESC NULLS LAST LIMIT ?
        )
        SELECT m.job_id, f.gain FROM mine m
        LEFT JOIN findings f ON f.subject_kind = 'job' AND f.subject_id = m.job_id
                            AND f.code = ?
        """,
        [rep.user, rep.app, rep.job_id, rep.job_id, runs, top["code"]],
    ).to_pylist()
    seen = {r["job_id"] for r in rows}
    gains = [json.loads(r["gain"]) for r in rows if r["gain"]]
    gains = [g for g in gains if g.get("core_hours") is not None]
    lo = sum((g.get("core_hours_range") or [g["core_hours"]] * 2)[0] for g in gains)
    hi = sum((g.get("core_hours_range") or [g["core_hours"]] * 2)[1] for g in gains)
    return {
        "runs": len(seen),
        "runs_with_finding": len(gains),
        "core_hours": round(sum(g["core_hours"] for g in gains), 3),
        "core_hours_range": [round(lo, 3), round(hi, 3)],
        "seconds": round(sum(g.get("seconds") or 0.0 for g in gains), 1),
    }


def line(s: dict[str, Any]) -> str:
    """One line for a Slurm epilog or a terminal too narrow for the table."""
    share = f"{s['io_share']:.0%}" if s["io_share"] is not None else "?"
    run = "the run so far" if s.get("running") else "the run"
    head = (
        f"iolens: job {s['job_id']}: I/O {s['io_time_s']:.0f} s ({share} of {run}), "
        f"{s['io_core_hours']:.2f} core-h waiting on I/O"
    )
    t = s["top"]
    if not t:
        return head + "; no change expected to help"
    lo, hi = t["range_s"] or [t["seconds"], t["seconds"]]
    more = ""
    h = s["history"]
    if h and h["runs_with_finding"] > 1:
        more = (
            f"; {h['core_hours']:.2f} core-h over {h['runs_with_finding']} of your last "
            f"{h['runs']} runs"
        )
    return (
        f"{head}; {t['code']} {t['title']} would save ~{t['seconds']:.0f} s "
        f"({lo:.0f}-{hi:.0f} s){more}; see `iolens job {s['job_id']}`"
    )
