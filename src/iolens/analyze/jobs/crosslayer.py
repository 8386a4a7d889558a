"""One job's I/O along the whole path: compute nodes, forwarders, OSTs, metadata server.

Beacon (section 3.3, Figure 3a) correlates a job's layers by walking the path: the
scheduler gives its compute nodes, the static mapping table their forwarding nodes, file
layouts (`lfs getstripe`) and jobstats its OSTs, jobstats on the MDT its metadata server.
Seeing the same bytes per time bin at every layer is how amplification (forwarder cache
thrashing) or a stalled layer shows up; the bins are aligned to the job's start so the
layers line up with its report.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np

from iolens.analyze.report import series_of
from iolens.store import queries
from iolens.store.base import Store

BIN_S = 10
METRICS = ("read_bytes", "write_bytes", "read_ops", "write_ops", "md_ops")


def path(store: Store, job_id: str) -> dict[str, list[str]]:
    """The components the job's I/O went through."""
    job = queries.job(store, job_id)
    nodes = sorted(job["nodes"] or [])
    rows = store.query(
        "SELECT DISTINCT kind, component_id FROM server_samples WHERE job_id = ? "
        "ORDER BY kind, component_id",
        [job_id],
    ).to_pylist()
    seen: dict[str, list[str]] = {}
    for r in rows:
        seen.setdefault(r["kind"], []).append(r["component_id"])
    layouts = store.query(
        "SELECT DISTINCT unnest(f.osts) AS ost FROM files f WHERE f.file_id IN "
        "(SELECT DISTINCT file_id FROM client_io WHERE job_id = ? AND op IN ('read', 'write')) "
        "ORDER BY ost",
        [job_id],
    ).to_pylist()
    return {
        "nodes": nodes,
        "forwarders": queries.forwarders_of(store, nodes),
        "osts": sorted({r["ost"] for r in layouts} | set(seen.get("ost", []))),
        "mds": sorted(set(seen.get("mds", [])) | set(seen.get("mdt", []))),
    }


def layer_series(store: Store, job_id: str, bin_s: int = BIN_S) -> dict[str, Any]:
    """Per-layer (and per-component) bytes and ops per `bin_s` bins over the job's run.

    The compute layer comes from the job's own client records, spread exactly over time;
    the OSTs and MDTs from their jobstats rows (or, on servers without them, the rows
    attributed from the job's trace, listed in `from_trace`), the forwarders from what the
    job's nodes asked of them while it ran (per-client counters). Bin 0 starts at the job's
    start.
    """
    job = queries.job(store, job_id)
    rec = queries.client_io(store, job_id)
    t_lo = job["start"].timestamp() if job["start"] else None
    t_hi = job["end"].timestamp() if job["end"] else None
    if rec.num_rows:
        t0 = rec.column("t0").to_numpy()
        t1 = rec.column("t1").to_numpy()
        t_lo = min(t_lo or math.inf, float(t0.min()))
        t_hi = max(t_hi or -math.inf, float(t1.max()))
    if t_lo is None:
        return {"job_id": job_id, "bin_s": bin_s, "start": None, "bins": 0, "layers": {}}
    t_lo = math.floor(t_lo)
    t_hi = t_hi if t_hi is not None else t_lo + bin_s
    nbins = max(1, math.ceil((t_hi - t_lo) / bin_s))
    layers: dict[str, dict[str, list[float]]] = {}
    components: dict[str, dict[str, list[float]]] = {}
    if rec.num_rows:
        s = series_of(rec)
        offset = round(s.origin - t_lo)

        def rebin(x: np.ndarray) -> list[float]:
            out = np.zeros(nbins)
            idx = np.clip((offset + np.arange(len(x))) // bin_s, 0, nbins - 1)
            np.add.at(out, idx, x)
            return out.tolist()

        layers["compute"] = {
            "read_bytes": rebin(s.read),
            "write_bytes": rebin(s.write),
            "ops": rebin(s.ops),
            "md_ops": rebin(s.md),
        }
    sums = ", ".join(f"sum(coalesce({m}, 0))::DOUBLE AS {m}" for m in METRICS)
    rows = store.query(
        "SELECT kind, component_id, "
        "CAST(floor((epoch(ts) - interval_s - ?) / ?) AS BIGINT) AS b, "
        f"{sums}, bool_or(source = 'trace') AS traced "
        "FROM server_samples WHERE job_id = ? GROUP BY ALL",
        [t_lo, bin_s, job_id],
    ).to_pylist()
    # Servers without jobstats (MooseFS): the job's rows there come from its own trace.
    from_trace = sorted({r["component_id"] for r in rows if r["traced"]})
    # A forwarder knows its clients, not their jobs: the job's share is what its nodes
    # asked while it ran (forwarding daemon per-client counters, kind `fwd_client`).
    nodes = list(job.get("nodes") or [])
    if nodes and job["start"] is not None:
        rows += store.query(
            "SELECT 'forwarder' AS kind, split_part(component_id, ':', 1) AS component_id, "
            "CAST(floor((epoch(ts) - interval_s - ?) / ?) AS BIGINT) AS b, "
            f"{sums} FROM server_samples WHERE kind = 'fwd_client' "
            "AND split_part(component_id, ':', 2) IN (SELECT unnest(?)) "
            "AND ts > ? "
            "AND (? IS NULL OR ts - to_microseconds(CAST(interval_s * 1e6 AS BIGINT)) < ?) "
            "GROUP BY ALL",
            [t_lo, bin_s, nodes, job["start"], job["end"], job["end"]],
        ).to_pylist()
    for r in rows:
        b = min(max(int(r["b"]), 0), nbins - 1)
        kind = "mds" if r["kind"] == "mdt" else r["kind"]
        for target in (
            layers.setdefault(kind, {m: [0.0] * nbins for m in METRICS}),
            components.setdefault(r["component_id"], {m: [0.0] * nbins for m in METRICS}),
        ):
            for m in METRICS:
                target[m][b] += r[m]
    return {
        "job_id": job_id,
        "bin_s": bin_s,
        "start": datetime.fromtimestamp(t_lo, UTC).isoformat().replace("+00:00", "Z"),
        "bins": nbins,
        "path": path(store, job_id),
        "layers": layers,
        "components": dict(sorted(components.items())),
        "from_trace": from_trace,
    }
