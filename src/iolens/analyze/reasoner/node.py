"""Node level: a node's process anomalies at the same time, against all the processes
the node had running then. One process of many is application-local (this process's
own problem: its file, its pattern); most of them at once is node-wide."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from iolens.analyze.reasoner import ring
from iolens.analyze.reasoner.activity import Activity
from iolens.analyze.reasoner.config import ReasonerConfig
from iolens.analyze.reasoner.overlap import active, clusters
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
    groups = clusters(eps, lambda e: (e.start, e.end), slack)
    out = []
    for g in groups:
        start, end = min(e.start for e in g), max(e.end for e in g)
        n_active = len(active(acts, start - slack, end, lambda a: a.pid)) or 1
        na = NodeAnomaly(node, start, end, g, n_active, [])
        if na.processes >= 2 and na.processes / n_active >= cfg.node_share:
            na.verdict = "node-wide"
        out.append(na)
    for na, fw in zip(out, ring.before(acts, [na.start for na in out], cfg.ring), strict=True):
        na.forwarded = fw
    return out
