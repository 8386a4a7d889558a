"""The mini cluster's storage server, measured from the kernel and sent as server samples.

iolens's interference analysis (Beacon 4.1, `analyze/jobs/interference.py`) works from
what storage servers report: each job's requests on its I/O forwarding node and OSTs
(Lustre jobstats, forwarder request logs) and each server's load (busy threads, queue).
The mini cluster has no Lustre and no forwarders; its nodes share one kernel and one disk,
far faster than the jobs. So `minicluster.sh` (MC_IO_BPS) puts every slurmd, and with it
every job, in one blkio cgroup whose bandwidth is throttled: that cgroup is the cluster's
one storage server, with a real, finite capacity that concurrent jobs really share. This
module is that server's agent, from real counters:

* it serves as the forwarding node `mc-fwd0` of every compute node and as `mc-OST0000`;
* per-job rows (what jobstats would give): each job's processes, found by `SLURM_JOB_ID`
  in `/proc/PID/environ`; their bytes from `/proc/PID/io` (`read_bytes`/`write_bytes`:
  what reached the block layer, so direct I/O, not page-cache hits) and requests
  (`syscr`/`syscw` of the processes that moved bytes);
* component totals: the same bytes and requests summed, and the load, sampled 20 times a
  second: a thread of a job in uninterruptible sleep (state D) is a request the server
  holds, waiting in the throttle or on the disk. `active_threads` is the share of samples
  with at least one (the server is one "thread": the throttle serves one stream at full
  rate), `queue_len` the mean number beyond it.

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
from iolens.model.schema import COMPONENTS, FORWARDING, SERVER_SAMPLES
from iolens.ship import wire
from iolens.ship.transport import HttpTransport

FWD = "mc-fwd0"
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
            {"component_id": FWD, "kind": "forwarder", "parent": None,
             "peak_bw": self.peak_bw, "peak_ops": peak_ops},
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
            forwarding=pa.Table.from_pylist(
                [{"compute_node": n, "forwarder": FWD} for n in self.nodes], schema=FORWARDING
            ),
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
        busy = blocked = samples = 0
        while not self._stop.is_set():
            pids = [pid for pid, _ in self._procs]
            n = sum(_blocked(pid) for pid in pids)
            busy += n > 0
            blocked += n
            samples += 1
            time.sleep(1.0 / LOAD_HZ)
            now_t = time.time()
            if now_t - last_t < self.interval:
                continue
            jobs = self._jobs()
            try:
                self._send(
                    self.sample(now_t, now_t - last_t, busy / samples, blocked / samples, jobs)
                )
            except Exception as exc:  # keep sampling; the test reports what failed
                self.errors.append(str(exc))
            last_t, busy, blocked, samples = now_t, 0, 0, 0

    def sample(
        self, t: float, dt: float, busy: float, outstanding: float, jobs: dict[str, list[int]]
    ) -> Batch:
        ts = datetime.fromtimestamp(t, UTC).replace(tzinfo=None)
        total = [sum(v[i] for v in jobs.values()) for i in range(4)]
        rows = []
        for kind, comp in (("forwarder", FWD), ("ost", OST)):
            rows.append(
                {"ts": ts, "interval_s": dt, "kind": kind, "component_id": comp, "job_id": None,
                 "read_bytes": total[0], "write_bytes": total[1], "read_ops": total[2],
                 "write_ops": total[3], "md_ops": 0, "wait_us": None, "service_us": None,
                 "queue_len": max(0.0, outstanding - 1.0), "active_threads": min(1.0, busy)}
            )  # fmt: skip
            for job, (rb, wb, rops, wops) in jobs.items():
                if rb or wb:
                    rows.append(
                        {"ts": ts, "interval_s": dt, "kind": kind, "component_id": comp,
                         "job_id": job, "read_bytes": rb, "write_bytes": wb, "read_ops": rops,
                         "write_ops": wops, "md_ops": 0, "wait_us": None, "service_us": None,
                         "queue_len": None, "active_threads": None}
                    )  # fmt: skip
        return Batch(
            source="minicluster-diskfeed",
            key=f"diskfeed:{t:.6f}",
            server_samples=pa.Table.from_pylist(rows, schema=SERVER_SAMPLES),
        )

    def _send(self, batch: Batch) -> None:
        self._transport.send(wire.encode(batch))
        self.sent += 1
