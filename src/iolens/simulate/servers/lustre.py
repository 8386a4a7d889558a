"""Pieces every simulated Lustre server shares: a PTLRPC service's stats, a target's
job_stats table, its capacity files, and the readings the real sources take from them.

The `*_readings` functions say, for the fast path, exactly what `collect/sources/_lustre.py`,
`lustre_oss.py` and `lustre_mds.py` read from the files rendered here; a test checks the
two paths against each other table by table, so a source that learns a new metric shows
up there as a difference to add here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

import numpy as np

from iolens.collect.sources._lustre import CAPACITY, SERVICE_MEANS, UNTIMED_OPCODES
from iolens.simulate.servers import Raw, lustre_text, raw
from iolens.simulate.servers.counters import Stat, whole
from iolens.simulate.servers.model import Queue

#: How long Lustre keeps a job's entry after its last request (`job_cleanup_interval`).
JOB_CLEANUP_S = 600.0
#: The request buffers of a service (`reqbuf_avail` counts the free ones).
REQUEST_BUFFERS = 64


class Service:
    """One PTLRPC service (`ost/OSS/ost_io`, `mds/MDS/mdt`): its `stats` and thread counts."""

    QUEUE = (
        ("req_waittime", "usecs"),
        ("req_qdepth", "reqs"),
        ("req_active", "reqs"),
        ("req_timeout", "secs"),
        ("reqbuf_avail", "bufs"),
    )

    def __init__(self, opcodes: tuple[str, ...], threads_min: int, threads_max: int) -> None:
        self.stats = {name: Stat(unit) for name, unit in self.QUEUE}
        self.stats.update({op: Stat("usecs") for op in opcodes})
        self.threads_min = threads_min
        self.threads_max = threads_max
        self.threads_started = threads_min

    def clear(self) -> None:
        for s in self.stats.values():
            s.clear()
        self.threads_started = self.threads_min

    def serve(self, handled: Mapping[str, tuple[int, float]], q: Queue, timeout_s: int) -> None:
        """One round: `handled` = opcode -> (requests, mean handling time, us)."""
        n = sum(c for c, _ in handled.values())
        if n <= 0:
            return
        st = self.stats
        st["req_waittime"].add_mean(n, max(q.wait_us, 1.0), 0.8)
        depth_hi = int(np.ceil(q.depth * 4)) if q.depth > 0 else 0
        st["req_qdepth"].add(n, whole(n * q.depth), 0, depth_hi, whole(n * q.depth**2 * 2))
        active_hi = max(1, int(np.ceil(q.active * 2)))
        st["req_active"].add(n, whole(n * q.active), 1, active_hi, whole(n * q.active**2))
        st["req_timeout"].add(n, n * timeout_s, timeout_s, timeout_s, n * timeout_s**2)
        free = max(1.0, REQUEST_BUFFERS - min(REQUEST_BUFFERS - 1.0, q.depth))
        lo = max(1, int(free - 2 * q.depth) - 1)
        st["reqbuf_avail"].add(
            2 * n, whole(2 * n * free), lo, REQUEST_BUFFERS, whole(2 * n * free**2)
        )
        for op, (count, mean_us) in handled.items():
            st[op].add_mean(count, mean_us, 0.5)
        self.threads_started = max(
            self.threads_started, min(self.threads_max, int(np.ceil(q.active * 1.25)))
        )

    def files(self, base: str, now: float, start: float) -> dict[str, str]:
        """`base` is `ost/OSS/ost_io` or `mds/MDS/mdt`: stats in debugfs, threads in sysfs."""
        return {
            f"sys/kernel/debug/lustre/{base}/stats": lustre_text.stats_file(
                now, start, self.stats.items()
            ),
            f"sys/fs/lustre/{base}/threads_started": f"{self.threads_started}\n",
            f"sys/fs/lustre/{base}/threads_max": f"{self.threads_max}\n",
        }

    def readings(self, kind: str, host: str) -> Iterator[Raw]:
        """What `_lustre.service` reads (the main service: no metric prefix)."""
        printed = {name: s for name, s in self.stats.items() if s.samples}
        for counter, metric in SERVICE_MEANS.items():
            c = printed.get(counter)
            total, events = (c.total, c.samples) if c else (0, 0)
            yield raw(kind, host, metric, float(total), counter=False, per=float(events))
        timed = [
            s
            for name, s in printed.items()
            if s.unit == "usecs" and name not in SERVICE_MEANS and name not in UNTIMED_OPCODES
        ]
        yield raw(
            kind,
            host,
            "service_us",
            float(sum(s.total for s in timed)),
            counter=False,
            per=float(sum(s.samples for s in timed)),
        )
        waits = printed.get("req_waittime")
        yield raw(kind, host, "requests", float(waits.samples if waits else 0))
        yield raw(kind, host, "threads_started", float(self.threads_started), counter=False)
        yield raw(kind, host, "threads_max", float(self.threads_max), counter=False)


@dataclass
class JobEntry:
    """One job's counters on one target, as job_stats lists them."""

    start: float
    snapshot: float
    last: float  # when it last had a request (true time: cleanup is by the server's clock)
    stats: dict[str, Stat] = field(default_factory=dict)
    hist: dict[str, dict[int, int]] = field(default_factory=dict)

    def stat(self, op: str) -> Stat:
        s = self.stats.get(op)
        if s is None:
            s = self.stats[op] = Stat("bytes" if op.endswith("_bytes") else "usecs")
        return s


class JobTable:
    """A target's job_stats: entries appear with a job's first request and leave
    `JOB_CLEANUP_S` after its last one."""

    def __init__(self, ops: tuple[str, ...]) -> None:
        self.ops = ops
        self.entries: dict[str, JobEntry] = {}

    def entry(self, job: str, now: float, interval: float) -> JobEntry:
        e = self.entries.get(job)
        if e is None:
            # created by a request somewhere inside the round
            e = self.entries[job] = JobEntry(now - interval / 2, now, now)
        e.snapshot = e.last = now
        return e

    def cleanup(self, now: float) -> None:
        for job in [j for j, e in self.entries.items() if now - e.last > JOB_CLEANUP_S]:
            del self.entries[job]

    def text(self) -> str:
        return lustre_text.job_stats_file(
            ((j, e.snapshot, e.start, e.stats, e.hist) for j, e in self.entries.items()),
            self.ops,
        )


class Capacity:
    """A target's space and inode gauges (`kbytes*`, `files*`)."""

    def __init__(self, kbytes: int, files: int, used: float) -> None:
        self.kbytestotal = kbytes
        self.kbytesfree = int(kbytes * (1 - used))
        self.filestotal = files
        self.filesfree = int(files * (1 - used * 0.5))

    def write(self, nbytes: int) -> None:
        self.kbytesfree = max(0, self.kbytesfree - nbytes // 1024)

    def values(self) -> dict[str, int]:
        return {
            "kbytestotal": self.kbytestotal,
            "kbytesfree": self.kbytesfree,
            "kbytesavail": max(0, self.kbytesfree - self.kbytestotal // 20),
            "filestotal": self.filestotal,
            "filesfree": self.filesfree,
        }

    def files(self, where: str) -> dict[str, str]:
        return {f"{where}/{k}": f"{v}\n" for k, v in self.values().items()}

    def readings(self, kind: str, target: str) -> Iterator[Raw]:
        values = self.values()
        for param, (metric, factor) in CAPACITY.items():
            yield raw(kind, target, metric, float(values[param] * factor), counter=False)


def printed(stats: Mapping[str, Stat]) -> dict[str, Stat]:
    """The counters a stats file prints: those with samples."""
    return {name: s for name, s in stats.items() if s.samples}
