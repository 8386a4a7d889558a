"""File-system "weather" in the seconds before a job starts (zoom-in Table I, factors 13-15).

The paper reads LMT's 5-second samples: the average CPU utilisation of the job's OSSes
and of the MDS, and the average bytes moved on the job's OSTs, in the 5 s before the job
starts. iolens has the same data in the store: OST totals in `server_samples` (rows with
no job id) and CPU in `metrics`, either as time (the node source's `cpu_<field>_jiffies`
rates, on agents whose role is `oss` or `mds`) or as LMT's own %CPU gauge (`cpu_pct`,
from `iolens import lmt`). Samples cover `(ts - interval_s, ts]`; each counts in
proportion to its overlap with the window, assuming a uniform rate inside a sample. A
gauge has no interval: it stands for the `GAUGE_S` before it (LMT's cadence), and a
host's figure is the overlap-weighted mean of its gauges; a host with CPU time is read
from that.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from iolens.store.base import Store

#: /proc/stat fields that are not busy time.
IDLE_FIELDS = frozenset({"idle", "iowait"})
#: Seconds a CPU gauge without an interval stands for: LMT's polling period.
GAUGE_S = 5.0
_OST_INDEX = re.compile(r"OST([0-9a-fA-F]{4,})$")


def _us(t: datetime) -> int:
    t = t if t.tzinfo is not None else t.replace(tzinfo=UTC)
    return round(t.timestamp() * 1e6)


def ost_index(component_id: str) -> int | None:
    """The OST index in a Lustre target name (`lustre-OST000a` -> 10), as Darshan logs it."""
    m = _OST_INDEX.search(component_id)
    return int(m.group(1), 16) if m else None


def _wanted(component_id: str, osts: set[int] | None, names: set[str] | None) -> bool:
    if osts is None and names is None:
        return True
    if names and component_id in names:
        return True
    return bool(osts) and ost_index(component_id) in (osts or set())


def _overlap(t1_us: int, interval_s: float, w0: int, w1: int) -> float:
    """Share of the sample `(t1 - interval, t1]` that lies inside the window `(w0, w1]`."""
    span = max(interval_s, 1e-9) * 1e6
    lo, hi = max(t1_us - span, w0), min(t1_us, w1)
    return max(hi - lo, 0.0) / span


def _cpu(store: Store, kind: str, hosts: set[str] | None, w0: int, w1: int) -> float | None:
    rows = store.query(
        "SELECT component_id, epoch_us(ts) AS t, coalesce(interval_s, ?) AS interval_s, "
        "metric, value FROM metrics WHERE kind = ? AND job_id IS NULL "
        "AND (metric LIKE 'cpu\\_%\\_jiffies' ESCAPE '\\' OR metric = 'cpu_pct') "
        "AND epoch_us(ts) > ? AND epoch_us(ts) - coalesce(interval_s, ?) * 1e6 < ?",
        [GAUGE_S, kind, w0, GAUGE_S, w1],
    ).to_pylist()
    busy: dict[str, float] = {}
    total: dict[str, float] = {}
    gauge: dict[str, list[float]] = {}  # host -> [sum of pct * weight, sum of weights]
    for r in rows:
        host = r["component_id"]
        if hosts is not None and host not in hosts:
            continue
        share = _overlap(r["t"], r["interval_s"], w0, w1)
        if r["metric"] == "cpu_pct":
            g = gauge.setdefault(host, [0.0, 0.0])
            g[0] += float(r["value"]) * share
            g[1] += share
            continue
        field = r["metric"][len("cpu_") : -len("_jiffies")]
        v = float(r["value"]) * share
        total[host] = total.get(host, 0.0) + v
        if field not in IDLE_FIELDS:
            busy[host] = busy.get(host, 0.0) + v
    pct = {h: 100.0 * busy.get(h, 0.0) / t for h, t in total.items() if t > 0}
    for h, (v, w) in gauge.items():
        if h not in pct and w > 0:
            pct[h] = v / w
    return sum(pct.values()) / len(pct) if pct else None


def _oss_of(store: Store, ost_ids: list[str]) -> set[str] | None:
    if not ost_ids:
        return None
    rows = store.query(
        "SELECT DISTINCT parent FROM components WHERE kind = 'ost' AND parent IS NOT NULL "
        f"AND component_id IN ({', '.join('?' * len(ost_ids))})",
        ost_ids,
    ).to_pylist()
    return {r["parent"] for r in rows} or None


def weather_before(
    store: Store,
    start: datetime,
    osts: Iterable[int | str] | None = None,
    window_s: float = 5.0,
) -> dict[str, Any] | None:
    """{"oss_cpu_pct", "mds_cpu_pct", "ost_io_mb", "osts"} for the `window_s` before `start`.

    `osts` are the job's OSTs, as Darshan's indices or target names; without them every
    OST and OSS counts. `ost_io_mb` is the mean over those OSTs of the bytes read and
    written in the window, in MB (10^6 bytes, as LMT reports). Each figure is None without
    samples; the whole result is None when there are none at all.
    """
    w1 = _us(start)
    w0 = w1 - round(window_s * 1e6)
    idx = {o for o in osts or () if isinstance(o, int)} if osts is not None else None
    names = {o for o in osts or () if isinstance(o, str)} if osts is not None else None
    rows = store.query(
        "SELECT component_id, epoch_us(ts) AS t, interval_s, "
        "coalesce(read_bytes, 0) + coalesce(write_bytes, 0) AS b FROM server_samples "
        "WHERE kind = 'ost' AND job_id IS NULL "
        "AND epoch_us(ts) > ? AND epoch_us(ts) - interval_s * 1e6 < ?",
        [w0, w1],
    ).to_pylist()
    per_ost: dict[str, float] = {}
    for r in rows:
        if _wanted(r["component_id"], idx, names):
            share = _overlap(r["t"], r["interval_s"], w0, w1)
            per_ost[r["component_id"]] = per_ost.get(r["component_id"], 0.0) + r["b"] * share
    ost_io = sum(per_ost.values()) / len(per_ost) / 1e6 if per_ost else None
    oss_hosts = _oss_of(store, sorted(per_ost)) if osts is not None else None
    oss = _cpu(store, "oss", oss_hosts, w0, w1)
    mds = _cpu(store, "mds", None, w0, w1)
    if ost_io is None and oss is None and mds is None:
        return None
    return {"oss_cpu_pct": oss, "mds_cpu_pct": mds, "ost_io_mb": ost_io, "osts": len(per_ost)}


def job_weather(store: Store, job_id: str, window_s: float = 5.0) -> dict[str, Any] | None:
    """`weather_before` an imported Darshan job: before its first log started, on the OSTs
    its files are striped over (every OST when no layout is known); None when the job has
    no log in the store or there is no server data then."""
    start = store.query(
        'SELECT min("start") AS t FROM darshan_logs WHERE job_id = ?', [job_id]
    ).to_pylist()[0]["t"]
    if start is None:
        return None
    osts = (
        store.query(
            "SELECT DISTINCT unnest(osts) AS ost FROM files WHERE osts IS NOT NULL AND path IN "
            "(SELECT r.path FROM darshan_records r JOIN darshan_logs l USING (log_key) "
            "WHERE l.job_id = ?)",
            [job_id],
        )
        .column("ost")
        .to_pylist()
    )
    # the importer keeps Darshan's OSTs as `OST0001` (a log has no file-system name): by index
    idx = [i for i in map(ost_index, osts) if i is not None]
    return weather_before(store, start, idx or None, window_s)
