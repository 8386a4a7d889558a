"""A simulated object storage server: the files a Lustre 2.15 OSS exposes, round by round.

Per OST (`<fs>-OST<idx>`):

- `/proc/fs/lustre/obdfilter/<ost>/stats`: `read_bytes`/`write_bytes` ([bytes], one sample
  per bulk RPC), `read`/`write` ([usecs], the OST's time per RPC), `destroy` (unlinks of the
  files it holds) and `statfs` (the MDS polling free space);
- `/proc/fs/lustre/obdfilter/<ost>/job_stats`: the same per job, 2.14+ style (every
  operation, `[usecs]` latencies, RPC-size histograms), jobs by Slurm id and processes
  outside any job as `procname.uid` (`cp.1002`);
- `/sys/kernel/debug/lustre/osd-ldiskfs/<ost>/brw_stats`: `pages per bulk r/w`,
  `I/O time (1/1000s)`, `disk I/O size`;
- `/sys/fs/lustre/obdfilter/<ost>/kbytes*`, `files*`.

Per OSS host: `/sys/kernel/debug/lustre/ost/OSS/ost_io/stats` (the bulk I/O service's
queue: `req_waittime`, `req_qdepth`, `req_active`, `req_timeout`, `reqbuf_avail`, and
`ost_read`/`ost_write` handling times), its `threads_started`/`threads_max`, and the host's
/proc and HCA (`node.py`).

An RPC's time is the OST's service time for its size and direction in that round
(`model.py`); N-1 RPCs to one shared file pay the engine's lock-contention factor (3x
writes, 1.5x reads: conflicting extent locks make the OST sync on every lock cancel), so a
job's `[usecs]` follow both the OST's state and its own access pattern.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar

import numpy as np

from iolens.collect.base import Source
from iolens.collect.sources.lustre_oss import (
    BRW_PREFIX,
    BRW_SECTION,
    IO_TIME_MEAN,
    IO_TIME_PREFIX,
    OST_MD_OPS,
    LustreOssSource,
)
from iolens.simulate.engine import N1_OST_PENALTY
from iolens.simulate.servers import Raw, lustre_text, raw
from iolens.simulate.servers.activity import PAGE, Activity, iter_rounds
from iolens.simulate.servers.counters import Histogram, Stat, log2_bucket, spread_counts
from iolens.simulate.servers.lustre import Capacity, JobTable, Service, printed
from iolens.simulate.servers.model import (
    OST_OP_US,
    REQUEST_SPREAD,
    Queue,
    ServiceModel,
    adaptive_timeout,
    queue,
)
from iolens.simulate.servers.node import IbPart, NodePart, Work

OST_STATS = tuple(
    (op, "bytes" if op.endswith("_bytes") else "usecs") for op in lustre_text.OST_JOB_OPS
)
BRW_SECTIONS = (
    (BRW_SECTION, "rpcs"),
    ("I/O time (1/1000s)", "ios"),
    ("disk I/O size", "ios"),
)
IO_TIME_BUCKETS = [1 << i for i in range(13)]  # 1 ms .. 4 s
STATFS_EVERY_S = 5.0  # the MDS's OSP polls each OST's free space
RPC_OVERHEAD_US = 15.0  # a service thread's unpacking and replying around the OST's time


class Ost:
    """One OST's counters."""

    def __init__(self, name: str, rng: np.random.Generator) -> None:
        self.name = name
        self.stats = {op: Stat(unit) for op, unit in OST_STATS}
        self.jobs = JobTable(lustre_text.OST_JOB_OPS)
        self.brw = {title: Histogram() for title, _ in BRW_SECTIONS}
        self.capacity = Capacity(
            int(rng.integers(90, 110)) * 2**30, 2**28, float(rng.uniform(0.2, 0.6))
        )
        self.statfs_due = float(rng.uniform(0, STATFS_EVERY_S))

    def clear(self) -> None:
        for s in self.stats.values():
            s.clear()
        for h in self.brw.values():
            h.clear()
        self.jobs.entries.clear()

    def rpcs(self, write: bool, n: int, rpc_bytes: int, nbytes: int, mean_us: float) -> None:
        op = "write" if write else "read"
        self.stats[f"{op}_bytes"].add(n, nbytes, rpc_bytes, rpc_bytes, n * rpc_bytes * rpc_bytes)
        self.stats[op].add_mean(n, mean_us, REQUEST_SPREAD)
        self.brw[BRW_SECTION].add(log2_bucket(rpc_bytes / PAGE), write, n)
        self.brw["disk I/O size"].add(log2_bucket(max(rpc_bytes, PAGE)), write, n)
        median_ms = mean_us / 1000 / np.exp(REQUEST_SPREAD**2 / 2)
        counts = spread_counts(n, median_ms, REQUEST_SPREAD, IO_TIME_BUCKETS)
        for bucket, c in zip(IO_TIME_BUCKETS, counts, strict=True):
            self.brw["I/O time (1/1000s)"].add(bucket, write, c)
        if write:
            self.capacity.write(nbytes)


class OssHost:
    """One OSS with its OSTs; `advance` adds a round's activity, `files` renders them,
    `readings` is what the agent's sources read from those files."""

    role = "oss"
    sources: ClassVar[list[type[Source]]] = [LustreOssSource]

    def __init__(
        self,
        name: str,
        ost_names: dict[int, str],
        activity: Activity,
        model: ServiceModel,
        rng: np.random.Generator,
    ) -> None:
        self.name = name
        self.osts = {i: Ost(n, rng) for i, n in ost_names.items()}
        self.model = model
        self.interval = activity.rounds.interval
        self.service = Service(("ost_read", "ost_write"), threads_min=16, threads_max=256)
        self.node = NodePart(name, cores=32, mem_gib=256, rng=rng)
        self.ib = IbPart(name, ["mlx5_0"], rng)
        self.start = 0.0  # when the counters started: set by `boot`
        self._rows = self._index(activity)
        self._ops = self._op_rows(activity)

    def _index(self, a: Activity) -> dict[int, list[tuple]]:
        """This host's RPC rows by round: (ost, job, write, rpc bytes, rpcs, bytes, mean us)."""
        t = a.ost
        mine = np.isin(t.ost, list(self.osts))
        idx = np.flatnonzero(mine)
        mean = self.model.ost_rpc_us(t.rnd[idx], t.ost[idx], t.rpc_bytes[idx], t.write[idx])
        penalty = np.where(
            t.n1[idx], np.where(t.write[idx], N1_OST_PENALTY["write"], N1_OST_PENALTY["read"]), 1.0
        )
        mean = mean * penalty
        out: dict[int, list[tuple]] = {}
        for j, i in enumerate(idx):
            out.setdefault(int(t.rnd[i]), []).append(
                (
                    int(t.ost[i]),
                    str(t.job[i]),
                    bool(t.write[i]),
                    int(t.rpc_bytes[i]),
                    int(t.rpcs[i]),
                    int(t.nbytes[i]),
                    float(mean[j]),
                )
            )
        return out

    def _op_rows(self, a: Activity) -> dict[int, list[tuple[int, str | None, str, int]]]:
        out: dict[int, list[tuple[int, str | None, str, int]]] = {}
        t = a.ost_ops
        for k, rows in iter_rounds(t):
            for i in rows:
                if int(t.where[i]) in self.osts:
                    job = None if t.job[i] is None else str(t.job[i])
                    out.setdefault(k, []).append(
                        (int(t.where[i]), job, str(t.op[i]), int(t.count[i]))
                    )
        return out

    # -- time -----------------------------------------------------------------------------
    def boot(self, now: float, rng: np.random.Generator) -> None:
        """Counters as a server up for days finds them: history at a modest load."""
        uptime = float(rng.uniform(2, 20)) * 86400
        self.start = now - uptime
        total = 0
        for ost in self.osts.values():
            free = ost.capacity.kbytesfree
            for write, mean_us in ((False, 1200.0), (True, 1600.0)):
                n = int(uptime * rng.uniform(20, 200))
                ost.rpcs(write, n, 1 << 20, n << 20, mean_us)
                total += n
            ost.capacity.kbytesfree = free  # what it holds now, whatever was written before
            n = int(uptime / STATFS_EVERY_S)
            ost.stats["statfs"].add_mean(n, OST_OP_US["statfs"], REQUEST_SPREAD)
        q = queue(total, 1400.0, uptime, self.service.threads_min, 0.1, 0.0)
        self.service.serve(
            {"ost_read": (total // 2, 1250.0), "ost_write": (total - total // 2, 1650.0)}, q, 1
        )

    def reset(self, now: float) -> None:
        """A restart (or `stats=clear` everywhere): every Lustre counter from zero."""
        self.start = now
        for ost in self.osts.values():
            ost.clear()
        self.service.clear()

    def advance(self, k: int, now: float) -> None:
        """Round k's requests, stamped `now` by this host's clock."""
        handled, sent, received = self._bulk(k, now)
        self._object_ops(k, now)
        ids = list(self.osts)
        util = float(np.mean(self.model.osts.util[k, ids]))
        q = self._serve(handled, util, float(np.max(self.model.osts.offered[k, ids])))
        self.node.advance(
            self.interval,
            Work(busy=0.05 + 0.5 * util, iowait=0.3 * util, threads=q.active - 1 + q.depth),
        )
        self.ib.advance(self.interval, {"mlx5_0": (sent, received, util)})

    def _bulk(self, k: int, now: float) -> tuple[dict[str, list[float]], int, int]:
        """Round k's bulk RPCs into the OSTs' and the jobs' counters; per opcode (RPCs,
        total us) for the service, and the bytes sent and received."""
        handled = {"ost_read": [0, 0.0], "ost_write": [0, 0.0]}
        sent = received = 0
        for ost_i, job, write, rpc_bytes, n, nbytes, mean_us in self._rows.get(k, []):
            ost = self.osts[ost_i]
            ost.rpcs(write, n, rpc_bytes, nbytes, mean_us)
            entry = ost.jobs.entry(job, now, self.interval)
            op = "write" if write else "read"
            entry.stat(f"{op}_bytes").add(n, nbytes, rpc_bytes, rpc_bytes, n * rpc_bytes**2)
            entry.stat(op).add_mean(n, mean_us, REQUEST_SPREAD)
            hist = entry.hist.setdefault(f"{op}_bytes", {})
            hist[log2_bucket(rpc_bytes)] = hist.get(log2_bucket(rpc_bytes), 0) + n
            h = handled[f"ost_{op}"]
            h[0] += n
            h[1] += n * mean_us
            if write:
                received += nbytes
            else:
                sent += nbytes
        return handled, sent, received

    def _object_ops(self, k: int, now: float) -> None:
        """Unlinks destroying objects (a job's), and the MDS polling free space."""
        factor = self.model.osts.factor
        for ost_i, job, op, n in self._ops.get(k, []):
            ost = self.osts[ost_i]
            mean_us = OST_OP_US[op] * float(factor[k, ost_i])
            ost.stats[op].add_mean(n, mean_us, REQUEST_SPREAD)
            if job is not None:
                entry = ost.jobs.entry(job, now, self.interval)
                entry.stat(op).add_mean(n, mean_us, REQUEST_SPREAD)
        for i, ost in self.osts.items():
            ost.statfs_due -= self.interval
            n = 0
            while ost.statfs_due <= 0:
                ost.statfs_due += STATFS_EVERY_S
                n += 1
            mean_us = OST_OP_US["statfs"] * float(factor[k, i])
            ost.stats["statfs"].add_mean(n, mean_us, REQUEST_SPREAD)
            ost.jobs.cleanup(now)

    def _serve(self, handled: dict[str, list[float]], util: float, offered: float) -> Queue:
        """The `ost_io` service over the round: its queue, and each RPC's handling time
        (the OST's own time plus unpacking and replying)."""
        n = int(handled["ost_read"][0] + handled["ost_write"][0])
        service_us = (handled["ost_read"][1] + handled["ost_write"][1]) / n if n else 0.0
        q = queue(n, service_us, self.interval, self.service.threads_started, util, offered)
        self.service.serve(
            {op: (int(c), total / c + RPC_OVERHEAD_US) for op, (c, total) in handled.items() if c},
            q,
            adaptive_timeout(service_us + q.wait_us),
        )
        return q

    # -- the two ways out -------------------------------------------------------------------
    def files(self, now: float) -> dict[str, str]:
        out: dict[str, str] = {}
        for ost in self.osts.values():
            base = f"proc/fs/lustre/obdfilter/{ost.name}"
            out[f"{base}/stats"] = lustre_text.stats_file(now, self.start, ost.stats.items())
            out[f"{base}/job_stats"] = ost.jobs.text()
            out[f"sys/kernel/debug/lustre/osd-ldiskfs/{ost.name}/brw_stats"] = (
                lustre_text.brw_stats_file(
                    now, self.start, ((t, u, ost.brw[t]) for t, u in BRW_SECTIONS)
                )
            )
            out.update(ost.capacity.files(f"sys/fs/lustre/obdfilter/{ost.name}"))
        out.update(self.service.files("ost/OSS/ost_io", now, self.start))
        out.update(self.node.files())
        out.update(self.ib.files())
        return out

    def readings(self) -> Iterator[Raw]:
        """What `node`, `infiniband` and `lustre_oss` (in the agent's order) read from
        `files()`."""
        yield from self.node.readings(self.role)
        yield from self.ib.readings()
        for ost in sorted(self.osts.values(), key=lambda o: o.name):
            by = printed(ost.stats)
            yield from _traffic(ost.name, by, None)
            yield from _service_time(ost.name, by, None, None)
            for job, e in ost.jobs.entries.items():
                born = float(f"{e.start:.9f}")  # as the source parses the printed start_time
                yield from _traffic(ost.name, e.stats, job, born)
                yield from _service_time(ost.name, e.stats, job, born)
            pages = ost.brw[BRW_SECTION].buckets
            used = sorted(b for b, c in pages.items() if c[0] or c[1])
            b = used[0] if used else 1
            while used and b <= used[-1]:
                r, w = pages.get(b, (0, 0))
                yield raw("ost", ost.name, f"{BRW_PREFIX}{b}_read", float(r))
                yield raw("ost", ost.name, f"{BRW_PREFIX}{b}_write", float(w))
                b *= 2
            yield from _io_time(ost.name, ost.brw["I/O time (1/1000s)"].buckets)
            yield from ost.capacity.readings("ost", ost.name)
        yield from self.service.readings(self.role, self.name)


def _traffic(
    ost: str, by: dict[str, Stat], job: str | None, born: float | None = None
) -> Iterator[Raw]:
    """`lustre_oss.traffic` on a stats file's (or a job entry's) counters."""
    for op in ("read", "write"):
        c = by.get(f"{op}_bytes")
        nbytes = float(c.total) if c else 0.0
        yield raw("ost", ost, f"{op}_bytes", nbytes, True, job, fresh=born)
        yield raw("ost", ost, f"{op}_ops", float(c.samples) if c else 0.0, True, job, fresh=born)
    md = sum(c.samples for name, c in by.items() if name in OST_MD_OPS)
    yield raw("ost", ost, "md_ops", float(md), True, job, fresh=born)


def _service_time(
    ost: str, by: dict[str, Stat], job: str | None, born: float | None
) -> Iterator[Raw]:
    """`lustre_oss.service_time`: the `read`/`write` [usecs] sums over their samples (a job
    entry prints both, at zero or not)."""
    if job is None:
        timed = [by[n] for n in ("read", "write") if n in by]
    else:
        timed = [by.get(n) or Stat("usecs") for n in ("read", "write")]
    if timed:
        yield raw(
            "ost",
            ost,
            "service_us",
            float(sum(s.total for s in timed)),
            counter=False,
            job_id=job,
            per=float(sum(s.samples for s in timed)),
            fresh=born,
        )


def _io_time(ost: str, buckets: dict[int, list[int]]) -> Iterator[Raw]:
    """`lustre_oss.io_time` on the `I/O time (1/1000s)` histogram as printed: every
    bucket from the first to the last non-empty one (1 ms ticks), then the mean (read
    even from an empty section, which the file always has)."""
    used = sorted(b for b, c in buckets.items() if c[0] or c[1])
    weighted = events = 0.0
    b = used[0] if used else 1
    while used and b <= used[-1]:
        counts = buckets.get(b, (0, 0))
        middle_us = 1000 * (0.5 if b == 1 else 0.75 * b)
        for column, count in zip(("read", "write"), counts, strict=True):
            yield raw("ost", ost, f"{IO_TIME_PREFIX}{b:g}_{column}", float(count))
            weighted += count * middle_us
            events += count
        b *= 2
    yield raw("ost", ost, IO_TIME_MEAN, weighted, counter=False, per=events)
