"""The interconnect: switch traffic balance (Beacon 4.4) and port utilisation and congestion
(the K computer's R_BW and T_wait^max, sections 4 and 6.4).

Beacon found a large job's inter-supernode traffic bipolar across 40 switches — a
histogram of per-switch volume in five brackets made the imbalance obvious although the
application's own profile looked balanced. A switch's volume here is the traffic between it
and the hosts it serves. From its own counters when the agent's `fabric` source reads them
(`perfquery -x` on the ports `ibnetdiscover` found: `metrics` kind `switch_port`, host-facing
ports marked by `peer_host`), its other ports' traffic given apart as `uplink_bytes`.
Otherwise from what its hosts sent into it and received from it: their InfiniBand port
counters (`infiniband` source, `/sys/class/infiniband/<dev>/ports/<n>/counters/
port_xmit_data` and `port_rcv_data`, or the fabric source's reading of an HCA port:
`metrics` kind `ib_port`, `tx_bytes`/`rx_bytes`), each port under the switch it is cabled to
(its `components` row, from the fabric source) or its host's leaf switch (the topology's
`parent`). Every port of a host counts (a host with ports on two fabrics counts both).
Switches with hosts and no data are left out of the histogram and listed as `unmonitored`;
with no switch data at all the view is empty and `missing` says which piece is absent.

The K computer's framework rated jobs by two fabric figures on the I/O nodes they used:
R_BW, the peak bandwidth over the theoretical bandwidth (high is good: the links were
used), and T_wait^max, the longest time packets waited for transmit credits (low is
good). Here they come from the agent's InfiniBand port metrics (`metrics` kind `ib_port`,
and `switch_port` from the fabric source):
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
    # Through its ports not facing a host (inter-switch links, ports whose peer the
    # cabling does not show), both ways: only from its own counters, else None.
    uplink_bytes: int | None = None
    basis: str = "hosts"  # whose counters: "switch" (its own ports) or "hosts" (theirs)


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
    kind: str = "ib_port"  # or "switch_port" (fabric source): `host` is then the switch


#: Peak rates are one-minute means, as the load view's (`load.DEFAULT_RESOLUTION_S`).
PEAK_SLOT_US = 60 * 1_000_000


def switch_traffic(
    store: Store,
    start: datetime | None = None,
    end: datetime | None = None,
    brackets: int = 5,
) -> SwitchView:
    """Per-switch volume between it and its hosts (its own host-facing port counters when
    the fabric source reads them, else its hosts' ports), its histogram in `brackets` equal
    brackets from 0 to the busiest switch, and how uneven it is."""
    if brackets < 1:
        raise ValueError(f"brackets must be at least 1, got {brackets}")
    topo = store.query(
        """
        SELECT s.component_id AS switch, max(s.peak_bw) AS cap,
               count(DISTINCT split_part(h.component_id, ':', 1)) AS hosts
        FROM components s LEFT JOIN components h
             ON h.parent = s.component_id AND h.kind <> 'switch_port'
        WHERE s.kind = 'switch' GROUP BY s.component_id ORDER BY s.component_id
        """
    ).to_pylist()
    if not topo:
        return _no_switch_data(
            "no switch topology: `components` lists no switch (kind `switch`): give the "
            "hosts under each switch as their `parent`, or run the agent's fabric source"
        )
    where, params = window_sql(start, end)
    from_hosts = {r["switch"]: r for r in _host_side(store, where, params)}
    from_ports = {r["switch"]: r for r in _switch_side(store, where, params)}
    if not any(t["hosts"] for t in topo) and not from_ports:
        return _no_switch_data(
            "no switch topology: no host in `components` has a switch (kind `switch`) as "
            "its `parent`, so no port traffic can be put under a switch"
        )
    return _switch_view(topo, from_hosts, from_ports, brackets)


def _host_side(store: Store, where: str, params: list) -> list[dict]:
    """Per switch: its hosts' own port counters (`ib_port`). A port is under the switch its
    `components` row names (the fabric source's cabling), else under its host's switch."""
    # Per port and minute: bytes each way and the seconds each direction's samples cover,
    # so a lost sample does not dilute the port's rate; a switch's rate in a minute is the
    # sum of its hosts' port rates.
    return store.query(
        f"""
        WITH switches AS (SELECT component_id FROM components WHERE kind = 'switch'),
        placed AS (
            SELECT m.port, coalesce(p.parent, h.parent) AS switch
            FROM (SELECT DISTINCT component_id AS port FROM metrics
                  WHERE kind = 'ib_port' AND job_id IS NULL) m
            LEFT JOIN components p ON p.component_id = m.port AND p.kind = 'ib_port'
                 AND p.parent IN (SELECT component_id FROM switches)
            LEFT JOIN components h ON h.component_id = split_part(m.port, ':', 1)
                 AND h.parent IN (SELECT component_id FROM switches)
            WHERE coalesce(p.parent, h.parent) IS NOT NULL
        ),
        ports AS (
            SELECT placed.switch, split_part(m.component_id, ':', 1) AS host,
                   m.component_id AS port, (epoch_us(ts) - 1) // {PEAK_SLOT_US} AS slot,
                   sum(value * interval_s) FILTER (WHERE metric = 'tx_bytes') AS tx,
                   sum(value * interval_s) FILTER (WHERE metric = 'rx_bytes') AS rx,
                   sum(interval_s) FILTER (WHERE metric = 'tx_bytes') AS tx_secs,
                   sum(interval_s) FILTER (WHERE metric = 'rx_bytes') AS rx_secs
            FROM metrics m JOIN placed ON placed.port = m.component_id
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


def _switch_side(store: Store, where: str, params: list) -> list[dict]:
    """Per switch: its own port counters (`switch_port`, the fabric source). On a port
    facing a host (`peer_host` 1) the switch receives what the host sends: `tx` here is
    the hosts' traffic into the switch (the port's `rx_bytes`), as on the host side. Every
    other port (inter-switch links, ports the cabling shows no peer for) is `uplink`."""
    return store.query(
        f"""
        WITH peers AS (
            SELECT component_id AS port, max(value) = 1 AS to_host FROM metrics
            WHERE kind = 'switch_port' AND metric = 'peer_host' GROUP BY ALL
        ),
        ports AS (
            SELECT c.parent AS switch, m.component_id AS port,
                   coalesce(peers.to_host, false) AS to_host,
                   (epoch_us(ts) - 1) // {PEAK_SLOT_US} AS slot,
                   sum(value * interval_s) FILTER (WHERE metric = 'tx_bytes') AS tx,
                   sum(value * interval_s) FILTER (WHERE metric = 'rx_bytes') AS rx,
                   sum(interval_s) FILTER (WHERE metric = 'tx_bytes') AS tx_secs,
                   sum(interval_s) FILTER (WHERE metric = 'rx_bytes') AS rx_secs
            FROM metrics m
            JOIN components c ON c.component_id = m.component_id AND c.kind = 'switch_port'
            LEFT JOIN peers ON peers.port = m.component_id
            WHERE m.kind = 'switch_port' AND m.job_id IS NULL AND interval_s > 0
              AND c.parent IS NOT NULL AND metric IN ('tx_bytes', 'rx_bytes'){where}
            GROUP BY ALL
        ),
        minutes AS (
            SELECT switch, slot,
                   sum(coalesce(tx / tx_secs, 0) + coalesce(rx / rx_secs, 0)) AS rate
            FROM ports WHERE to_host GROUP BY ALL
        ),
        totals AS (
            SELECT switch,
                   coalesce(sum(coalesce(rx, 0)) FILTER (WHERE to_host), 0) AS tx,
                   coalesce(sum(coalesce(tx, 0)) FILTER (WHERE to_host), 0) AS rx,
                   count(DISTINCT port) FILTER (WHERE to_host) AS reporting,
                   coalesce(sum(coalesce(tx, 0) + coalesce(rx, 0))
                            FILTER (WHERE NOT to_host), 0) AS uplink
            FROM ports GROUP BY switch
        )
        SELECT totals.*, max(minutes.rate) AS peak
        FROM totals LEFT JOIN minutes USING (switch) GROUP BY ALL
        """,
        params,
    ).to_pylist()


def _no_switch_data(why: str, unmonitored: list[str] | None = None) -> SwitchView:
    return SwitchView([], [], 0, None, None, None, unmonitored or [], why)


def _switch_view(
    topo: list[dict], hosts: dict[str, dict], ports: dict[str, dict], brackets: int
) -> SwitchView:
    """The view from the topology's switches, their own ports (`ports`, preferred when a
    host-facing port reports) and their hosts' ports (`hosts`)."""
    switches: list[SwitchTraffic] = []
    for t in topo:
        p, h = ports.get(t["switch"]), hosts.get(t["switch"])
        r, basis = (p, "switch") if p is not None and p["reporting"] else (h, "hosts")
        if r is None:
            r, basis = p, "switch"  # a switch whose own ports report, none facing a host
        if r is None:
            continue
        peak = float(r["peak"] or 0.0)
        switches.append(
            SwitchTraffic(
                component_id=t["switch"],
                bytes=round(r["tx"] + r["rx"]),
                tx_bytes=round(r["tx"]),
                rx_bytes=round(r["rx"]),
                hosts=int(t["hosts"]),
                hosts_reporting=int(r["reporting"]),
                peak_rate=peak,
                r_bw=peak / t["cap"] if t["cap"] else None,
                uplink_bytes=round(p["uplink"]) if p is not None else None,
                basis=basis,
            )
        )
    reported = {s.component_id for s in switches}
    unmonitored = [t["switch"] for t in topo if t["hosts"] and t["switch"] not in reported]
    if not switches:
        n_hosts = sum(int(t["hosts"]) for t in topo)
        served = sum(1 for t in topo if t["hosts"])
        return _no_switch_data(
            "no InfiniBand port counters (/sys/class/infiniband/<dev>/ports/<n>/counters, "
            f"the agent's infiniband source) from any of the {n_hosts} hosts behind the "
            f"{served} switches in this window, and no switch counters (the agent's fabric "
            "source): run the agent on those hosts, or its fabric source on one",
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
    """R_BW and T_wait^max per InfiniBand port, hosts' and switches' (optionally only the
    ports of `hosts`, which may name switches)."""
    where, params = window_sql(start, end)
    rows = store.query(
        f"""
        SELECT component_id, any_value(kind) AS kind,
               sum(value * interval_s) FILTER (WHERE metric = 'tx_bytes') AS tx,
               sum(value * interval_s) FILTER (WHERE metric = 'rx_bytes') AS rx,
               max(value) FILTER (WHERE metric = 'tx_bytes') AS peak_tx,
               max(value) FILTER (WHERE metric = 'rx_bytes') AS peak_rx,
               max(value) FILTER (WHERE metric = 'rate_gbps') AS rate_gbps,
               max(value * interval_s) FILTER (WHERE metric = 'port_xmit_wait') AS wait,
               max(value) FILTER (WHERE metric = 'port_xmit_wait') AS wait_rate
        FROM metrics
        WHERE kind IN ('ib_port', 'switch_port') AND job_id IS NULL{where}
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
                kind=r["kind"],
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
