"""DM08-DM10 (Drishti M08-M10): MPI-IO aggregators (cb_nodes) against compute nodes.

Drishti 0.8 gets the node count from `sacct`, so it checks nothing off the cluster (and,
with it, compares the two numbers as strings, and crashes on hints `h=no`). iolens reads
cb_nodes from the ROMIO hints Darshan recorded (`h=`) and the node count from the site
(`ctx.extra["nnodes"]`, e.g. the scheduler's record) or from the distinct hostnames in
DXT. DXT hostnames give a lower bound unless DXT saw every rank, so with a bound only
"fewer aggregators than nodes" (M08) can be concluded.
"""

from __future__ import annotations

from typing import Any

from iolens.analyze.darshan.drishti.common import (
    DrishtiRule,
    hints,
    mpich_hints,
    node_count,
    total,
    uses_mpiio,
)
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding
from iolens.parse._common import is_digits


def aggregators(job: DarshanJob, ctx: RuleContext) -> dict[str, Any] | None:
    """cb_nodes, nodes and whether the node count is exact; None if either is unknown."""
    if not uses_mpiio(job):
        return None
    cb = hints(job).get("cb_nodes", "")
    if not is_digits(cb):
        return None
    nodes, exact = node_count(job, ctx)
    if not nodes:
        return None
    m = job.counters("MPI-IO")
    return {
        "cb_nodes": int(cb),
        "nodes": nodes,
        "nodes_exact": exact,
        "nodes_source": "site" if ctx.extra.get("nnodes") else "dxt hostnames",
        "collective_requests": total(m, "MPIIO_COLL_READS", "MPIIO_COLL_WRITES"),
    }


class IntraNodeAggregators(DrishtiRule):
    """Fewer MPI-IO aggregators than compute nodes.

    Symptom: the ROMIO hint cb_nodes is below the job's node count.
    Why it hurts: it need not; Drishti reports it as OK (each aggregator gathers from
    ranks of several nodes). Few aggregators can however bound collective bandwidth.
    What to do: nothing, unless collective I/O is slow: then one aggregator per node.
    """

    code = "DM08"
    name = "intra-node-aggregators"
    severity = "info"
    target = "user"
    drishti_code = "M08"
    drishti_level = "OK"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        a = aggregators(job, ctx)
        if a is None or a["cb_nodes"] >= a["nodes"]:
            return None
        return self.finding(
            job,
            a,
            f"cb_nodes={a['cb_nodes']} on {a['nodes']} node(s); if collective I/O is slow, "
            f"use one aggregator per node: `{mpich_hints(cb_nodes=a['nodes'])}`.",
        )


class InterNodeAggregators(DrishtiRule):
    """More MPI-IO aggregators than compute nodes.

    Symptom: the ROMIO hint cb_nodes exceeds the job's node count, so nodes host
    several aggregators.
    Why it hurts: the aggregators of a node share its network link and memory bandwidth
    while they exchange data with all ranks; Drishti recommends one per node.
    What to do: set cb_nodes to the node count (MPICH_MPIIO_HINTS or a ROMIO hints file).
    """

    code = "DM09"
    name = "inter-node-aggregators"
    target = "user"
    drishti_code = "M09"
    drishti_level = "HIGH"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        a = aggregators(job, ctx)
        if a is None or not a["nodes_exact"] or a["cb_nodes"] <= a["nodes"]:
            return None
        return self.finding(
            job,
            a,
            f"cb_nodes={a['cb_nodes']} aggregators on {a['nodes']} node(s). Use one per node: "
            f"`{mpich_hints(cb_nodes=a['nodes'])}` (Open MPI/ROMIO: `cb_nodes {a['nodes']}` "
            "in the file named by ROMIO_HINTS).",
            # aggregators do nothing without collective calls
            severity="warning" if a["collective_requests"] else "info",
        )


class OneAggregatorPerNode(DrishtiRule):
    """One MPI-IO aggregator per compute node.

    Symptom: the ROMIO hint cb_nodes equals the job's node count.
    Why it hurts: it does not; Drishti reports it as OK.
    What to do: nothing.
    """

    code = "DM10"
    name = "one-aggregator-per-node"
    severity = "info"
    target = "user"
    drishti_code = "M10"
    drishti_level = "OK"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        a = aggregators(job, ctx)
        if a is None or not a["nodes_exact"] or a["cb_nodes"] != a["nodes"]:
            return None
        return self.finding(job, a, f"cb_nodes={a['cb_nodes']} on {a['nodes']} node(s); fine.")
