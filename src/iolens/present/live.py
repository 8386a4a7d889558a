"""A job right now, as the live job page, `/api/jobs/{id}/live` and `iolens watch` show it.

Small on purpose (a poll every few seconds): the job's state, the totals of its newest
analysis (provisional while it runs), its last I/O phase, its current bandwidth against
its earlier runs (`analyze.jobs.live`, computed per request from the newest records, so
it does not wait for the scheduler) and its findings so far.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from iolens.analyze.jobs import live
from iolens.errors import NotFound
from iolens.store.base import Store


def is_running(job: dict[str, Any]) -> bool:
    return job.get("end") is None or (job.get("state") or "").upper() in ("RUNNING", "PENDING")


def snapshot(store: Store, job_id: str, now: datetime | None = None) -> dict[str, Any]:
    """The job's live view; NotFound for an unknown job (callers check who may see it)."""
    rows = store.query("SELECT * FROM jobs WHERE job_id = ?", [job_id]).to_pylist()
    if not rows:
        raise NotFound(f"job {job_id} is not in {store.location}")
    job = rows[0]
    now = now or datetime.now(UTC).replace(tzinfo=None)
    running = is_running(job)
    summary = store.query(
        "SELECT read_bytes, write_bytes, read_bw_avg, write_bw_avg, md_ops, findings, "
        "analyzed FROM job_summaries WHERE job_id = ?",
        [job_id],
    ).to_pylist()
    s = summary[0] if summary else {}
    start, end = job["start"], job["end"]
    elapsed = ((end or now) - start).total_seconds() if start else None
    bw = live.bandwidth_check(store, job)
    phase = live.current_phase(store, job_id)
    if phase is not None:
        phase["duration_s"] = (phase["end"] - phase["start"]).total_seconds()
    findings = []
    for f in store.query(
        "SELECT code, name, severity, evidence, recommendation, created FROM findings "
        "WHERE subject_kind = 'job' AND subject_id = ? ORDER BY code",
        [job_id],
    ).to_pylist():
        try:
            ev = json.loads(f.pop("evidence") or "{}")
        except ValueError:
            ev = {}
        findings.append({**f, "live": bool(isinstance(ev, dict) and ev.get("live"))})
    return {
        "job_id": job_id,
        "user": job["user"],
        "app": job["app"],
        "state": job["state"] or ("RUNNING" if running else None),
        "running": running,
        "start": start,
        "end": end,
        "elapsed_s": None if elapsed is None else round(max(elapsed, 0.0), 1),
        "analyzed": s.get("analyzed"),
        # a summary analysed before the job ended (or while it has no end) is provisional
        "provisional": bool(s) and (end is None or (s["analyzed"] or end) < end),
        "read_bytes": s.get("read_bytes"),
        "write_bytes": s.get("write_bytes"),
        "md_ops": s.get("md_ops"),
        "phase": phase,
        "bandwidth": bw,
        "slower": bw["slower"],
        "findings": findings,
    }
