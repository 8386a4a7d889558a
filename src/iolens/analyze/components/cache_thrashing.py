"""cache_thrashing: a forwarder reading far more from the OSTs than its clients asked for.

Beacon 4.1 (Figure 4b): comparing read volume across layers showed forwarders pulling
much more data from the backend than they returned to compute nodes. The cause was N-N
sequential reads with more streams than the forwarder's page cache holds 40 MB read-ahead
windows for: prefetched data is evicted before use and read again (3.5x for a
1,024-process Shentu run). Fix: a smaller per-file read-ahead, or N-M aggregation.

Per forwarder and minute: the bytes its clients' jobs read through it (its per-job rows)
against the bytes the OSTs served those jobs (jobstats), a job on several forwarders
split by its read share on each. A sustained ratio above `ratio` is an episode; the
evidence names the jobs, their amplification and their sequential read streams.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.analyze.components.base import (
    MINUTE_US,
    Context,
    Episode,
    duration_class,
    minute_time,
    r,
    runs,
    verdict,
)


@dataclass(frozen=True)
class ThrashThresholds:
    ratio: float = 2.0  # backend read bytes / bytes read by the clients
    min_bytes: float = 64 * 2**20  # read through the forwarder in a minute to judge it
    max_gap: int = 1
    min_minutes: int = 1
    critical_ratio: float = 3.0


@dataclass
class CacheThrashing:
    name: str = "cache_thrashing"
    kind: str = "cache_thrashing"
    thresholds: ThrashThresholds = field(default_factory=ThrashThresholds)

    def detect(self, ctx: Context) -> list[Episode]:
        th = self.thresholds
        rows = _amplification(ctx)
        if rows.num_rows == 0:
            return []
        fwds = sorted(set(rows.column("fwd").to_pylist()))
        index = {f: i for i, f in enumerate(fwds)}
        n_min = ctx.m_end - ctx.m_load
        fi = np.array([index[f] for f in rows.column("fwd").to_pylist()], np.int64)
        col = rows.column("col").to_numpy()
        ok = (col >= 0) & (col < n_min)
        asked = np.zeros((len(fwds), n_min))
        backend = np.zeros((len(fwds), n_min))
        np.add.at(asked, (fi[ok], col[ok]), rows.column("rb").to_numpy()[ok])
        np.add.at(backend, (fi[ok], col[ok]), rows.column("ob").to_numpy()[ok])
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(asked > 0, backend / asked, 0.0)
        valid = asked >= th.min_bytes
        abnormal = valid & (ratio >= th.ratio)
        jobs = rows.column("job_id").to_numpy(zero_copy_only=False)
        out = []
        for f, fwd in enumerate(fwds):
            for a, b in runs(abnormal[f], valid[f], th.max_gap, th.min_minutes):
                start, end = minute_time(ctx.m_load + a), minute_time(ctx.m_load + b + 1)
                if end <= ctx.start or start >= ctx.end:
                    continue
                sl = slice(a, b + 1)
                req, back = float(asked[f, sl].sum()), float(backend[f, sl].sum())
                amp = back / req if req else 0.0
                mask = ok & (fi == f) & (col >= a) & (col <= b)
                per_job = _per_job(
                    jobs[mask],
                    rows.column("rb").to_numpy()[mask],
                    rows.column("ob").to_numpy()[mask],
                )
                culprits = [j for j in per_job if j["ratio"] >= th.ratio] or per_job[:1]
                _describe(ctx, fwd, culprits, start, end)
                names = ", ".join(j["job_id"] for j in culprits[:3])
                evidence: dict[str, Any] = {
                    "summary": (
                        f"{fwd} read {amp:.1f}x from the OSTs what its clients asked for "
                        f"(jobs {names})"
                    ),
                    "ratio": r(amp, 2),
                    "requested_bytes": int(req),
                    "backend_bytes": int(back),
                    "excess_bytes": int(back - req),
                    "peak_minute_ratio": r(float(ratio[f, sl].max()), 2),
                    "abnormal_minutes": int(abnormal[f, sl].sum()),
                    "duration_class": duration_class(start, end),
                    "jobs": culprits,
                    "advice": "lower the per-file read-ahead (e.g. 40 MiB -> 2 MiB) on the "
                    "forwarder, or aggregate N-N reads into N-M",
                    **verdict(abnormal[f], valid[f], b),
                }
                out.append(
                    Episode(
                        kind=self.kind,
                        component_kind="forwarder",
                        component_id=fwd,
                        start=start,
                        end=end,
                        severity="critical" if amp >= th.critical_ratio else "warning",
                        evidence=evidence,
                        detector=self.name,
                    )
                )
        return out


def _amplification(ctx: Context) -> pa.Table:
    """(fwd, job_id, col, rb, ob): per forwarder/job/minute, the bytes the job read through
    the forwarder and the OST bytes read for it there (split by the job's forwarder share)."""
    return ctx.store.query(
        f"""
        WITH f AS (
          SELECT component_id AS fwd, job_id,
            (epoch_us(ts) - 1) // {MINUTE_US} - {ctx.m_load} AS col, sum(read_bytes)::DOUBLE AS rb
          FROM server_samples
          WHERE kind = 'forwarder' AND job_id IS NOT NULL AND read_bytes > 0
            AND ts > ? AND ts <= ?
          GROUP BY ALL),
        fj AS (SELECT job_id, col, sum(rb) AS jrb FROM f GROUP BY ALL),
        o AS (
          SELECT job_id, (epoch_us(ts) - 1) // {MINUTE_US} - {ctx.m_load} AS col,
            sum(read_bytes)::DOUBLE AS ob
          FROM server_samples
          WHERE kind = 'ost' AND job_id IS NOT NULL AND read_bytes > 0 AND ts > ? AND ts <= ?
          GROUP BY ALL)
        SELECT f.fwd, f.job_id, f.col, f.rb,
          coalesce(o.ob, 0) * f.rb / fj.jrb AS ob
        FROM f JOIN fj USING (job_id, col) LEFT JOIN o USING (job_id, col)
        """,
        [*ctx.bounds(), *ctx.bounds()],
    )


def _per_job(jobs: np.ndarray, rb: np.ndarray, ob: np.ndarray) -> list[dict[str, Any]]:
    uniq, inv = np.unique(jobs, return_inverse=True)
    req = np.bincount(inv, weights=rb, minlength=len(uniq))
    back = np.bincount(inv, weights=ob, minlength=len(uniq))
    order = np.argsort(-(back - req), kind="stable")
    return [
        {
            "job_id": str(uniq[i]),
            "requested_bytes": int(req[i]),
            "backend_bytes": int(back[i]),
            "ratio": round(float(back[i] / req[i]), 2) if req[i] else None,
        }
        for i in order[:10]
    ]


def _describe(ctx: Context, fwd: str, jobs: list[dict[str, Any]], start: Any, end: Any) -> None:
    """Add app, I/O mode and the read streams behind `fwd` (client records) to each job."""
    ids = [j["job_id"] for j in jobs]
    info = ctx.jobs_info(ids)
    ctx.store.register("_iolens_ep_jobs", pa.table({"job_id": ids}))
    try:
        streams = ctx.store.query(
            """
            SELECT c.job_id,
              count(DISTINCT (c.node, c.pid, c.file_id)) AS streams,
              count(DISTINCT (c.node, c.pid, c.file_id)) FILTER (c.stride = c.size) AS seq,
              count(DISTINCT (c.node, c.pid)) AS procs,
              count(DISTINCT c.file_id) AS files
            FROM client_io c JOIN _iolens_ep_jobs USING (job_id)
            JOIN forwarding w ON w.compute_node = c.node
            WHERE c.op = 'read' AND w.forwarder = ? AND c.t_end >= ? AND c.t_start < ?
            GROUP BY c.job_id
            """,
            [fwd, start, end],
        ).to_pylist()
    finally:
        ctx.store.unregister("_iolens_ep_jobs")
    by_job = {s.pop("job_id"): s for s in streams}
    for j in jobs:
        meta = info.get(j["job_id"], {})
        st = by_job.get(j["job_id"], {})
        j.update(
            app=meta.get("app"),
            io_mode=meta.get("io_mode"),
            nprocs=meta.get("nprocs"),
            read_processes=st.get("procs", 0),
            read_streams=st.get("streams", 0),
            sequential_read_streams=st.get("seq", 0),
        )
        seq = st.get("seq", 0)
        mode = meta.get("io_mode") or _read_mode(st.get("procs", 0), st.get("files", 0))
        j["pattern"] = (
            f"{mode} sequential read, {seq} streams" if seq else "no sequential reads recorded"
        )


def _read_mode(procs: int, files: int) -> str:
    """File sharing of the reads when the job has no analysed I/O mode yet."""
    if procs > 1 and files >= procs:
        return "N-N"
    if procs > 1 and files == 1:
        return "N-1"
    return "N-M" if procs > 1 else "1-1"
