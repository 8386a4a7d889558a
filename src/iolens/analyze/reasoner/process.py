"""Process level: the detectors over one process's activities, anomalous activities
grouped into episodes, each forwarding the process's ring buffer as it stood when the
episode opened (the activities just before it).

An episode is a run of anomalous activities with at most `gap` normal ones between
them, and holds `min_calls` anomalous calls at least: a lone slow call among normal
ones (a page fault, a preempted syscall) is noise on every real node, not an anomaly."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from iolens.analyze.reasoner.activity import Activity
from iolens.analyze.reasoner.config import ReasonerConfig
from iolens.analyze.reasoner.ring import Ring


@dataclass
class Episode:
    """One process's anomaly: a run of anomalous activities (see the module's note)."""

    node: str
    pid: int
    rank: int | None
    start: dt.datetime
    end: dt.datetime
    what: list[dict[str, Any]]  # the first finding per detector, op and size class
    activities: list[Activity]  # the anomalous ones
    forwarded: list[Activity]  # the ring's content when it opened
    calls: int = 0
    slowest: float = 0.0
    verdict: str = "process-local"
    extra: dict[str, Any] = field(default_factory=dict)


def episodes(acts: list[Activity], cfg: ReasonerConfig) -> list[Episode]:
    """Episodes of one process (`acts` in start order, all of the same process)."""
    detectors = cfg.make_detectors()
    ring = Ring(cfg.ring)
    out: list[Episode] = []
    ep: Episode | None = None
    normal = 0  # normal activities since the open episode's last anomalous one
    for a in acts:
        found = [w for d in detectors if (w := d.observe(a)) is not None]
        if not found:
            normal += 1
            if ep is not None and normal > cfg.gap:
                _close(ep, out, cfg)
                ep = None
        else:
            normal = 0
            if ep is None:
                ep = Episode(a.node, a.pid, a.rank, a.t_start, a.t_end, [], [], ring.snapshot())
            ep.end = max(ep.end, a.t_end)
            ep.activities.append(a)
            ep.calls += a.count
            for w in found:
                if not any(_same(x, w) for x in ep.what):
                    ep.what.append(w)
                ep.slowest = max(ep.slowest, w.get("slowdown") or 0.0)
        ring.push(a)
    if ep is not None:
        _close(ep, out, cfg)
    return out


def _close(ep: Episode, out: list[Episode], cfg: ReasonerConfig) -> None:
    if ep.calls >= cfg.min_calls:
        out.append(ep)


def _same(x: dict[str, Any], w: dict[str, Any]) -> bool:
    return all(x[k] == w[k] for k in ("detector", "op", "size_class"))
