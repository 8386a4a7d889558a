"""Component anomalies counted by how long they lasted and where (Beacon Table 2).

Beacon found most fail-slow episodes transient (under 4 hours) but a fifth lasting beyond
half a day, on the forwarding and the storage layer alike: the table tells an admin whether
the detectors fire on blips or on lasting faults. Rows come from the `anomalies` table as
the detectors stored them; an episode still open (`end` NULL) is counted by its length so
far, up to the newest server sample, and flagged as ongoing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from iolens.store.base import Store

#: Beacon Table 2's duration classes, in hours: [low, high).
DURATION_CLASSES: tuple[tuple[float, float], ...] = (
    (0.0, 1.0),
    (1.0, 4.0),
    (4.0, 12.0),
    (12.0, 96.0),
    (96.0, float("inf")),
)

#: Service layer of each component kind (the anomalies' `component_kind`).
LAYER_OF = {
    "forwarder": "forwarding",
    "ost": "storage",
    "oss": "storage",
    "mdt": "metadata",
    "mds": "metadata",
    "switch": "network",
}


def class_label(low: float, high: float) -> str:
    """`[1,4)` style labels; the first class is open at 0 as in Beacon's table."""
    lo = f"{low:g}"
    if high == float("inf"):
        return f">={lo}"
    return f"({lo},{high:g})" if low == 0 else f"[{lo},{high:g})"


@dataclass
class AnomalyDurations:
    """Episode counts per duration class (rows) and layer (columns)."""

    layers: list[str]
    classes: list[str]  # labels of DURATION_CLASSES, hours
    counts: dict[str, dict[str, int]]  # class -> layer -> episodes
    ongoing: dict[str, int]  # layer -> episodes still open
    total: int
    as_of: datetime | None  # the newest sample: where ongoing episodes end for now
    kinds: dict[str, int] = field(default_factory=dict)  # detector verdict -> episodes


def anomaly_durations(
    store: Store, start: datetime | None = None, end: datetime | None = None
) -> AnomalyDurations:
    """Count the episodes overlapping (start, end] by duration class and layer."""
    as_of = store.query("SELECT max(ts) AS t FROM server_samples").to_pylist()[0]["t"]
    sql = 'SELECT kind, component_kind, "start", "end" FROM anomalies WHERE true'
    params: list = []
    if start is not None:
        sql += ' AND coalesce("end", ?) > ?'
        params += [as_of or start, start]
    if end is not None:
        sql += ' AND "start" <= ?'
        params.append(end)
    rows = store.query(sql, params).to_pylist()
    labels = [class_label(lo, hi) for lo, hi in DURATION_CLASSES]
    layers = sorted({LAYER_OF.get(r["component_kind"], r["component_kind"]) for r in rows})
    counts = {c: dict.fromkeys(layers, 0) for c in labels}
    ongoing = dict.fromkeys(layers, 0)
    kinds: dict[str, int] = {}
    for r in rows:
        layer = LAYER_OF.get(r["component_kind"], r["component_kind"])
        stop = r["end"] or as_of or r["start"]
        hours = max(0.0, (stop - r["start"]).total_seconds() / 3600)
        for (lo, hi), label in zip(DURATION_CLASSES, labels, strict=True):
            if lo <= hours < hi:
                counts[label][layer] += 1
                break
        if r["end"] is None:
            ongoing[layer] += 1
        kinds[r["kind"]] = kinds.get(r["kind"], 0) + 1
    return AnomalyDurations(layers, labels, counts, ongoing, len(rows), as_of, kinds)
