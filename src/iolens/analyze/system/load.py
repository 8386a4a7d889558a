"""Per-hour peak load of forwarders, OSTs and the MDS (Beacon section 4.1, Figure 5).

Beacon draws one cell per component and hour, shaded by the highest bandwidth reached in
that hour relative to the component's benchmarked peak, and reads the machine's
provisioning off the share of cells per level: mostly idle forwarders next to saturated
ones mean the static compute -> forwarder mapping wastes capacity. A peak, not a mean, is
what matters here: an hour with a few saturated minutes is an hour a job waited.

Rates come from component totals (`server_samples` rows with no job): bytes/s read plus
written for forwarders (`iofwd`: `run/iofwd/<svc>/stats` `read_bytes`/`write_bytes`; a
forwarder without them that is an LNet router: the bytes it routed, `route_bytes` of
`lnet_router` in `metrics`, since LNet does not know reads from writes) and OSTs
(`lustre_oss`: `obdfilter/<ost>/stats`), metadata ops/s for the MDS from its
targets' `mdt/<mdt>/md_stats` (kind `mdt`, `lustre_mds`; kind `mds` is the MDS host's
request queue and counts no operations). The capacity is `components.peak_bw`
(`peak_ops` of the MDT for the MDS), from the site topology; a component without one is
measured against the highest rate any component of its kind reached in the window, which
keeps cells comparable across the kind. A kind with no rate in the window says which
files it lacks (`KindLoad.missing`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from iolens.analyze.system._common import window_sql
from iolens.store.base import Store

#: Load levels, highest first, with the lower bound of each (fraction of capacity).
#: Beacon: "high", "mid", "low", "idle" = > 90 %, 50-90 %, 10-50 %, 0-10 % of peak.
LEVELS: tuple[tuple[str, float], ...] = (("high", 0.9), ("mid", 0.5), ("low", 0.1), ("idle", 0.0))
LEVEL_NAMES = tuple(name for name, _ in LEVELS)

#: Peaks are of one-minute mean rates: a single request landing in one sampling second is
#: not saturation, while a minute at full bandwidth is.
DEFAULT_RESOLUTION_S = 60

#: View kind -> sample kinds it reads and the rate it plots (bytes/s or metadata ops/s).
#: The MDS view reads its MDTs: the agent reports metadata operations per target.
VIEW_KINDS: dict[str, tuple[tuple[str, ...], str]] = {
    "forwarder": (("forwarder",), "bytes"),
    "ost": (("ost",), "bytes"),
    "mds": (("mdt",), "ops"),
}

#: `KindLoad.missing` of a view with no rate: the files its rate is read from.
MISSING = {
    "forwarder": "no forwarder traffic in this window: neither a forwarding daemon's "
    "read_bytes/write_bytes (run/iofwd/<svc>/stats, the iofwd source) nor an LNet router's "
    "route_bytes (lnet stats, the lnet_router source)",
    "ost": "no OST traffic in this window: no read_bytes/write_bytes from "
    "obdfilter/<ost>/stats (the lustre_oss source)",
    "mds": "no MDS load in this window: no metadata operations from mdt/<mdt>/md_stats "
    "(the lustre_mds source)",
}

#: Basis of a component's rate: the columns summed (`server_samples`), or `route_bytes`.
BASIS = {"bytes": "read_bytes + write_bytes", "ops": "md_ops"}
ROUTED = "route_bytes"


def level_of(load: float) -> str:
    """The Beacon level of a peak load (fraction of capacity): high above 90 %, and so on."""
    if load > LEVELS[0][1]:
        return "high"
    for name, low in LEVELS[1:]:
        if load >= low:
            return name
    return "idle"


@dataclass
class Cell:
    """One component-hour: the highest rate of the hour and its share of capacity."""

    component_id: str
    hour: datetime
    peak: float  # bytes/s (forwarder, ost) or ops/s (mds)
    load: float  # peak / capacity
    level: str


@dataclass
class ComponentLoad:
    component_id: str
    capacity: float
    capacity_source: str  # "benchmark" (components table) or "observed" (kind's highest rate)
    peak: float
    peak_load: float
    peak_hour: datetime
    hours: dict[str, int]  # component-hours per level
    basis: str  # what the rate is: `read_bytes + write_bytes`, `route_bytes` or `md_ops`


@dataclass
class KindLoad:
    """Figure 5 for one component kind, plus the share of cells per level Beacon quotes."""

    kind: str
    unit: str  # "bytes/s" or "ops/s"
    hours: list[datetime]
    components: list[ComponentLoad]  # most loaded first
    counts: dict[str, int]
    shares: dict[str, float]  # cells per level / all cells (sums to 1 when there are cells)
    cells: list[Cell] = field(default_factory=list)
    missing: str | None = None  # why there are no cells, when there are none


@dataclass
class HourImbalance:
    hour: datetime
    max_load: float
    min_load: float
    mean_load: float
    busiest: str
    idlest: str
    high: list[str]
    idle: list[str]


@dataclass
class Imbalance:
    """How uneven the load is among components of one kind, hour by hour.

    `idle_next_to_saturated` counts hours in which one component was above 90 % of its
    peak while another stayed under 10 %: capacity a better mapping could have used.
    """

    kind: str
    hours: int  # hours with at least two components reporting
    idle_next_to_saturated: int
    share: float | None  # of those hours
    mean_spread: float | None  # mean over hours of (max load - min load)
    by_hour: list[HourImbalance]


def hourly_peaks(
    store: Store,
    kind: str,
    start: datetime | None = None,
    end: datetime | None = None,
    resolution_s: int = DEFAULT_RESOLUTION_S,
) -> list[dict]:
    """(component_id, hour, peak, capacity, basis) rows: the SQL half of `hourly_load`."""
    if kind not in VIEW_KINDS:
        raise ValueError(f"unknown load kind {kind!r}; one of {', '.join(VIEW_KINDS)}")
    kinds, unit = VIEW_KINDS[kind]
    if unit == "bytes":
        amount = "coalesce(read_bytes, 0) + coalesce(write_bytes, 0)"
        present = "(read_bytes IS NOT NULL OR write_bytes IS NOT NULL)"
        cap = "peak_bw"
    else:
        amount, present, cap = "md_ops", "md_ops IS NOT NULL", "peak_ops"
    if resolution_s < 0 or (resolution_s and 3600 % resolution_s):
        raise ValueError(f"resolution must divide an hour, got {resolution_s} s")
    where, params = window_sql(start, end)
    marks = ", ".join("?" for _ in kinds)
    # Amounts summed per slot over the seconds the samples cover: a mean rate that a gap
    # in the samples does not dilute. Resolution 0: every sample is its own slot.
    slot = (
        f"make_timestamp((epoch_us(ts) - 1) // {int(resolution_s * 1_000_000)} "
        f"* {int(resolution_s * 1_000_000)})"
        if resolution_s
        else "ts - INTERVAL '1 microsecond'"
    )
    basis = BASIS[unit]
    raw = f"""
        SELECT component_id, ts, interval_s, {amount} AS amount, '{basis}' AS basis
        FROM server_samples
        WHERE job_id IS NULL AND kind IN ({marks}) AND interval_s > 0 AND {present}{where}
    """
    args = [*kinds, *params]
    if kind == "forwarder":  # LNet routers: the bytes routed, where no daemon counts more
        raw += f"""
        UNION ALL
        SELECT component_id, ts, interval_s, value * interval_s, '{ROUTED}'
        FROM metrics
        WHERE job_id IS NULL AND kind = 'forwarder' AND metric = '{ROUTED}'
          AND interval_s > 0{where}
        """
        args += params
    sql = f"""
        WITH raw AS ({raw}),
        own AS (
            SELECT component_id,
                   CASE WHEN bool_or(basis = '{basis}') THEN '{basis}' ELSE '{ROUTED}' END AS basis
            FROM raw GROUP BY component_id
        ),
        s AS (
            SELECT component_id, any_value(basis) AS basis, {slot} AS slot,
                   sum(amount) AS amount, sum(interval_s) AS secs
            FROM raw JOIN own USING (component_id, basis)
            GROUP BY component_id, slot
        ),
        c AS (SELECT component_id, max({cap}) AS capacity FROM components GROUP BY component_id)
        SELECT s.component_id, date_trunc('hour', s.slot) AS hour,
               max(s.amount / s.secs) AS peak, any_value(c.capacity) AS capacity,
               any_value(s.basis) AS basis
        FROM s LEFT JOIN c USING (component_id)
        GROUP BY s.component_id, hour
        ORDER BY s.component_id, hour
    """
    return store.query(sql, args).to_pylist()


def hourly_load(
    store: Store,
    kind: str,
    start: datetime | None = None,
    end: datetime | None = None,
    resolution_s: int = DEFAULT_RESOLUTION_S,
) -> KindLoad:
    """Per-hour peak load of every component of `kind` (forwarder, ost, mds) in the window.

    The peak is the highest mean rate over `resolution_s` slots (0: over single samples).
    """
    rows = hourly_peaks(store, kind, start, end, resolution_s)
    unit = "bytes/s" if VIEW_KINDS[kind][1] == "bytes" else "ops/s"
    observed = max((float(r["peak"] or 0.0) for r in rows), default=0.0)
    cells: list[Cell] = []
    per: dict[str, list[Cell]] = {}
    caps: dict[str, tuple[float, str]] = {}
    bases: dict[str, str] = {}
    for r in rows:
        bases[r["component_id"]] = r["basis"]
        cap = r["capacity"]
        if cap is not None and cap > 0:
            caps[r["component_id"]] = (float(cap), "benchmark")
        else:
            caps[r["component_id"]] = (observed, "observed")
        capacity = caps[r["component_id"]][0]
        peak = float(r["peak"] or 0.0)
        load = peak / capacity if capacity > 0 else 0.0
        cell = Cell(r["component_id"], r["hour"], peak, load, level_of(load))
        cells.append(cell)
        per.setdefault(cell.component_id, []).append(cell)
    components = []
    for cid, mine in per.items():
        top = max(mine, key=lambda c: (c.peak, -c.hour.timestamp()))
        hours = {name: 0 for name in LEVEL_NAMES}
        for c in mine:
            hours[c.level] += 1
        capacity, source = caps[cid]
        components.append(
            ComponentLoad(cid, capacity, source, top.peak, top.load, top.hour, hours, bases[cid])
        )
    components.sort(key=lambda c: (-c.hours["high"], -c.peak_load, c.component_id))
    counts = {name: sum(c.level == name for c in cells) for name in LEVEL_NAMES}
    shares = {name: (n / len(cells) if cells else 0.0) for name, n in counts.items()}
    return KindLoad(
        kind=kind,
        unit=unit,
        hours=sorted({c.hour for c in cells}),
        components=components,
        counts=counts,
        shares=shares,
        cells=cells,
        missing=None if cells else MISSING[kind],
    )


def imbalance(load: KindLoad) -> Imbalance:
    """Hour-by-hour spread of load among the components of `load` (Beacon 4.1, point 3)."""
    by_hour: dict[datetime, list[Cell]] = {}
    for c in load.cells:
        by_hour.setdefault(c.hour, []).append(c)
    rows: list[HourImbalance] = []
    for hour in sorted(by_hour):
        cells = by_hour[hour]
        if len(cells) < 2:
            continue
        busiest = max(cells, key=lambda c: (c.load, c.component_id))
        idlest = min(cells, key=lambda c: (c.load, c.component_id))
        rows.append(
            HourImbalance(
                hour=hour,
                max_load=busiest.load,
                min_load=idlest.load,
                mean_load=sum(c.load for c in cells) / len(cells),
                busiest=busiest.component_id,
                idlest=idlest.component_id,
                high=sorted(c.component_id for c in cells if c.level == "high"),
                idle=sorted(c.component_id for c in cells if c.level == "idle"),
            )
        )
    both = sum(1 for r in rows if r.high and r.idle)
    return Imbalance(
        kind=load.kind,
        hours=len(rows),
        idle_next_to_saturated=both,
        share=both / len(rows) if rows else None,
        mean_spread=sum(r.max_load - r.min_load for r in rows) / len(rows) if rows else None,
        by_hour=rows,
    )
