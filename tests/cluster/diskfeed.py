"""The mini cluster's storage server, measured from the kernel and sent as a Lustre OSS would.

iolens's interference analysis (Beacon 4.1, `analyze/jobs/interference.py`) works from
what real Lustre servers report: per OST and job, requests, bytes and the mean time the
target spent handling one request (`job_stats` `[usecs]`); per OST, the same over all
requests (`obdfilter.*.stats`); per OSS, the mean time a request waited for a service
thread (`ost/OSS/ost_io/stats` `req_waittime`). The mini cluster has no Lustre; its nodes
share one kernel and one disk, far faster than the jobs. So `minicluster.sh` (MC_IO_BPS)
puts every slurmd, and with it every job, in one blkio cgroup whose bandwidth is
throttled: that cgroup is the cluster's one storage server (`mc-oss0` with one target
`mc-OST0000`), with a real, finite capacity that concurrent jobs really share. This module
is that server's agent, measuring the same quantities from real counters:

* each job's processes, found by `SLURM_JOB_ID` in `/proc/PID/environ`; their bytes from
  `/proc/PID/io` (`read_bytes`/`write_bytes`: what reached the block layer, so direct I/O,
  not page-cache hits) and requests (`syscr`/`syscw` of the processes that moved bytes);
* sampled 20 times a second, the threads of each job in uninterruptible sleep (state D):
  requests the server holds, waiting in the throttle or being served. The server is busy
  while any is; its busy time, split between the jobs by the bytes they moved, is each
  job's handling time (`service_us` x requests), as a Lustre OST accounts the time its
  threads spent on a job's requests. The blocked thread-time beyond the busy time is
  time requests queued (`wait_us` of the OSS, per request).

Everything goes through the normal ingest API (`POST /ingest`), as an agent's batches do.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from iolens.model.batch import Batch
from iolens.model.schema import COMPONENTS, SERVER_SAMPLES
from iolens.ship import wire
from iolens.ship.transport import HttpTransport

OST = "mc-OST0000"
OSS = "mc-oss0"
LOAD_HZ = 20


def _job_of(pid: str) -> str | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return None
    for item in env.split(b"\0"):
        if item.startswith(b"SLURM_JOB_ID="):
            return item[13:].decode() or None
    return None


def _io_of(pid: str) -> tuple[int, int, int, int] | None:
    """(read_bytes, write_bytes, syscr, syscw) of a process (all its threads)."""
    try:
        kv = dict(line.split(": ") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
        return int(kv["read_bytes"]), int(kv["write_bytes"]), int(kv["syscr"]), int(kv["syscw"])
    except (OSError, KeyError, ValueError):
        return None


def _start_of(pid: str) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _blocked(pid: str) -> int:
    """Threads of `pid` in uninterruptible sleep (a request outstanding)."""
    n = 0
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return 0
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        n += stat.rsplit(")", 1)[1].split()[0] == "D"
    return n


@dataclass
class DiskFeed:
    server: str
    token: str | None
    nodes: list[str]
    peak_bw: float  # bytes/s: the cgroup's throttle
    request: float = 1 << 20  # bytes per request the capacity is quoted for
    interval: float = 1.0
    sent: int = 0
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._procs: dict[tuple[str, str], tuple[str, tuple[int, int, int, int]]] = {}
        self._transport = HttpTransport(self.server, self.token, timeout=10.0)

    # -- lifecycle -----------------------------------------------------------------------
    def start(self) -> None:
        self._send(self.topology())
        self._thread = threading.Thread(target=self._run, name="diskfeed", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._transport.close()

    def topology(self) -> Batch:
        peak_ops = self.peak_bw / self.request
        comps = [
            {"component_id": OSS, "kind": "oss", "parent": None,
             "peak_bw": self.peak_bw, "peak_ops": peak_ops},
            {"component_id": OST, "kind": "ost", "parent": OSS,
             "peak_bw": self.peak_bw, "peak_ops": peak_ops},
            *({"component_id": n, "kind": "compute", "parent": None, "peak_bw": None,
               "peak_ops": None} for n in self.nodes),
        ]  # fmt: skip
        return Batch(
            source="minicluster-diskfeed",
            key=f"diskfeed:topology:{self.peak_bw:.0f}:{','.join(self.nodes)}",
            components=pa.Table.from_pylist(comps, schema=COMPONENTS),
        )

    # -- sampling ------------------------------------------------------------------------
    def _jobs(self) -> dict[str, list[int]]:
        """Per job: bytes and requests since the last call, over its live processes."""
        out: dict[str, list[int]] = {}
        seen: set[tuple[str, str]] = set()
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            start = _start_of(pid)
            if start is None:
                continue
            key = (pid, start)
            known = self._procs.get(key)
            job = known[0] if known else _job_of(pid)
            if job is None:
                continue
            io = _io_of(pid)
            if io is None:
                continue
            seen.add(key)
            prev = known[1] if known else (0, 0, 0, 0)
            d = [max(0, a - b) for a, b in zip(io, prev, strict=True)]
            acc = out.setdefault(job, [0, 0, 0, 0])
            acc[0] += d[0]
            acc[1] += d[1]
            acc[2] += d[2] if d[0] else 0  # requests of processes that moved bytes
            acc[3] += d[3] if d[1] else 0
            self._procs[key] = (job, io)
        for key in set(self._procs) - seen:  # exited: their last interval is lost
            del self._procs[key]
        return out

    def _run(self) -> None:
        last_t = time.time()
        self._jobs()
        busy = samples = 0
        blocked: dict[str, int] = {}
        while not self._stop.is_set():
            n = 0
            for pid, job in [(pid, j) for (pid, _), (j, _) in self._procs.items()]:
                k = _blocked(pid)
                if k:
                    blocked[job] = blocked.get(job, 0) + k
                    n += k
            busy += n > 0
            samples += 1
            time.sleep(1.0 / LOAD_HZ)
            now_t = time.time()
            if now_t - last_t < self.interval:
                continue
            dt = now_t - last_t
            jobs = self._jobs()
            held = {j: k / samples * dt for j, k in blocked.items()}  # thread-seconds
            try:
                self._send(self.sample(now_t, dt, busy / samples * dt, held, jobs))
            except Exception as exc:  # keep sampling; the test reports what failed
                self.errors.append(str(exc))
            last_t, busy, samples, blocked = now_t, 0, 0, {}

    def sample(
        self, t: float, dt: float, busy_s: float, held: dict[str, float],
        jobs: dict[str, list[int]],
    ) -> Batch:  # fmt: skip
        """One interval as the OSS's jobstats, target and service stats would give it:
        `busy_s` the seconds the server was busy, `held` each job's blocked thread-seconds."""
        ts = datetime.fromtimestamp(t, UTC).replace(tzinfo=None)
        moving = {j: v for j, v in jobs.items() if v[0] or v[1]}
        total = [sum(v[i] for v in moving.values()) for i in range(4)]
        ops, nbytes = total[2] + total[3], total[0] + total[1]
        base = {"ts": ts, "interval_s": dt, "md_ops": 0, "wait_us": None, "service_us": None,
                "queue_len": None, "active_threads": None}  # fmt: skip
        rows = []
        if ops:
            waited = sum(held.get(j, 0.0) for j in moving) - busy_s
            rows.append({**base, "kind": "ost", "component_id": OST, "job_id": None,
                         "read_bytes": total[0], "write_bytes": total[1],
                         "read_ops": total[2], "write_ops": total[3],
                         "service_us": busy_s * 1e6 / ops})  # fmt: skip
            rows.append({**base, "kind": "oss", "component_id": OSS, "job_id": None,
                         "read_ops": total[2], "write_ops": total[3],
                         "wait_us": max(0.0, waited) * 1e6 / ops})  # fmt: skip
        for job, (rb, wb, rops, wops) in moving.items():
            share = busy_s * (rb + wb) / max(nbytes, 1)
            rows.append({**base, "kind": "ost", "component_id": OST, "job_id": job,
                         "read_bytes": rb, "write_bytes": wb, "read_ops": rops,
                         "write_ops": wops,
                         "service_us": share * 1e6 / rops_wops if (rops_wops := rops + wops)
                         else None})  # fmt: skip
        return Batch(
            source="minicluster-diskfeed",
            key=f"diskfeed:{t:.6f}",
            server_samples=pa.Table.from_pylist(rows, schema=SERVER_SAMPLES),
        )

    def _send(self, batch: Batch) -> None:
        self._transport.send(wire.encode(batch))
        self.sent += 1
