"""Time series for the pages' uPlot charts: epoch times, downsampling to what a browser
draws, and a component's load and latency over a period (the chart the job, episode and
component pages share)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import numpy as np

from iolens.store.base import Store

MiB = 2**20

MAX_POINTS = 2000  # per time series sent to the browser


def ts_window(column: str, since: Any, until: Any) -> tuple[str, list[Any]]:
    """` AND column > since AND column <= until` for the bounds given (samples are stamped
    at the end of their interval), and its parameters."""
    sql, params = "", []
    if since is not None:
        sql += f" AND {column} > ?"
        params.append(since)
    if until is not None:
        sql += f" AND {column} <= ?"
        params.append(until)
    return sql, params


def epoch(t: datetime | str | None) -> float | None:
    if t is None:
        return None
    if isinstance(t, str):
        t = datetime.fromisoformat(t.replace("Z", "+00:00"))
    if t.tzinfo is None:
        t = t.replace(tzinfo=UTC)
    return t.timestamp()


def naive(t: datetime) -> datetime:
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


def naive_t(t: str | datetime | None) -> datetime | None:
    if t is None:
        return None
    if isinstance(t, str):
        return naive(datetime.fromisoformat(t.replace("Z", "+00:00")))
    return naive(t)


def _clean(values: Any) -> list[float | None]:
    out: list[float | None] = []
    for v in values:
        f = float(v) if v is not None else None
        out.append(f if f is not None and math.isfinite(f) else None)
    return out


def downsample(x0: float, step: float, arrays: list[np.ndarray]) -> tuple[list[float], list[Any]]:
    """Means over groups of bins so at most MAX_POINTS remain; x at each group's start."""
    n = len(arrays[0]) if arrays else 0
    k = max(1, math.ceil(n / MAX_POINTS))
    m = math.ceil(n / k) if n else 0
    out = []
    for a in arrays:
        pad = np.zeros(m * k)
        pad[:n] = a
        out.append((pad.reshape(m, k).sum(axis=1) / (k * step)).round(3).tolist())
    return [x0 + i * k * step for i in range(m)], out


def latest_sample(store: Store) -> datetime | None:
    return store.query("SELECT max(ts) AS t FROM server_samples").column("t")[0].as_py()


def component_series(
    store: Store,
    component_id: str,
    start: datetime | None,
    end: datetime | None,
    job_id: str | None = None,
    bands: list[list[Any]] | None = None,
) -> dict[str, Any] | None:
    """A component's load over [start, end): bytes/s (ops/s for metadata targets), its
    request service time and, with `job_id`, that job's share. None without samples.

    The job's share on an OST or MDT is its job_stats entry; on a forwarder, the daemon's
    counters of the job's nodes while it ran (forwarded requests carry no job id). A
    forwarder without per-client counters (an LNet router) cannot say: `note` says so.
    """
    window, params = ts_window("ts", start, end)
    cond, params = "component_id = ?" + window, [component_id, *params]
    span = store.query(
        f"SELECT min(ts) AS t0, max(ts) AS t1, any_value(kind) AS kind, "
        f"median(interval_s) AS every FROM server_samples WHERE {cond} AND job_id IS NULL",
        params,
    ).to_pylist()[0]
    if span["t0"] is None:
        return None
    seconds = max(1.0, (span["t1"] - span["t0"]).total_seconds())
    # No finer than the samples (an agent's round, 10 s by default): finer bins would be
    # mostly empty and draw as scattered dots.
    step = max(1, math.ceil(seconds / 720), math.ceil(span["every"] or 1))
    meta = span["kind"] == "mdt"
    amount = "md_ops" if meta else "coalesce(read_bytes, 0) + coalesce(write_bytes, 0)"
    scale = 1.0 if meta else float(MiB)
    t0 = epoch(span["t0"]) or 0.0
    forwarded = job_id is not None and span["kind"] == "forwarder"
    job_cond = "job_id = ?" if job_id and not forwarded else "false"
    rows = store.query(
        f"""
        SELECT CAST(floor((epoch(ts) - ?) / ?) AS BIGINT) AS b,
               sum({amount}) FILTER (WHERE job_id IS NULL)::DOUBLE AS total,
               sum(interval_s) FILTER (WHERE job_id IS NULL) AS secs,
               count({"md_ops" if meta else "read_bytes"}) FILTER (WHERE job_id IS NULL) AS n,
               sum({amount}) FILTER (WHERE {job_cond})::DOUBLE AS mine,
               avg(service_us) FILTER (WHERE job_id IS NULL) AS service_us,
               avg(wait_us) FILTER (WHERE job_id IS NULL) AS wait_us
        FROM server_samples WHERE {cond}
        GROUP BY b ORDER BY b
        """,
        [t0, step, *([job_id] if job_id and not forwarded else []), *params],
    ).to_pylist()
    note = None
    if forwarded and job_id is not None:
        by_client, note = _forwarded_share(store, component_id, job_id, t0, step, start, end)
        for r in rows:
            r["mine"] = by_client.get(int(r["b"]))
    n = (rows[-1]["b"] + 1) if rows else 0
    total, mine, service, wait = (np.full(n, np.nan) for _ in range(4))
    for r in rows:
        b = int(r["b"])
        secs = float(r["secs"] or step)
        total[b] = (r["total"] or 0.0) / secs / scale
        mine[b] = (r["mine"] or 0.0) / secs / scale
        service[b] = r["service_us"] if r["service_us"] is not None else np.nan
        wait[b] = r["wait_us"] if r["wait_us"] is not None else np.nan
    # An OSS or MDS host (kind oss, mds) reports its request queue, not the traffic: that
    # is its targets'. Its chart is the latency alone, on the main axis.
    load = any(r["n"] for r in rows)
    unit = ("ops/s" if meta else "MiB/s") if load else "µs"
    series = []
    if load:
        series.append({"label": f"all clients {unit}", "color": "#555", "values": _clean(total)})
        if job_id and note is None:
            series.append(
                {"label": f"job {job_id} {unit}", "color": "#2ca02c", "values": _clean(mine)}
            )
    latency = {"scale": "us"} if load else {}
    if not np.all(np.isnan(service)):
        series.append(
            {"label": "service time µs", "color": "#d62728", "values": _clean(service), **latency}
        )
    if not np.all(np.isnan(wait)):
        series.append(
            {"label": "queue wait µs", "color": "#e377c2", "values": _clean(wait), **latency}
        )
    return {
        "title": f"{component_id}: {'load and ' if load else ''}request latency ({step} s bins)",
        "x": [t0 + i * step for i in range(n)],
        "bands": bands or [],
        "yLabel": unit,
        "series": series,
        "note": note,
    }


def _forwarded_share(
    store: Store,
    forwarder: str,
    job_id: str,
    t0: float,
    step: int,
    start: datetime | None,
    end: datetime | None,
) -> tuple[dict[int, float], str | None]:
    """Bytes per bin the forwarder moved for the job's nodes while the job ran (the daemon's
    per-client counters, kind `fwd_client`, component `<forwarder>:<node>`), or why not."""
    from iolens.analyze.components.forwarding import CLIENT_KIND

    cond, params = ts_window("s.ts", start, end)
    clients = store.query(
        f"SELECT count(*) AS n FROM server_samples s WHERE s.kind = '{CLIENT_KIND}' "
        f"AND s.job_id IS NULL AND starts_with(s.component_id, ?){cond}",
        [f"{forwarder}:", *params],
    ).to_pylist()[0]["n"]
    if not clients:
        return {}, (
            f"{forwarder} exports no per-client counters (an LNet router has none; a "
            "forwarding daemon's clients/<node>/stats give them), so the job's share of "
            "it is not known"
        )
    rows = store.query(
        f"""
        WITH j AS (SELECT unnest(nodes) AS node, "start", "end" FROM jobs WHERE job_id = ?)
        SELECT CAST(floor((epoch(s.ts) - ?) / ?) AS BIGINT) AS b,
               sum(coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0))::DOUBLE AS mine
        FROM server_samples s JOIN j ON s.component_id = ? || ':' || j.node
        WHERE s.kind = '{CLIENT_KIND}' AND s.job_id IS NULL AND s.interval_s > 0
              AND s.ts > j."start" AND (j."end" IS NULL OR s.ts - to_microseconds(
                  CAST(s.interval_s * 1e6 AS BIGINT)) < j."end"){cond}
        GROUP BY b
        """,
        [job_id, t0, step, forwarder, *params],
    ).to_pylist()
    return {int(r["b"]): float(r["mine"]) for r in rows}, None
