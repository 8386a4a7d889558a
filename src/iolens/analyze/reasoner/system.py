"""System level: node anomalies at the same time across the job's nodes. One node of
many is that node's problem; most nodes at once is the file system's (system-wide).
A node counts when its node level confirmed the anomaly (node-wide, or the node's only
active process): one process of many slow on several nodes is several local problems.
Server-side anomaly episodes iolens stored for the same time are attached as evidence."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

from iolens.analyze.reasoner import ring
from iolens.analyze.reasoner.activity import Activity
from iolens.analyze.reasoner.config import ReasonerConfig
from iolens.analyze.reasoner.node import NodeAnomaly
from iolens.analyze.reasoner.overlap import active, clusters


@dataclass
class SystemAnomaly:
    start: dt.datetime
    end: dt.datetime
    nodes: list[NodeAnomaly]
    active: int  # nodes with I/O during it
    forwarded: list[Activity]
    verdict: str
    servers: list[dict[str, Any]] = field(default_factory=list)


def aggregate(
    acts: list[Activity], nas: list[NodeAnomaly], cfg: ReasonerConfig, server: list[dict[str, Any]]
) -> list[SystemAnomaly]:
    """Group node anomalies across nodes; each group's verdict sets its members'."""
    slack = dt.timedelta(seconds=cfg.slack_s)
    out = []
    for g in clusters(nas, lambda n: (n.start, n.end), slack):
        start, end = min(n.start for n in g), max(n.end for n in g)
        n_active = len(active(acts, start - slack, end, lambda a: a.node)) or 1
        nodes = {n.node for n in g if n.verdict == "node-wide" or n.active == 1}
        if len(nodes) >= 2 and len(nodes) / n_active >= cfg.system_share:
            verdict = "system-wide"
        elif any(n.verdict == "node-wide" for n in g):
            verdict = "node-wide"
        else:
            verdict = "process-local"
        sa = SystemAnomaly(start, end, g, n_active, [], verdict)
        sa.servers = [
            s for s in server if s["start"] <= end and (s["end"] is None or s["end"] >= start)
        ]
        for n in g:
            if verdict == "system-wide":
                n.verdict = verdict
            for e in n.episodes:
                e.verdict = n.verdict
        out.append(sa)
    for sa, fw in zip(out, ring.before(acts, [s.start for s in out], cfg.ring), strict=True):
        sa.forwarded = fw
    return out
