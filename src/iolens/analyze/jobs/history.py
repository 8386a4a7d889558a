"""Job I/O anomalies against the same application's history (Beacon Appendix B).

Data-intensive applications behave alike from run to run at one scale, so the phases of a
new run should fall into the clusters its earlier runs form in (duration, volume) space.
DBSCAN finds those clusters without being told how many phases an application has; a new
phase that ends up as noise, or in a cluster with no earlier phase, did not behave like any
phase before it: most often it ran slower because a neighbour loaded a shared component.

Both axes are compared on a log scale, so "twice as long" is the same distance for a 10 s
and a 10 min phase, and a cluster is a set of phases within ~1.6x of each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

EPS = 0.2  # neighbourhood radius in log10 units (10^0.2 = 1.6x) of duration and volume
MIN_SAMPLES = 2  # points (a phase and one like it) to make a cluster core
MIN_RUNS = 3  # earlier runs needed before a run is judged: Beacon's "several executions"


@dataclass(frozen=True)
class PhasePoint:
    duration: float  # seconds
    volume: float  # bytes (metadata ops for metadata-only phases)


def _features(points: Sequence[PhasePoint]) -> np.ndarray:
    """(log10 duration, log10 volume); +1 keeps zero-volume phases finite."""
    return np.array([[np.log10(max(p.duration, 1.0)), np.log10(p.volume + 1.0)] for p in points])


def outliers(
    history: Sequence[PhasePoint],
    new: Sequence[PhasePoint],
    eps: float = EPS,
    min_samples: int = MIN_SAMPLES,
) -> list[bool]:
    """Which of `new` fall outside every cluster the history forms."""
    if not new:
        return []
    if not history:
        return [False] * len(new)
    # Imported here: scikit-learn takes most of a second to load, and the reports and
    # listings that import this package only need it once a job is analysed.
    from sklearn.cluster import DBSCAN

    x = _features([*history, *new])
    labels = DBSCAN(eps=eps, min_samples=min_samples).fit(x).labels_
    known = set(labels[: len(history)]) - {-1}
    return [bool(lab == -1 or lab not in known) for lab in labels[len(history) :]]


@dataclass
class Run:
    """One earlier or current run of an application at one scale."""

    job_id: str
    start: float  # epoch seconds, orders the runs
    phases: list[PhasePoint]


def judge(runs: Sequence[Run], min_runs: int = MIN_RUNS) -> dict[str, list[bool]]:
    """Per run, which phases are anomalous against the runs that started before it.

    Runs with fewer than `min_runs` predecessors are not judged (all False).
    """
    ordered = sorted(runs, key=lambda r: (r.start, r.job_id))
    out: dict[str, list[bool]] = {}
    for i, run in enumerate(ordered):
        earlier = [r for r in ordered[:i] if r.phases]
        if len(earlier) < min_runs:
            out[run.job_id] = [False] * len(run.phases)
            continue
        history = [p for r in earlier for p in r.phases]
        out[run.job_id] = outliers(history, run.phases)
    return out
