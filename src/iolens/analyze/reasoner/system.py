"""System level: node anomalies at the same time across the job's nodes. One node of
many is that node's problem; most nodes at once is the file system's (system-wide).
A node counts when its node level confirmed the anomaly (node-wide, or the node's only
active process): one process of many slow on several nodes is several local problems,
and a node whose anomaly spent most of its time alone (`overlap.crowded`) is its own
problem even when other nodes were slow together for part of it.
Server-side anomaly episodes iolens stored for the same time are attached as evidence."""

from __future__ import annotations

import datetime as dt
import math
from dataclasses import dataclass, field
from typing import Any

from iolens.analyze.reasoner import ring
from iolens.analyze.reasoner.activity import Activity
from iolens.analyze.reasoner.config import ReasonerConfig
from iolens.analyze.reasoner.node import NodeAnomaly
from iolens.analyze.reasoner.overlap import active, clusters, crowded


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
        n_active = _nodes(acts, g, slack)
        need = max(2, math.ceil(cfg.system_share * n_active - 1e-9))
        confirmed = [n for n in g if n.verdict == "node-wide" or n.active == 1]
        spans = [(n.node, n.start, n.end) for n in confirmed]
        wide = [n for n in confirmed if crowded((n.start, n.end), n.node, spans, need) >= 0.5]
        if len({n.node for n in wide}) < 2:
            wide = []
        rest = [n for n in g if all(n is not w for w in wide)]
        if wide:
            out.append(_anomaly(wide, n_active, "system-wide", server))
        if rest:
            local = "node-wide" if any(n.verdict == "node-wide" for n in rest) else "process-local"
            out.append(_anomaly(rest, _nodes(acts, rest, slack), local, server))
    out.sort(key=lambda sa: sa.start)
    for sa, fw in zip(out, ring.before(acts, [s.start for s in out], cfg.ring), strict=True):
        sa.forwarded = fw
    return out


def _nodes(acts: list[Activity], nas: list[NodeAnomaly], slack: dt.timedelta) -> int:
    """Nodes with I/O while `nas` lasted."""
    start, end = min(n.start for n in nas), max(n.end for n in nas)
    return len(active(acts, start - slack, end, lambda a: a.node)) or 1


def _anomaly(
    nas: list[NodeAnomaly], n_active: int, verdict: str, server: list[dict[str, Any]]
) -> SystemAnomaly:
    """A system anomaly of `nas`; a system-wide verdict becomes its members' too."""
    start, end = min(n.start for n in nas), max(n.end for n in nas)
    sa = SystemAnomaly(start, end, nas, n_active, [], verdict)
    sa.servers = [s for s in server if s["start"] <= end and (s["end"] or end) >= start]
    for n in nas:
        if verdict == "system-wide":
            n.verdict = verdict
        for e in n.episodes:
            e.verdict = n.verdict
    return sa
