"""Component analyses: forwarders, OSTs, the MDS and switches, across all jobs.

Each detector is a one-file plug-in (`base.Detector`) that reads the store for a time
window and returns anomaly episodes (rows of `iolens.model.schema.ANOMALIES`);
`analyze_components` runs them all and replaces the stored episodes of the window.
`docs/diagnosis.md` describes each detector, its thresholds and its evidence.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Literal

from iolens.analyze.components.base import Context, Detector, Episode, Gap, episodes_table
from iolens.analyze.components.cache_thrashing import CacheThrashing
from iolens.analyze.components.low_bandwidth import LowBandwidth
from iolens.analyze.components.metadata_storm import MetadataStorm
from iolens.analyze.components.slow_forwarder import SlowForwarder
from iolens.analyze.components.slow_ost import SlowOst
from iolens.errors import StoreError
from iolens.store.base import Store

#: The registered detectors, in the order they run.
DETECTORS: tuple[type[Detector], ...] = (
    SlowOst,
    SlowForwarder,
    MetadataStorm,
    CacheThrashing,
    LowBandwidth,
)

#: Key in the store's `meta` table: the newest sample time the detectors have seen.
ANALYZED_KEY = "components_analyzed_until"
#: Key in `meta`: what the last run could not assess (JSON list of `Gap` rows).
GAPS_KEY = "components_gaps"


def analyze_components(
    store: Store,
    start: datetime | None = None,
    end: datetime | None = None,
    detectors: Sequence[Detector] | None = None,
) -> int:
    """Run every component detector over [start, end) (all data by default); episodes stored.

    Stored episodes of the same detectors that overlap the window are deleted and the new
    ones appended in one transaction, so re-running (hourly, after late data) never
    duplicates. An episode already open at `start` is re-examined from its beginning so it
    stays one episode. Returns the number of episodes written.
    """
    dets: list[Detector] = list(detectors) if detectors is not None else [d() for d in DETECTORS]
    names = sorted({d.name for d in dets})
    first, last = (
        store.query("SELECT min(ts) AS a, max(ts) AS b FROM server_samples").to_pylist()[0].values()
    )
    if first is None:
        return 0
    open_ended = end is None
    start = start or first
    end = end or last + timedelta(microseconds=1)
    if end <= start:
        return 0
    mine = f"detector IN ({', '.join('?' * len(names))})"
    earlier = (
        store.query(
            f'SELECT min("start") AS s FROM anomalies WHERE {mine} AND "start" < ? '
            'AND ("end" IS NULL OR "end" >= ?)',
            [*names, start, start],
        )
        .column("s")[0]
        .as_py()
    )
    if earlier is not None:
        start = earlier
    ctx = Context(store, start, end, open_ended=open_ended)
    episodes: list[Episode] = []
    for det in dets:
        episodes += det.detect(ctx)
    lo = min([start, *(e.start for e in episodes)])
    done = analyzed_until(store)
    with store.transaction():
        store.execute(
            f'DELETE FROM anomalies WHERE {mine} AND "start" < ? AND ("end" IS NULL OR "end" > ?)',
            [*names, end, lo],
        )
        store.append("anomalies", episodes_table(episodes))
        if done is not False:
            store.execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                [GAPS_KEY, json.dumps([g.row() for g in ctx.gaps])],
            )
        if done is not False and (done is None or done < last):
            store.execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)", [ANALYZED_KEY, last.isoformat()]
            )
    return len(episodes)


def component_gaps(store: Store) -> list[dict[str, object]]:
    """What the last detector run could not assess (`Gap` rows); empty if none recorded."""
    try:
        rows = store.query("SELECT value FROM meta WHERE key = ?", [GAPS_KEY]).to_pylist()
    except StoreError:
        return []
    return json.loads(rows[0]["value"]) if rows else []


def analyzed_until(store: Store) -> datetime | Literal[False] | None:
    """Newest sample time the detectors have examined: None if they never ran here, False
    if the backend keeps no `meta` table (then nothing is recorded)."""
    try:
        rows = store.query("SELECT value FROM meta WHERE key = ?", [ANALYZED_KEY]).to_pylist()
    except StoreError:
        return False
    return datetime.fromisoformat(rows[0]["value"]) if rows else None


__all__ = [
    "DETECTORS",
    "Context",
    "Detector",
    "Episode",
    "Gap",
    "analyze_components",
    "analyzed_until",
    "component_gaps",
]
