"""A simulated site's data as its agents would ship it, split over ingest groups.

Beacon (section 3.1) gives each log server a static group of compute nodes; the servers'
own monitoring (forwarders, OSS/OSTs, MDS, switches) goes to a few more. Here compute
nodes belong to the group of their forwarder (512 nodes each, as Beacon's 80 groups of a
40,960-node machine), server-side components are dealt round-robin over the groups, and
the scheduler's and the topology's rows go to the first group. Every agent-sized piece is
a keyed batch, so re-sending one is harmless.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iolens.model.batch import Batch
from iolens.simulate.run import Simulation

#: Rows per shipped batch at most (an agent's 10-s round is far smaller; tests want many).
MAX_ROWS = 20_000
#: Seconds of component samples per batch (what an agent collects between shipments).
WINDOW_S = 60


@dataclass
class Ledger:
    """What was produced: rows and sums per table, batch keys (to check the dataset)."""

    rows: Counter[str] = field(default_factory=Counter)
    sums: Counter[str] = field(default_factory=Counter)
    keys: list[str] = field(default_factory=list)
    by_group: Counter[str] = field(default_factory=Counter)

    def record(self, group: str, batch: Batch) -> None:
        assert batch.key is not None
        self.keys.append(batch.key)
        self.by_group[group] += batch.rows()
        for name, table in batch.tables().items():
            self.rows[name] += table.num_rows
        if batch.server_samples is not None:
            s = batch.server_samples
            for col in ("read_bytes", "write_bytes", "read_ops", "write_ops", "md_ops"):
                self.sums[f"server_samples.{col}"] += pc.sum(s[col]).as_py() or 0
        if batch.client_io is not None:
            c = batch.client_io
            self.sums["client_io.bytes"] += pc.sum(pc.multiply(c["size"], c["count"])).as_py() or 0
            self.sums["client_io.count"] += pc.sum(c["count"]).as_py() or 0


def groups_of(sim: Simulation, groups: list[str]) -> tuple[dict[str, str], dict[str, str]]:
    """(compute node -> group, server component -> group)."""
    topo = sim.topology
    nodes = {
        node: groups[int(topo.fwd_of_node[i]) % len(groups)] for i, node in enumerate(topo.compute)
    }
    comps = sorted({*topo.forwarders, *topo.osts, *topo.oss, topo.mds, *topo.switches})
    return nodes, {c: groups[i % len(groups)] for i, c in enumerate(comps)}


def _split(table: pa.Table, column: str, owner: dict[str, str], groups: list[str]) -> dict:
    keys = table.column(column).to_numpy(zero_copy_only=False)
    mapped = np.array([owner.get(k, groups[0]) for k in keys], dtype=object)
    return {g: table.filter(pa.array(mapped == g)) for g in groups if (mapped == g).any()}


def _chunks(table: pa.Table, rows: int) -> Iterator[pa.Table]:
    for i in range(0, table.num_rows, rows):
        yield table.slice(i, rows)


def _windows(table: pa.Table, seconds: int) -> Iterator[pa.Table]:
    ts = table.column("ts").cast(pa.int64()).to_numpy() // (seconds * 1_000_000)
    order = np.argsort(ts, kind="stable")
    table, ts = table.take(pa.array(order)), ts[order]
    cut = np.r_[0, np.nonzero(np.diff(ts))[0] + 1, len(ts)]
    for a, b in itertools.pairwise(cut):
        yield table.slice(int(a), int(b - a))


def agent_batches(
    sim: Simulation, groups: list[str], max_rows: int = MAX_ROWS
) -> Iterator[tuple[str, Batch]]:
    """(group, keyed batch) in collection order, as the group's agents would ship them."""
    nodes, comps = groups_of(sim, groups)
    for name, batch in sim.batches():
        if batch.server_samples is None and batch.client_io is None:
            # topology and scheduler rows: one batch to the first group
            yield groups[0], Batch(batch.source, key=f"{groups[0]}:{name}", **batch.tables())
            continue
        if batch.files is not None:
            for i, part in enumerate(_chunks(batch.files, max_rows)):
                yield (
                    groups[0],
                    Batch(batch.source, key=f"{groups[0]}:{name}:files:{i}", files=part),
                )
        if batch.client_io is not None:
            for g, part in _split(batch.client_io, "node", nodes, groups).items():
                for i, chunk in enumerate(_chunks(part, max_rows)):
                    key = f"{g}:{name}:client:{i}"
                    yield g, Batch("tracer", key=key, client_io=chunk)
        if batch.server_samples is not None:
            for g, part in _split(batch.server_samples, "component_id", comps, groups).items():
                for w, window in enumerate(_windows(part, WINDOW_S)):
                    for i, chunk in enumerate(_chunks(window, max_rows)):
                        key = f"{g}:{name}:samples:{w}:{i}"
                        yield g, Batch("agent", key=key, server_samples=chunk)
