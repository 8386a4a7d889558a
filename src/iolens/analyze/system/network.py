"""The interconnect: switch traffic balance (Beacon 4.4) and port utilisation and congestion
(the K computer's R_BW and T_wait^max, sections 4 and 6.4).

Beacon found a large job's inter-supernode traffic bipolar across 40 switches — a
histogram of per-switch volume in five brackets made the imbalance obvious although the
application's own profile looked balanced. That view reads kind `switch` component totals
of `server_samples`.

The K computer's framework rated jobs by two fabric figures on the I/O nodes they used:
R_BW, the peak bandwidth over the theoretical bandwidth (high is good: the links were
used), and T_wait^max, the longest time packets waited for transmit credits (low is
good). Here they come from the agent's InfiniBand port metrics (`metrics` kind `ib_port`):
`tx_bytes`/`rx_bytes` rates against `rate_gbps`, and `port_xmit_wait`, which counts
ticks a port had data but no credits. A tick's length is hardware-specific, so the wait
is given in ticks, and in seconds only when the caller knows the tick.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from iolens.analyze.system._common import window_sql
from iolens.store.base import Store


@dataclass
class SwitchTraffic:
    component_id: str
    bytes: int  # read + write bytes over the window
    read_bytes: int
    write_bytes: int
    peak_rate: float  # bytes/s, highest per-sample rate
    r_bw: float | None  # peak_rate / components.peak_bw, when the benchmark is known


@dataclass
class Bracket:
    low: float  # bytes, inclusive
    high: float  # bytes, exclusive (the last bracket includes its top)
    switches: int


@dataclass
class SwitchView:
    switches: list[SwitchTraffic]  # busiest first
    histogram: list[Bracket]  # Beacon Figure 11(b): switches per volume bracket
    total_bytes: int
    mean_bytes: float | None
    max_over_mean: float | None  # 1 = perfectly even
    cv: float | None  # standard deviation / mean of per-switch volume


@dataclass
class PortStats:
    component_id: str  # host:device:port
    host: str
    tx_bytes: float  # over the window
    rx_bytes: float
    peak_tx: float | None  # bytes/s, highest interval mean
    peak_rx: float | None
    rate_gbps: float | None  # link rate the port reported
    r_bw: float | None  # max(peak_tx, peak_rx) / link bytes/s
    xmit_wait_max: float | None  # ticks waited in the worst interval
    xmit_wait_rate_max: float | None  # ticks/s in the worst interval
    t_wait_max_s: float | None  # xmit_wait_max in seconds, when the tick length is given


def switch_traffic(
    store: Store,
    start: datetime | None = None,
    end: datetime | None = None,
    brackets: int = 5,
) -> SwitchView:
    """Per-switch volume, its histogram in `brackets` equal brackets, and how uneven it is."""
    where, params = window_sql(start, end)
    rows = store.query(
        f"""
        WITH c AS (SELECT component_id, max(peak_bw) AS cap FROM components GROUP BY ALL)
        SELECT s.component_id,
               sum(coalesce(read_bytes, 0)) AS r, sum(coalesce(write_bytes, 0)) AS w,
               max((coalesce(read_bytes, 0) + coalesce(write_bytes, 0)) / interval_s) AS peak,
               any_value(c.cap) AS cap
        FROM server_samples s LEFT JOIN c USING (component_id)
        WHERE kind = 'switch' AND job_id IS NULL AND interval_s > 0{where}
        GROUP BY s.component_id
        """,
        params,
    ).to_pylist()
    switches = [
        SwitchTraffic(
            component_id=r["component_id"],
            bytes=int(r["r"]) + int(r["w"]),
            read_bytes=int(r["r"]),
            write_bytes=int(r["w"]),
            peak_rate=float(r["peak"] or 0.0),
            r_bw=float(r["peak"] or 0.0) / r["cap"] if r["cap"] else None,
        )
        for r in rows
    ]
    switches.sort(key=lambda s: (-s.bytes, s.component_id))
    volumes = np.array([s.bytes for s in switches], dtype=float)
    histogram: list[Bracket] = []
    if len(volumes):
        top = float(volumes.max()) or 1.0
        edges = np.linspace(0.0, top, brackets + 1)
        counts, _ = np.histogram(volumes, bins=edges)
        histogram = [
            Bracket(float(edges[i]), float(edges[i + 1]), int(n)) for i, n in enumerate(counts)
        ]
    mean = float(volumes.mean()) if len(volumes) else None
    return SwitchView(
        switches=switches,
        histogram=histogram,
        total_bytes=int(volumes.sum()) if len(volumes) else 0,
        mean_bytes=mean,
        max_over_mean=float(volumes.max()) / mean if mean else None,
        cv=float(volumes.std()) / mean if mean else None,
    )


def interconnect(
    store: Store,
    start: datetime | None = None,
    end: datetime | None = None,
    hosts: list[str] | None = None,
    tick_ns: float | None = None,
) -> list[PortStats]:
    """R_BW and T_wait^max per InfiniBand port (optionally only the ports of `hosts`)."""
    where, params = window_sql(start, end)
    rows = store.query(
        f"""
        SELECT component_id,
               sum(value * interval_s) FILTER (WHERE metric = 'tx_bytes') AS tx,
               sum(value * interval_s) FILTER (WHERE metric = 'rx_bytes') AS rx,
               max(value) FILTER (WHERE metric = 'tx_bytes') AS peak_tx,
               max(value) FILTER (WHERE metric = 'rx_bytes') AS peak_rx,
               max(value) FILTER (WHERE metric = 'rate_gbps') AS rate_gbps,
               max(value * interval_s) FILTER (WHERE metric = 'port_xmit_wait') AS wait,
               max(value) FILTER (WHERE metric = 'port_xmit_wait') AS wait_rate
        FROM metrics
        WHERE kind = 'ib_port' AND job_id IS NULL{where}
        GROUP BY component_id ORDER BY component_id
        """,
        params,
    ).to_pylist()
    wanted = set(hosts) if hosts is not None else None
    out: list[PortStats] = []
    for r in rows:
        host = r["component_id"].split(":", 1)[0]
        if wanted is not None and host not in wanted:
            continue
        peak = max((v for v in (r["peak_tx"], r["peak_rx"]) if v is not None), default=None)
        link = r["rate_gbps"] * 1e9 / 8 if r["rate_gbps"] else None
        wait = r["wait"]
        out.append(
            PortStats(
                component_id=r["component_id"],
                host=host,
                tx_bytes=float(r["tx"] or 0.0),
                rx_bytes=float(r["rx"] or 0.0),
                peak_tx=r["peak_tx"],
                peak_rx=r["peak_rx"],
                rate_gbps=r["rate_gbps"],
                r_bw=peak / link if peak is not None and link else None,
                xmit_wait_max=wait,
                xmit_wait_rate_max=r["wait_rate"],
                t_wait_max_s=wait * tick_ns / 1e9 if wait is not None and tick_ns else None,
            )
        )
    return out


def job_interconnect(store: Store, job_id: str, tick_ns: float | None = None) -> list[PortStats]:
    """The K computer's per-job view: ports of the job's nodes, their forwarders and the
    OSS hosts of the OSTs the job used, over the job's run."""
    from iolens.store import queries

    job = queries.job(store, job_id)
    nodes = list(job.get("nodes") or [])
    hosts = nodes + queries.forwarders_of(store, nodes)
    osts = queries.osts_with_job_samples(store, job_id)
    if osts:
        marks = ", ".join("?" for _ in osts)
        parents = store.query(
            f"SELECT DISTINCT parent FROM components WHERE component_id IN ({marks}) "
            "AND parent IS NOT NULL",
            osts,
        )
        hosts += parents.column("parent").to_pylist()
    return interconnect(store, job.get("start"), job.get("end"), hosts=hosts, tick_ns=tick_ns)
