"""The interconnect: switch traffic balance (Beacon 4.4) and port utilisation and congestion
(the K computer's R_BW and T_wait^max, sections 4 and 6.4).

Beacon found a large job's inter-supernode traffic bipolar across 40 switches — a
histogram of per-switch volume in five brackets made the imbalance obvious although the
application's own profile looked balanced. No agent source reads a switch's own counters
(that takes the fabric manager's `perfquery` or SNMP), so a switch's volume here is what
the hosts it serves sent into it and received from it: their InfiniBand port counters
(`infiniband` source, `/sys/class/infiniband/<dev>/ports/<n>/counters/port_xmit_data`
and `port_rcv_data`: `metrics` kind `ib_port`, `tx_bytes`/`rx_bytes`), each host counted
under its leaf switch, the `parent` the topology gives it (`components` kind `switch`).
Every port of a host counts (a host with ports on two fabrics counts both). Switches none
of whose hosts report are left out of the histogram and listed as `unmonitored`; with no
switch data at all the view is empty and `missing` says which piece is absent.

The K computer's framework rated jobs by two fabric figures on the I/O nodes they used:
R_BW, the peak bandwidth over the theoretical bandwidth (high is good: the links were
used), and T_wait^max, the longest time packets waited for transmit credits (low is
good). Here they come from the agent's InfiniBand port metrics (`metrics` kind `ib_port`):
`tx_bytes`/`rx_bytes` rates against `rate_gbps`, and `port_xmit_wait`, which counts
ticks a port had data but no credits. A tick's length is hardware-specific, so the wait
is given in ticks, and in seconds only when the caller knows the tick.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from iolens.analyze.system._common import window_sql
from iolens.store.base import Store


@dataclass
class SwitchTraffic:
    component_id: str
    bytes: int  # tx + rx of its hosts' ports over the window
    tx_bytes: int  # sent by its hosts into the switch
    rx_bytes: int  # delivered by the switch to its hosts
    hosts: int  # hosts under it in the topology
    hosts_reporting: int  # of those, hosts with port counters in the window
    peak_rate: float  # bytes/s, highest one-minute mean of its hosts' summed rates
    r_bw: float | None  # peak_rate / components.peak_bw, when the benchmark is known


@dataclass
class Bracket:
    low: float  # bytes, inclusive
    high: float  # bytes, exclusive (the last bracket includes its top)
    switches: int


@dataclass
class SwitchView:
    switches: list[SwitchTraffic]  # busiest first; only switches with a reporting host
    histogram: list[Bracket]  # Beacon Figure 11(b): switches per volume bracket
    total_bytes: int
    mean_bytes: float | None
    max_over_mean: float | None  # 1 = perfectly even
    cv: float | None  # standard deviation / mean of per-switch volume
    unmonitored: list[str] = field(default_factory=list)  # switches no host of reports
    missing: str | None = None  # why there is no switch traffic, when there is none


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


#: Peak rates are one-minute means, as the load view's (`load.DEFAULT_RESOLUTION_S`).
PEAK_SLOT_US = 60 * 1_000_000


def switch_traffic(
    store: Store,
    start: datetime | None = None,
    end: datetime | None = None,
    brackets: int = 5,
) -> SwitchView:
    """Per-switch volume from its hosts' ports, its histogram in `brackets` equal brackets
    from 0 to the busiest switch, and how uneven it is."""
    if brackets < 1:
        raise ValueError(f"brackets must be at least 1, got {brackets}")
    topo = store.query(
        """
        SELECT s.component_id AS switch, max(s.peak_bw) AS cap,
               count(DISTINCT h.component_id) AS hosts
        FROM components s LEFT JOIN components h ON h.parent = s.component_id
        WHERE s.kind = 'switch' GROUP BY s.component_id ORDER BY s.component_id
        """
    ).to_pylist()
    served = [t for t in topo if t["hosts"]]
    if not served:
        return _no_switch_data(
            "no switch topology: no host in `components` has a switch (kind `switch`) as "
            "its `parent`, so no port traffic can be put under a switch"
            if topo
            else "no switch topology: `components` lists no switch (kind `switch`) with the "
            "hosts under it as their `parent`"
        )
    where, params = window_sql(start, end)
    # Per port and minute: bytes each way and the seconds each direction's samples cover,
    # so a lost sample does not dilute the port's rate; a switch's rate in a minute is the
    # sum of its hosts' port rates.
    rows = store.query(
        f"""
        WITH hosts AS (
            SELECT h.component_id AS host, h.parent AS switch FROM components h
            JOIN components s ON s.component_id = h.parent AND s.kind = 'switch'
        ),
        ports AS (
            SELECT hosts.switch, hosts.host, m.component_id AS port,
                   (epoch_us(ts) - 1) // {PEAK_SLOT_US} AS slot,
                   sum(value * interval_s) FILTER (WHERE metric = 'tx_bytes') AS tx,
                   sum(value * interval_s) FILTER (WHERE metric = 'rx_bytes') AS rx,
                   sum(interval_s) FILTER (WHERE metric = 'tx_bytes') AS tx_secs,
                   sum(interval_s) FILTER (WHERE metric = 'rx_bytes') AS rx_secs
            FROM metrics m JOIN hosts ON hosts.host = split_part(m.component_id, ':', 1)
            WHERE m.kind = 'ib_port' AND m.job_id IS NULL AND interval_s > 0
              AND metric IN ('tx_bytes', 'rx_bytes'){where}
            GROUP BY ALL
        ),
        minutes AS (
            SELECT switch, slot,
                   sum(coalesce(tx / tx_secs, 0) + coalesce(rx / rx_secs, 0)) AS rate
            FROM ports GROUP BY ALL
        ),
        totals AS (
            SELECT switch, sum(coalesce(tx, 0)) AS tx, sum(coalesce(rx, 0)) AS rx,
                   count(DISTINCT host) AS reporting
            FROM ports GROUP BY switch
        )
        SELECT totals.*, max(minutes.rate) AS peak
        FROM totals JOIN minutes USING (switch) GROUP BY ALL
        """,
        params,
    ).to_pylist()
    return _switch_view(served, {r["switch"]: r for r in rows}, brackets)


def _no_switch_data(why: str, unmonitored: list[str] | None = None) -> SwitchView:
    return SwitchView([], [], 0, None, None, None, unmonitored or [], why)


def _switch_view(served: list[dict], traffic: dict[str, dict], brackets: int) -> SwitchView:
    """The view from the topology's switches (those with hosts) and their hosts' ports."""
    switches = [
        SwitchTraffic(
            component_id=t["switch"],
            bytes=round(r["tx"] + r["rx"]),
            tx_bytes=round(r["tx"]),
            rx_bytes=round(r["rx"]),
            hosts=int(t["hosts"]),
            hosts_reporting=int(r["reporting"]),
            peak_rate=float(r["peak"] or 0.0),
            r_bw=float(r["peak"] or 0.0) / t["cap"] if t["cap"] else None,
        )
        for t in served
        if (r := traffic.get(t["switch"])) is not None
    ]
    unmonitored = [t["switch"] for t in served if t["switch"] not in traffic]
    if not switches:
        hosts = sum(int(t["hosts"]) for t in served)
        return _no_switch_data(
            "no InfiniBand port counters (/sys/class/infiniband/<dev>/ports/<n>/counters, "
            f"the agent's infiniband source) from any of the {hosts} hosts behind the "
            f"{len(served)} switches in this window: run the agent on those hosts",
            unmonitored,
        )
    switches.sort(key=lambda s: (-s.bytes, s.component_id))
    volumes = np.array([s.bytes for s in switches], dtype=float)
    top = float(volumes.max()) or 1.0
    counts, edges = np.histogram(volumes, bins=brackets, range=(0.0, top))
    histogram = [
        Bracket(float(edges[i]), float(edges[i + 1]), int(n)) for i, n in enumerate(counts)
    ]
    mean = float(volumes.mean())
    return SwitchView(
        switches=switches,
        histogram=histogram,
        total_bytes=int(volumes.sum()),
        mean_bytes=mean,
        max_over_mean=float(volumes.max()) / mean if mean else None,
        cv=float(volumes.std()) / mean if mean else None,
        unmonitored=unmonitored,
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
