"""A simulated metadata server: the files a Lustre 2.15 MDS exposes, round by round.

Per MDT (`<fs>-MDT0000`):

- `/proc/fs/lustre/mdt/<mdt>/md_stats`: every operation ([usecs] latencies);
- `/proc/fs/lustre/mdt/<mdt>/job_stats`: the same per job, 2.14+ style; jobs by Slurm id,
  login-node processes as `procname.uid` (`ls.1001`, `cp.1002`, the storm's `find.1003`);
  a process whose node runs with jobstats off (the storm in some runs) is in no entry;
- `/proc/fs/lustre/mdt/<mdt>/exports/<nid>/stats`: per client NID. The login node's export
  is always there; a compute node's only in the rounds where it did metadata work. A real
  MDS lists every connected client, but an idle export adds nothing and costs a file per
  client per round (a reader sees a compute node's counters continue where they were when
  its export shows again);
- `/sys/fs/lustre/osd-ldiskfs/<mdt>/kbytes*`, `files*`.

Per MDS host: `/sys/kernel/debug/lustre/mds/MDS/mdt/stats` (the metadata service's queue
and per-opcode handling times, client pings included), its threads, /proc and HCA.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from iolens.collect.base import Source
from iolens.collect.sources.lustre_mds import DATA_COUNTERS, MDT_OPS, LustreMdsSource
from iolens.simulate.servers import Raw, lustre_text, raw
from iolens.simulate.servers.activity import Activity, iter_rounds
from iolens.simulate.servers.counters import Stat
from iolens.simulate.servers.lustre import Capacity, JobTable, Service, printed
from iolens.simulate.servers.model import REQUEST_SPREAD, ServiceModel, adaptive_timeout, queue
from iolens.simulate.servers.node import IbPart, NodePart, Work
from iolens.simulate.topology import Topology

#: The metadata service's opcode for each MDT operation.
OPCODES = {
    "getattr": "mds_getattr",
    "getxattr": "mds_getxattr",
    "close": "mds_close",
    "open": "mds_reint_open",
    "unlink": "mds_reint_unlink",
    "statfs": "mds_statfs",
}
MD_OPS = tuple(op for op in lustre_text.MDT_JOB_OPS if op not in DATA_COUNTERS)
RPC_OVERHEAD_US = 10.0  # a service thread's unpacking and replying around the MDT's time
PING_US = 8.0  # an `obd_ping` (real idle MDSs: 4-10 us)
REQUEST_BYTES, REPLY_BYTES = 400, 600  # a metadata RPC on the wire, each way


def md_stats() -> dict[str, Stat]:
    return {op: Stat("usecs") for op in MD_OPS}


class Export:
    """One client's counters at the MDT (`exports/<nid>/stats`)."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.stats = md_stats()


class MdsHost:
    """The MDS with its MDT."""

    role = "mds"
    sources: ClassVar[list[type[Source]]] = [LustreMdsSource]

    def __init__(
        self, topo: Topology, activity: Activity, model: ServiceModel, rng: np.random.Generator
    ) -> None:
        self.name = topo.mds
        self.mdt = topo.mdt
        self.topo = topo
        self.model = model
        self.interval = activity.rounds.interval
        self.pings = activity.pings
        self.stats = md_stats()
        self.jobs = JobTable(lustre_text.MDT_JOB_OPS)
        self.exports: dict[str, Export] = {}
        self.active: set[str] = {topo.login}  # exports rendered this round
        self.capacity = Capacity(4 * 2**30, 2**31, float(rng.uniform(0.1, 0.4)))
        opcodes = (*OPCODES.values(), "obd_ping")
        self.service = Service(opcodes, threads_min=32, threads_max=512)
        self.node = NodePart(self.name, cores=32, mem_gib=512, rng=rng)
        self.ib = IbPart(self.name, ["mlx5_0"], rng)
        self.start = 0.0
        self._rows: dict[int, list[tuple[str | None, str, str, int]]] = {}
        t = activity.mdt
        for k, rows in iter_rounds(t):
            self._rows[k] = [
                (
                    None if t.job[i] is None else str(t.job[i]),
                    str(t.where[i]),
                    str(t.op[i]),
                    int(t.count[i]),
                )
                for i in rows
            ]

    # -- time -----------------------------------------------------------------------------
    def boot(self, now: float, rng: np.random.Generator) -> None:
        uptime = float(rng.uniform(2, 20)) * 86400
        self.start = now - uptime
        handled: dict[str, tuple[int, float]] = {}
        for op, rate in (
            ("getattr", 300),
            ("open", 80),
            ("close", 80),
            ("unlink", 10),
            ("statfs", 5),
        ):
            n = int(uptime * rate * rng.uniform(0.5, 1.5))
            mean = self.model.md_us(0, op)
            self.stats[op].add_mean(n, mean, REQUEST_SPREAD)
            handled[OPCODES[op]] = (n, mean)
        pings = int(uptime * (len(self.topo.compute) + 1) / 25)
        handled["obd_ping"] = (pings, 8.0)
        total = sum(n for n, _ in handled.values())
        self.service.serve(handled, queue(total, 40.0, uptime, 32, 0.1, 0.0), 1)
        self.exports[self.topo.login] = Export(self.start)

    def reset(self, now: float) -> None:
        self.start = now
        for s in self.stats.values():
            s.clear()
        self.jobs.entries.clear()
        self.exports = {self.topo.login: Export(now)}
        self.service.clear()

    def advance(self, k: int, now: float) -> None:
        """Round k's metadata operations, stamped `now` by this host's clock."""
        per_op = self._operations(k, now)
        mean = {op: self.model.md_us(k, op) for op in per_op}
        handled = {OPCODES[op]: (n, mean[op] + RPC_OVERHEAD_US) for op, n in per_op.items()}
        handled["obd_ping"] = (int(self.pings[k]), PING_US)
        n = sum(c for c, _ in handled.values())
        service_us = sum(c * m for c, m in handled.values()) / n if n else 0.0
        util = float(self.model.mds.util[k, 0])
        offered = float(self.model.mds.offered[k, 0])
        q = queue(n, service_us, self.interval, self.service.threads_started, util, offered)
        self.service.serve(handled, q, adaptive_timeout(service_us + q.wait_us))
        self.node.advance(
            self.interval,
            Work(busy=0.03 + 0.7 * util, iowait=0.05 * util, threads=q.active - 1 + q.depth),
        )
        ops = sum(per_op.values())
        self.ib.advance(self.interval, {"mlx5_0": (ops * REPLY_BYTES, ops * REQUEST_BYTES, util)})

    def _operations(self, k: int, now: float) -> dict[str, int]:
        """Round k's operations into md_stats, job_stats and the clients' exports; their
        count per operation."""
        per_op: dict[str, int] = {}
        per_job: dict[tuple[str, str], int] = {}
        per_client: dict[tuple[str, str], int] = {}
        for job, client, op, n in self._rows.get(k, []):
            per_op[op] = per_op.get(op, 0) + n
            if job is not None:
                per_job[job, op] = per_job.get((job, op), 0) + n
            per_client[client, op] = per_client.get((client, op), 0) + n
        mean = {op: self.model.md_us(k, op) for op in per_op}
        for op, n in per_op.items():
            self.stats[op].add_mean(n, mean[op], REQUEST_SPREAD)
        for (job, op), n in per_job.items():
            entry = self.jobs.entry(job, now, self.interval)
            entry.stat(op).add_mean(n, mean[op], REQUEST_SPREAD)
        self.active = {self.topo.login}
        for (client, op), n in per_client.items():
            export = self.exports.get(client)
            if export is None:  # connected somewhere inside the round
                export = self.exports[client] = Export(now - self.interval / 2)
            export.stats[op].add_mean(n, mean[op], REQUEST_SPREAD)
            self.active.add(client)
        self.jobs.cleanup(now)
        return per_op

    # -- the two ways out -------------------------------------------------------------------
    def files(self, now: float) -> dict[str, str]:
        base = f"proc/fs/lustre/mdt/{self.mdt}"
        out = {
            f"{base}/md_stats": lustre_text.stats_file(now, self.start, self.stats.items()),
            f"{base}/job_stats": self.jobs.text(),
        }
        for client in sorted(self.active):
            e = self.exports[client]
            out[f"{base}/exports/{self.topo.nid(client)}/stats"] = lustre_text.stats_file(
                now, e.start, e.stats.items()
            )
        out.update(self.capacity.files(f"sys/fs/lustre/osd-ldiskfs/{self.mdt}"))
        out.update(self.service.files("mds/MDS/mdt", now, self.start))
        out.update(self.node.files())
        out.update(self.ib.files())
        return out

    def readings(self) -> Iterator[Raw]:
        """What `node`, `infiniband` and `lustre_mds` (in the agent's order) read from
        `files()`."""
        yield from self.node.readings(self.role)
        yield from self.ib.readings()
        yield from _metadata(self.mdt, printed(self.stats), None, timed=True)
        for job, e in self.jobs.entries.items():
            born = float(f"{e.start:.9f}")  # as the source parses the printed start_time
            yield from _metadata(self.mdt, e.stats, job, timed=True, all_printed=True, born=born)
        for client in sorted(self.active):  # `lustre_mds.clients`: one counter per export
            ops = sum(s.samples for op, s in self.exports[client].stats.items() if s.samples)
            nid = self.topo.nid(client)
            yield raw("mdt_client", f"{self.mdt}:{nid}", "md_ops", float(ops), sparse=True)
        yield from self.capacity.readings("mdt", self.mdt)
        yield from self.service.readings(self.role, self.name)


def _metadata(
    mdt: str,
    by: dict[str, Stat],
    job: str | None,
    *,
    timed: bool,
    all_printed: bool = False,
    born: float | None = None,
) -> Iterator[Raw]:
    """`lustre_mds.metadata` on md_stats (printed counters) or a job entry (every op)."""
    names = set(MD_OPS) if all_printed else set(by)
    ops = {n: by.get(n) for n in names if n not in DATA_COUNTERS}
    total = sum(s.samples for s in ops.values() if s is not None)
    yield raw("mdt", mdt, "md_ops", float(total), True, job, fresh=born)
    for name in sorted(set(MDT_OPS) | set(ops)):
        s = ops.get(name)
        value = float(s.samples) if s else 0.0
        yield raw("mdt", mdt, f"md_{name}", value, True, job, fresh=born)
    if all_printed:  # a 2.14+ job entry prints its Data-on-MDT counters too, at zero
        for op in ("read", "write"):
            c = by.get(f"{op}_bytes")
            value = float(c.total) if c else 0.0
            yield raw("mdt", mdt, f"{op}_bytes", value, True, job, fresh=born)
            value = float(c.samples) if c else 0.0
            yield raw("mdt", mdt, f"{op}_ops", value, True, job, fresh=born)
    # every printed op counts: a 2.14+ job entry prints all of them, zero or not
    latencies = [s if s is not None else Stat("usecs") for s in ops.values()]
    if timed and latencies:
        yield raw(
            "mdt",
            mdt,
            "service_us",
            float(sum(s.total for s in latencies)),
            counter=False,
            job_id=job,
            per=float(sum(s.samples for s in latencies)),
            fresh=born,
        )
