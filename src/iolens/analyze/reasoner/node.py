"""Node level: a node's process anomalies at the same time, against all the processes
the node had running then. One process of many is application-local (this process's
own problem: its file, its pattern); most of them at once is node-wide. A process
whose anomaly spent most of its time alone stays process-local even when others were
node-wide for part of it (`overlap.crowded`)."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass

from iolens.analyze.reasoner import ring
from iolens.analyze.reasoner.activity import Activity
from iolens.analyze.reasoner.config import ReasonerConfig
from iolens.analyze.reasoner.overlap import active, clusters, crowded
from iolens.analyze.reasoner.process import Episode


@dataclass
class NodeAnomaly:
    node: str
    start: dt.datetime
    end: dt.datetime
    episodes: list[Episode]
    active: int  # processes of the node with I/O during it
    forwarded: list[Activity]  # the node's ring when it fired
    verdict: str = "process-local"

    @property
    def processes(self) -> int:
        return len({e.pid for e in self.episodes})


def aggregate(
    node: str, acts: list[Activity], eps: list[Episode], cfg: ReasonerConfig
) -> list[NodeAnomaly]:
    """The node's anomalies (`acts`: all its activities in start order)."""
    slack = dt.timedelta(seconds=cfg.slack_s)
    out = []
    for g in clusters(eps, lambda e: (e.start, e.end), slack):
        n_active = len(active(acts, min(e.start for e in g) - slack, max(e.end for e in g), _pid))
        need = max(2, math.ceil(cfg.node_share * max(n_active, 1) - 1e-9))
        spans = [(e.pid, e.start, e.end) for e in g]
        wide = [e for e in g if crowded((e.start, e.end), e.pid, spans, need) >= 0.5]
        if len({e.pid for e in wide}) < 2:
            wide = []
        rest = [e for e in g if all(e is not w for w in wide)]
        for part, verdict in ((wide, "node-wide"), (rest, "process-local")):
            if part:
                out.append(_anomaly(node, part, n_active, verdict))
    out.sort(key=lambda na: na.start)
    for na, fw in zip(out, ring.before(acts, [na.start for na in out], cfg.ring), strict=True):
        na.forwarded = fw
    return out


def _pid(a: Activity) -> int:
    return a.pid


def _anomaly(node: str, eps: list[Episode], n_active: int, verdict: str) -> NodeAnomaly:
    start, end = min(e.start for e in eps), max(e.end for e in eps)
    return NodeAnomaly(node, start, end, eps, n_active or 1, [], verdict)
