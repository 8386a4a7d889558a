"""The hierarchical reasoner (SIOX, Kunkel et al.): anomalies found per process,
aggregated per node and across nodes, each forwarding the activities that preceded it.

Process level (`process`): detector plug-ins (`detectors/`) judge every activity against
the process's own recent baseline; anomalous activities form episodes. Node level
(`node`): episodes at the same time on one node, against the node's active processes:
one process alone is process-local, most of them node-wide. System level (`system`):
node anomalies at the same time across nodes: most nodes at once is system-wide (the
file system's problem, not this node's), with the server-side anomaly episodes of that
time attached. Every level keeps a ring buffer (`ring`) of recent activities and hands
its content over with an anomaly. An anomaly is reported at the level that confirmed it.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from iolens.analyze.reasoner import node, process, system
from iolens.analyze.reasoner.activity import Activity
from iolens.analyze.reasoner.config import ReasonerConfig

__all__ = ["Activity", "ReasonerConfig", "reason"]


def reason(
    acts: list[Activity],
    cfg: ReasonerConfig | None = None,
    server: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Anomalies of a job's activities (start order), oldest first, JSON-ready dicts:
    {level, verdict, where, start, end, what, calls, slowdown, processes, active,
    forwarded, episodes, servers}. `server`: stored server anomaly episodes
    ({kind, component, start, end, ...}) to correlate with."""
    cfg = cfg or ReasonerConfig()
    by_proc: dict[tuple[str, int], list[Activity]] = defaultdict(list)
    by_node: dict[str, list[Activity]] = defaultdict(list)
    for a in acts:
        by_proc[a.process].append(a)
        by_node[a.node].append(a)
    eps_by_node: dict[str, list[process.Episode]] = defaultdict(list)
    for (n, _), pa in by_proc.items():
        eps_by_node[n].extend(process.episodes(pa, cfg))
    nas = [na for n, eps in eps_by_node.items() for na in node.aggregate(n, by_node[n], eps, cfg)]
    out: list[dict[str, Any]] = []
    for sa in system.aggregate(acts, nas, cfg, server or []):
        eps = [e for n in sa.nodes for e in n.episodes]
        if sa.verdict == "system-wide":
            where = ", ".join(sorted({n.node for n in sa.nodes}))
            out.append(
                _entry(
                    "system",
                    sa.verdict,
                    where,
                    sa.start,
                    sa.end,
                    eps,
                    sa.forwarded,
                    sa.active,
                    sa.servers,
                )
            )
            continue
        for na in sa.nodes:
            if na.verdict == "node-wide":
                out.append(
                    _entry(
                        "node",
                        na.verdict,
                        na.node,
                        na.start,
                        na.end,
                        na.episodes,
                        na.forwarded,
                        na.active,
                        sa.servers,
                    )
                )
                continue
            for e in na.episodes:
                where = f"{e.node} pid {e.pid}" + (f" rank {e.rank}" if e.rank is not None else "")
                out.append(
                    _entry(
                        "process",
                        e.verdict,
                        where,
                        e.start,
                        e.end,
                        [e],
                        e.forwarded,
                        na.active,
                        sa.servers,
                    )
                )
    out.sort(key=lambda r: (r["start"], r["where"]))
    return out


def _entry(level, verdict, where, start, end, eps, forwarded, active, servers) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    what: list[dict[str, Any]] = []
    for e in eps:
        for w in e.what:
            if not any(process._same(x, w) for x in what):
                what.append(w)
    return {
        "level": level,
        "verdict": verdict,
        "where": where,
        "start": start,
        "end": end,
        "what": what,
        "calls": sum(e.calls for e in eps),
        "slowdown": max((e.slowest for e in eps), default=None),
        "processes": len({(e.node, e.pid) for e in eps}),
        "active": active,
        "forwarded": [a.as_dict() for a in forwarded],
        "episodes": [
            {
                "node": e.node,
                "pid": e.pid,
                "rank": e.rank,
                "start": e.start,
                "end": e.end,
                "calls": e.calls,
                "what": e.what,
                "forwarded": [a.as_dict() for a in e.forwarded],
            }
            for e in eps
        ],
        "servers": servers,
    }
