"""The `iolens load` report: hourly load levels per kind, forwarder imbalance, MDS split.

Kept here rather than in the CLI so a query endpoint can serve the same JSON.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from iolens.analyze.system._common import to_plain
from iolens.analyze.system.load import DEFAULT_RESOLUTION_S, VIEW_KINDS, hourly_load, imbalance
from iolens.analyze.system.mds import mds_load
from iolens.store.base import Store


def load_summary(
    store: Store,
    kinds: list[str] | None = None,
    start: datetime | None = None,
    end: datetime | None = None,
    resolution_s: int = DEFAULT_RESOLUTION_S,
) -> dict[str, Any]:
    """Everything `iolens load --json` prints, as JSON-ready dicts."""
    kinds = list(kinds or VIEW_KINDS)
    out: dict[str, Any] = {
        "window": {"since": start, "until": end},
        "resolution_s": resolution_s,
        "kinds": {},
    }
    for kind in kinds:
        load = hourly_load(store, kind, start, end, resolution_s)
        out["kinds"][kind] = to_plain(load)
        if kind == "forwarder":
            out["forwarder_imbalance"] = to_plain(imbalance(load))
    if "mds" in kinds:
        out["mds"] = to_plain(mds_load(store, start, end))
    return out
