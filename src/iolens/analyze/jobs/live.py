"""A running job right now: its current bandwidth against its earlier runs.

The phase and history analyses judge whole phases, so a phase that is still going cannot
be judged until it ends — too late for someone watching a job. This module looks only at
the newest `WINDOW_S` seconds of the job's client records: bytes over the seconds with an
I/O call in flight (so compute between bursts does not read as a slowdown), compared with
the bandwidth of the earlier runs of the same application at the same scale (their stored
phases: bytes over phase time), or, for a first run, with this run's own bandwidth before
the window. A window `SLOW_FACTOR` times slower than that baseline is a slowdown.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import numpy as np

from iolens.model.schema import UPPER_LAYERS
from iolens.store.base import Store

WINDOW_S = 60.0  # the "current" bandwidth: the job's newest minute of records
SLOW_FACTOR = 3.0  # current below baseline / 3: slower than earlier runs
MIN_BUSY_S = 5.0  # less I/O than this in the window: too little to judge
HISTORY_RUNS = 10  # newest earlier runs of the same app and scale used as the baseline

_UPPER = "(" + ", ".join(f"'{n}'" for n in UPPER_LAYERS) + ")"
_RECORDS = f"""
SELECT epoch_us(t_start) / 1e6 AS t0, epoch_us(t_end) / 1e6 AS t1,
       CASE WHEN op IN ('read', 'write') THEN size * count ELSE 0 END AS nbytes
FROM client_io WHERE job_id = ? AND t_end >= ? AND t_start <= ?
  AND (layer IS NULL OR layer NOT IN {_UPPER} OR NOT EXISTS (
       SELECT 1 FROM client_io WHERE job_id = ? AND coalesce(layer, '') NOT IN {_UPPER}))
"""


def _ts(second: float) -> datetime:
    """Epoch seconds as the store's naive UTC time."""
    return datetime.fromtimestamp(second, UTC).replace(tzinfo=None)


def busy_seconds(t0: np.ndarray, t1: np.ndarray, lo: float, hi: float) -> float:
    """Length of the union of [t0, t1] clipped to [lo, hi]: time with I/O in flight."""
    if len(t0) == 0:
        return 0.0
    a, b = np.clip(t0, lo, hi), np.clip(t1, lo, hi)
    order = np.argsort(a)
    a, b = a[order], np.maximum.accumulate(b[order])
    # a new stretch starts where a call begins after every earlier one has ended
    new = np.r_[True, a[1:] > b[:-1]]
    starts, idx = a[new], np.nonzero(new)[0]
    ends = b[np.r_[idx[1:] - 1, len(a) - 1]]
    return float((ends - starts).sum())


def window_bandwidth(store: Store, job_id: str, lo: float, hi: float) -> tuple[float, float]:
    """(bytes/s while busy, busy seconds) of the job's records in [lo, hi] (epoch s).
    Bytes of a record spanning the edge count in proportion to its time inside."""
    rows = store.query(_RECORDS, [job_id, _ts(lo), _ts(hi), job_id]).to_pydict()
    t0, t1 = np.asarray(rows["t0"], float), np.asarray(rows["t1"], float)
    nbytes = np.asarray(rows["nbytes"], float)
    span = np.maximum(t1 - t0, 1e-6)
    inside = np.clip(np.minimum(t1, hi) - np.maximum(t0, lo), 0, None) / span
    inside[(t1 - t0) <= 0] = 1.0
    busy = busy_seconds(t0, t1, lo, hi)
    return (float((nbytes * inside).sum()) / busy if busy > 0 else 0.0), busy


def history_bandwidth(store: Store, job: dict[str, Any]) -> tuple[float | None, int]:
    """(bytes/s over the phases, runs) of the newest earlier runs of the job's application
    at its scale (same process and node counts) that have stored phases."""
    if not job.get("app") or job.get("start") is None:
        return None, 0
    row = store.query(
        """
        WITH runs AS (
          SELECT j.job_id FROM jobs j
          WHERE j.app = ? AND j.nprocs IS NOT DISTINCT FROM ? AND len(j.nodes) = ?
            AND j.job_id <> ? AND j."start" < ? AND j."end" IS NOT NULL
            AND j.job_id IN (SELECT job_id FROM job_phases)
          ORDER BY j."start" DESC LIMIT ?)
        SELECT count(DISTINCT p.job_id) AS n,
               sum(coalesce(p.read_bytes, 0) + coalesce(p.write_bytes, 0)) AS b,
               sum(coalesce(p.busy_s, epoch(p."end") - epoch(p."start"))) AS d
        FROM job_phases p JOIN runs USING (job_id)
        """,
        [job["app"], job.get("nprocs"), len(job.get("nodes") or []), job["job_id"],
         job["start"], HISTORY_RUNS],
    ).to_pylist()[0]  # fmt: skip
    if not row["n"] or not row["d"] or not row["b"]:
        return None, int(row["n"] or 0)
    return float(row["b"]) / float(row["d"]), int(row["n"])


def current_phase(store: Store, job_id: str) -> dict[str, Any] | None:
    """The job's last stored I/O phase (from its newest analysis)."""
    rows = store.query(
        'SELECT phase, "start", "end", read_bytes, write_bytes, md_ops, bw, anomalous '
        "FROM job_phases WHERE job_id = ? ORDER BY phase DESC LIMIT 1",
        [job_id],
    ).to_pylist()
    return rows[0] if rows else None


def bandwidth_check(store: Store, job: dict[str, Any], window_s: float = WINDOW_S) -> dict:
    """The job's current bandwidth and whether it is `SLOW_FACTOR` below its baseline."""
    job_id = job["job_id"]
    newest = (
        store.query(
            "SELECT epoch_us(max(t_end)) / 1e6 AS t FROM client_io WHERE job_id = ?", [job_id]
        )
        .column("t")[0]
        .as_py()
    )
    out: dict[str, Any] = {
        "newest_record": None if newest is None else _ts(newest),
        "window_s": window_s,
        "current_bw": None,
        "busy_s": 0.0,
        "baseline_bw": None,
        "baseline": None,
        "earlier_runs": 0,
        "ratio": None,
        "slower": False,
    }
    if newest is None:
        return out
    lo = newest - window_s
    bw, busy = window_bandwidth(store, job_id, lo, newest)
    out.update(current_bw=round(bw, 1), busy_s=round(busy, 1))
    base, runs = history_bandwidth(store, job)
    out["earlier_runs"] = runs
    if base is not None:
        out.update(baseline_bw=round(base, 1), baseline="earlier runs")
    elif job.get("start") is not None:
        start = job["start"].replace(tzinfo=UTC).timestamp()
        if lo - start >= window_s:  # a minute of this run before the window at least
            own, own_busy = window_bandwidth(store, job_id, start, lo)
            if own_busy >= MIN_BUSY_S:
                out.update(baseline_bw=round(own, 1), baseline="earlier in this run")
    if out["baseline_bw"] and busy >= MIN_BUSY_S:
        out["ratio"] = round(bw / out["baseline_bw"], 3)
        out["slower"] = bool(bw * SLOW_FACTOR < out["baseline_bw"])
    return out
