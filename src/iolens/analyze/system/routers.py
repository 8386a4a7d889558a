"""LNet routers: the traffic each routed over time and how evenly they shared it.

An LNet router forwards Lustre traffic between the compute and storage fabrics, the role
Beacon's forwarding nodes play: one router carrying most of the load slows every job behind
it while the others idle. The `lnet_router` source reads LNet's global stats
(`/proc/sys/lnet/stats`, debugfs after 2.10) on each node: `route_bytes` is what the node
forwarded for others (the stats cannot tell reads from writes). Every Lustre node has the
counter; only routers move it, so a router here is a component whose `route_bytes` was ever
above zero (an idle router in the window still counts: idle beside busy ones is the
imbalance). Rates are one-minute means, as the load view's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime

import numpy as np

from iolens.analyze.system._common import window_sql
from iolens.store.base import Store

#: One-minute slots, as `network.PEAK_SLOT_US` and the load view.
SLOT_US = 60 * 1_000_000


@dataclass
class RouterTraffic:
    component_id: str
    bytes: int  # routed over the window
    msgs: int  # LNet messages routed
    drop_bytes: int  # dropped by LNet on this node
    peak_rate: float  # bytes/s, highest one-minute mean
    mean_rate: float  # bytes/s over the minutes it reported


@dataclass
class RouterView:
    routers: list[RouterTraffic]  # busiest first
    minutes: list[datetime]  # start of each one-minute slot with data, oldest first
    rates: dict[str, list[float | None]]  # router -> bytes/s per minute (None: no sample)
    total_bytes: int
    max_over_mean: float | None  # 1 = perfectly even
    cv: float | None  # standard deviation / mean of per-router volume
    missing: str | None = None
    notes: list[str] = field(default_factory=list)


def router_traffic(
    store: Store, start: datetime | None = None, end: datetime | None = None
) -> RouterView:
    """Per router: bytes routed, the peak and mean minute, its load per minute, and how
    uneven the routers' volumes are."""
    where, params = window_sql(start, end)
    rows = store.query(
        f"""
        WITH routers AS (
            SELECT DISTINCT component_id FROM metrics
            WHERE metric = 'route_bytes' AND job_id IS NULL AND value > 0
        )
        SELECT component_id, (epoch_us(ts) - 1) // {SLOT_US} AS slot,
               sum(value * interval_s) FILTER (WHERE metric = 'route_bytes') AS bytes,
               sum(interval_s) FILTER (WHERE metric = 'route_bytes') AS secs,
               sum(value * interval_s) FILTER (WHERE metric = 'route_msgs') AS msgs,
               sum(value * interval_s) FILTER (WHERE metric = 'drop_bytes') AS drops
        FROM metrics
        WHERE component_id IN (SELECT component_id FROM routers) AND job_id IS NULL
          AND interval_s > 0 AND metric IN ('route_bytes', 'route_msgs', 'drop_bytes'){where}
        GROUP BY ALL ORDER BY slot, component_id
        """,
        params,
    ).to_pylist()
    rows = [r for r in rows if r["secs"]]
    if not rows:
        return RouterView(
            [],
            [],
            {},
            0,
            None,
            None,
            missing="no LNet router traffic: no node's `route_bytes` (the agent's lnet_router "
            "source, /proc/sys/lnet/stats) moved in this window",
        )
    slots = sorted({r["slot"] for r in rows})
    index = {s: i for i, s in enumerate(slots)}
    names = sorted({r["component_id"] for r in rows})
    rates: dict[str, list[float | None]] = {n: [None] * len(slots) for n in names}
    totals = {n: {"bytes": 0.0, "msgs": 0.0, "drops": 0.0, "secs": 0.0} for n in names}
    for r in rows:
        rates[r["component_id"]][index[r["slot"]]] = r["bytes"] / r["secs"]
        t = totals[r["component_id"]]
        t["bytes"] += r["bytes"]
        t["msgs"] += r["msgs"] or 0.0
        t["drops"] += r["drops"] or 0.0
        t["secs"] += r["secs"]
    routers = [
        RouterTraffic(
            component_id=n,
            bytes=round(totals[n]["bytes"]),
            msgs=round(totals[n]["msgs"]),
            drop_bytes=round(totals[n]["drops"]),
            peak_rate=max(v for v in rates[n] if v is not None),
            mean_rate=totals[n]["bytes"] / totals[n]["secs"],
        )
        for n in names
    ]
    routers.sort(key=lambda r: (-r.bytes, r.component_id))
    volumes = np.array([r.bytes for r in routers], dtype=float)
    mean = float(volumes.mean())
    minutes = [datetime.fromtimestamp(s * SLOT_US / 1e6, UTC).replace(tzinfo=None) for s in slots]
    notes = [] if len(routers) > 1 else ["one router: nothing to balance against"]
    return RouterView(
        routers=routers,
        minutes=minutes,
        rates=rates,
        total_bytes=int(volumes.sum()),
        max_over_mean=float(volumes.max()) / mean if mean else None,
        cv=float(volumes.std()) / mean if mean else None,
        notes=notes,
    )
