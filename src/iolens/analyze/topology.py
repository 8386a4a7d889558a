"""What the topology does not say, so an analysis names the missing piece instead of
going quiet.

No collector sees the compute -> forwarder mapping or the components' benchmarked peaks:
a site gives them (`iolens site topology`, docs/topology.md), and file layouts come from
the tracer on Lustre mounts. Where they are missing, the forwarders of a job, its OSTs,
load levels and the 30 %-of-peak rule come out empty - which must not read as "none" or
"healthy". These helpers list what is missing for given nodes, components or files; the
per-job report (`gaps`), the component detectors (`Context.gap`) and the interference
analysis call them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from iolens.store.base import Store

__all__ = [
    "REMEDY_FORWARDING",
    "REMEDY_LAYOUTS",
    "REMEDY_PEAKS",
    "Missing",
    "host_names",
    "missing_topology",
    "unmapped_nodes",
    "without_peak",
]

REMEDY_FORWARDING = (
    "list them in the site topology: under [[forwarders]] nodes, or under [compute] if they "
    "mount Lustre directly (`iolens site topology FILE`)"
)
REMEDY_PEAKS = (
    "give peaks in the site topology (`iolens site topology FILE`) or import an IO500 run "
    "(`iolens import io500`, then [io500] in the topology)"
)
REMEDY_LAYOUTS = (
    "trace the job with the iolens tracer on the Lustre mount (it records each file's "
    "layout), or enable Lustre jobstats (jobid_var) with the agent on the OSSs"
)
#: Kinds of hosts that do I/O themselves; one known to the topology but absent from the
#: forwarding map mounts Lustre directly, which is an answer, not a gap.
CLIENT_KINDS = ("compute", "login", "service", "forwarder")


@dataclass(frozen=True)
class Missing:
    """One piece of topology an analysis needed and did not find."""

    piece: str  # "forwarding", "peak_bw", "peak_ops", "layouts"
    components: tuple[str, ...]  # the nodes, components or files concerned
    missing: str  # what is absent, and what cannot be computed without it
    remedy: str  # how a site provides it

    def row(self) -> dict[str, Any]:
        return {
            "piece": self.piece,
            "components": list(self.components),
            "missing": self.missing,
            "remedy": self.remedy,
        }


def _matching(store: Store, sql: str, column: str, ids: list[str]) -> set[str]:
    """Values of `column` in `sql` (which joins `_iolens_topo_ids(id)`) for `ids`."""
    if not ids:
        return set()
    store.register("_iolens_topo_ids", pa.table({"id": pa.array(ids, pa.string())}))
    try:
        return set(store.query(sql).column(column).to_pylist())
    finally:
        store.unregister("_iolens_topo_ids")


def unmapped_nodes(store: Store, nodes: Iterable[str]) -> list[str]:
    """Nodes whose forwarder is unknown: not in the forwarding map, and not known to the
    topology as a client host (which would mean it mounts Lustre directly)."""
    ids = sorted(set(nodes))
    mapped = _matching(
        store,
        "SELECT DISTINCT compute_node FROM forwarding JOIN _iolens_topo_ids ON compute_node = id",
        "compute_node",
        ids,
    )
    kinds = ", ".join(f"'{k}'" for k in CLIENT_KINDS)
    direct = _matching(
        store,
        "SELECT DISTINCT component_id FROM components JOIN _iolens_topo_ids "
        f"ON component_id = id WHERE kind IN ({kinds})",
        "component_id",
        ids,
    )
    return [n for n in ids if n not in mapped and n not in direct]


def host_names(store: Store, names: Iterable[str]) -> dict[str, str]:
    """The host each name stands for: a Lustre NID (`10.1.0.7@o2ib`, as `exports/<nid>`
    names clients), an address or another alias from `component_aliases`; a name that is
    a host itself, or that the topology does not know, maps to itself."""
    ids = sorted(set(names))
    if not ids:
        return {}
    store.register("_iolens_topo_ids", pa.table({"id": pa.array(ids, pa.string())}))
    try:
        rows = store.query(
            "SELECT alias, any_value(component_id) AS host FROM component_aliases "
            "JOIN _iolens_topo_ids ON alias = id GROUP BY alias"
        ).to_pylist()
    finally:
        store.unregister("_iolens_topo_ids")
    found = {r["alias"]: r["host"] for r in rows}
    return {n: found.get(n, n) for n in ids}


def without_peak(store: Store, components: Iterable[str], column: str = "peak_bw") -> list[str]:
    """Components without a positive `column` (`peak_bw` or `peak_ops`) in the topology."""
    if column not in ("peak_bw", "peak_ops"):
        raise ValueError(f"not a peak column: {column}")
    ids = sorted(set(components))
    known = _matching(
        store,
        "SELECT DISTINCT component_id FROM components JOIN _iolens_topo_ids "
        f"ON component_id = id WHERE {column} > 0",
        "component_id",
        ids,
    )
    return [c for c in ids if c not in known]


def _names(ids: list[str], most: int = 8) -> str:
    shown = ", ".join(ids[:most])
    return f"{shown} and {len(ids) - most} more" if len(ids) > most else shown


def missing_topology(
    store: Store,
    *,
    nodes: Iterable[str] = (),
    components: Iterable[str] = (),
    peaks: tuple[str, ...] = ("peak_bw",),
    needed_for: str = "this analysis",
) -> list[Missing]:
    """The topology pieces an analysis of `nodes` (their forwarders) and `components`
    (their peaks, each column of `peaks`) lacks, with what to do; empty when complete."""
    out: list[Missing] = []
    unmapped = unmapped_nodes(store, nodes)
    if unmapped:
        out.append(
            Missing(
                "forwarding",
                tuple(unmapped),
                f"forwarder of {len(unmapped)} node(s) unknown ({_names(unmapped)}): not in "
                f"the forwarding map, so {needed_for} cannot see the forwarding layer",
                REMEDY_FORWARDING,
            )
        )
    comps = sorted(set(components))
    for column in peaks:
        lacking = without_peak(store, comps, column)
        if lacking:
            what = "bandwidth" if column == "peak_bw" else "request rate"
            out.append(
                Missing(
                    column,
                    tuple(lacking),
                    f"peak {what} unknown for {_names(lacking)}: {needed_for} cannot "
                    "relate their load to what they can do (load levels, % of peak)",
                    REMEDY_PEAKS,
                )
            )
    return out
