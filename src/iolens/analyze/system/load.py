"""Per-hour peak load of forwarders, OSTs and the MDS (Beacon section 4.1, Figure 5).

Beacon draws one cell per component and hour, shaded by the highest bandwidth reached in
that hour relative to the component's benchmarked peak, and reads the machine's
provisioning off the share of cells per level: mostly idle forwarders next to saturated
ones mean the static compute -> forwarder mapping wastes capacity. A peak, not a mean, is
what matters here: an hour with a few saturated minutes is an hour a job waited.

Rates come from component totals (`server_samples` rows with no job): bytes/s read plus
written for forwarders (`iofwd`: `run/iofwd/<svc>/stats` `read_bytes`/`write_bytes`) and
OSTs (`lustre_oss`: `obdfilter/<ost>/stats`), metadata ops/s for the MDS from its
targets' `mdt/<mdt>/md_stats` (kind `mdt`, `lustre_mds`; kind `mds` is the MDS host's
request queue and counts no operations). The capacity is `components.peak_bw`
(`peak_ops` of the MDT for the MDS), from the site topology; a component without one is
measured against the highest rate any component of its kind reached in the window, which
keeps cells comparable across the kind.
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
    """(component_id, hour, peak, capacity) rows: the SQL half of `hourly_load`."""
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
    sql = f"""
        WITH s AS (
            SELECT component_id, {slot} AS slot, sum({amount}) AS amount, sum(interval_s) AS secs
            FROM server_samples
            WHERE job_id IS NULL AND kind IN ({marks}) AND interval_s > 0 AND {present}{where}
            GROUP BY ALL
        ),
        c AS (SELECT component_id, max({cap}) AS capacity FROM components GROUP BY component_id)
        SELECT s.component_id, date_trunc('hour', s.slot) AS hour,
               max(s.amount / s.secs) AS peak, any_value(c.capacity) AS capacity
        FROM s LEFT JOIN c USING (component_id)
        GROUP BY s.component_id, hour
        ORDER BY s.component_id, hour
    """
    return store.query(sql, [*kinds, *params]).to_pylist()


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
    for r in rows:
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
        components.append(ComponentLoad(cid, capacity, source, top.peak, top.load, top.hour, hours))
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
