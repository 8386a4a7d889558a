"""A simulated site's data as its agents would ship it, split over ingest groups.

Beacon (section 3.1) gives each log server a static group of compute nodes; the servers'
own monitoring (forwarders, OSS, MDS) goes to a few more. Here compute nodes belong to the
group of their forwarder (512 nodes each, as Beacon's 80 groups of a 40,960-node machine),
and so does the forwarder's own agent; the other server hosts (OSS, MDS) are dealt
round-robin over the groups, and the scheduler's and the topology's rows go to the first
group.

A server host's agent batches (one per agent round, keyed `agent:<host>:<time>` by the
agent itself) go to its group whole, as that host's `iolens agent` ships them: samples,
metrics and the targets it reports. Tracer records and file layouts are cut into keyed
pieces of at most `max_rows`, per group. Every piece is keyed, so re-sending one is
harmless.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iolens.model.batch import Batch
from iolens.simulate.run import Simulation

#: Rows per shipped tracer batch at most (a tracer's flush is far smaller; tests want many).
MAX_ROWS = 20_000
#: Agent batches are named `agent:<host>`; what follows the prefix is the host.
AGENT_PREFIX = "agent:"


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
    """(compute node -> group, server host -> group): a forwarder with its nodes."""
    topo = sim.topology
    nodes = {
        node: groups[int(topo.fwd_of_node[i]) % len(groups)] for i, node in enumerate(topo.compute)
    }
    hosts = {fwd: groups[f % len(groups)] for f, fwd in enumerate(topo.forwarders)}
    others = [h.name for h in sim.collection.hosts if h.name not in hosts]
    hosts |= {h: groups[i % len(groups)] for i, h in enumerate(others)}
    return nodes, hosts


def _split(table: pa.Table, column: str, owner: dict[str, str], groups: list[str]) -> dict:
    keys = table.column(column).to_numpy(zero_copy_only=False)
    mapped = np.array([owner.get(k, groups[0]) for k in keys], dtype=object)
    return {g: table.filter(pa.array(mapped == g)) for g in groups if (mapped == g).any()}


def _chunks(table: pa.Table, rows: int) -> Iterator[pa.Table]:
    for i in range(0, table.num_rows, rows):
        yield table.slice(i, rows)


def agent_batches(
    sim: Simulation, groups: list[str], max_rows: int = MAX_ROWS
) -> Iterator[tuple[str, Batch]]:
    """(group, keyed batch) in collection order, as the group's agents would ship them."""
    nodes, hosts = groups_of(sim, groups)
    for name, batch in sim.batches():
        if batch.key is not None:  # an agent's round: to its host's group, as shipped
            host = batch.source.removeprefix(AGENT_PREFIX)
            if host not in hosts:
                raise ValueError(f"agent batch {batch.key} of an unknown host {host!r}")
            yield hosts[host], batch
            continue
        if batch.client_io is None:
            # topology and scheduler rows: one batch to the first group
            yield groups[0], Batch(batch.source, key=f"{groups[0]}:{name}", **batch.tables())
            continue
        if batch.files is not None:
            for i, part in enumerate(_chunks(batch.files, max_rows)):
                yield (
                    groups[0],
                    Batch(batch.source, key=f"{groups[0]}:{name}:files:{i}", files=part),
                )
        for g, part in _split(batch.client_io, "node", nodes, groups).items():
            for i, chunk in enumerate(_chunks(part, max_rows)):
                key = f"{g}:{name}:client:{i}"
                yield g, Batch("tracer", key=key, client_io=chunk)
