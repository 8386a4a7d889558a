"""A metadata server's history written into real Lustre MDS files, one folder a minute.

Two bases, both real captures in the repository:

- `HPE_210`: the HPE Lustre 2.10.1 MDS (`tests/cases/collect/lustre_mds/hpe-2.10.1`,
  Apache-2.0): `[reqs]` counters, everything in `/proc`;
- `DDN_214`: a DDN 2.14 MDS (`tests/cases/collect/lustre_mds/ddn-2.14-ai400x2-exports`,
  MIT): `[usecs]` counters with latency sums, job_stats with `start_time`, service stats in
  debugfs.

Their `md_stats`, `job_stats`, `exports/<nid>/stats` and `mds/MDS/mdt/stats` are
advanced with `iolens.simulate.captures`, every other byte kept, so `iolens import
lustre` reads exactly what the real agent would have seen on that server.

What is written (rates per second, mild lognormal noise, sigma 0.1 per minute):

- ordinary job traffic: Slurm job 4101 on one compute client for the whole run, job 4102
  on another from minute 8 to 40 (open/close/getattr/setattr/mknod/unlink), counted in
  md_stats, in job_stats under the job id and in the client's export;
- interactive use on the login node, ~6 ops/s (`bash.1001` in job_stats when the site's
  clients tag processes as procname_uid, else in no entry at all);
- optionally a storm: `storm_rate` getattr/s from the login NID for the `storm` minutes,
  counted in md_stats and the login export, and in job_stats as `find.1003` or nowhere;
- the MDS metadata service (`mds/MDS/mdt/stats`): one request per operation plus 20
  pings/s, `req_qdepth` mean ~0.005 (as in the real captures' lifetime means) and ~12
  during the storm, `req_waittime` ~60 us and ~400 us, `req_active` ~1.5 and all 17
  threads; `mds_getattr` timed at ~35 us.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from iolens.simulate.captures import Delta, advance_job_stats, advance_stats

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect" / "lustre_mds"
MDS_HOST = "mds1"
T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
#: ops/s of an ordinary job, by operation
JOB_MIX = {
    "open": 40.0,
    "close": 40.0,
    "getattr": 60.0,
    "setattr": 6.0,
    "mknod": 4.0,
    "unlink": 3.0,
}
LOGIN_MIX = {"getattr": 4.0, "open": 1.0, "close": 1.0}
#: microseconds per operation, for the `[usecs]` counters of 2.12+
LATENCY = {"open": 60, "close": 10, "getattr": 8, "setattr": 30, "mknod": 60, "unlink": 50}
JOB_SPAN = {"4101": (0, 10_000), "4102": (8, 40)}
PINGS = 20.0  # obd_ping requests/s from connected clients
THREADS = 17  # busy threads when saturated (threads_started of the 2.10 capture)


@dataclass(frozen=True)
class Capture:
    """Where one real capture keeps the files a storm changes, and its clients."""

    base: Path
    mdt: str
    service: str  # the mds/MDS/mdt/stats file, relative to the capture's root
    login: str  # the login node's NID
    compute: tuple[str, str]  # the NIDs of job 4101 and job 4102
    usecs: str | None  # the unit of timed counters (2.12+), None when ops count [reqs] only

    @property
    def md_stats(self) -> Path:
        return Path("proc/fs/lustre/mdt") / self.mdt / "md_stats"

    @property
    def job_stats(self) -> Path:
        return Path("proc/fs/lustre/mdt") / self.mdt / "job_stats"

    def export(self, nid: str) -> Path:
        return Path("proc/fs/lustre/mdt") / self.mdt / "exports" / nid / "stats"


HPE_210 = Capture(
    CASES / "hpe-2.10.1",
    "lustrefs-MDT0000",
    "proc/fs/lustre/mds/MDS/mdt/stats",
    "172.20.20.6@o2ib",
    ("172.20.20.4@o2ib", "172.20.20.5@o2ib"),
    None,
)
DDN_214 = Capture(
    CASES / "ddn-2.14-ai400x2-exports",
    "ai400x2-MDT0000",
    "sys/kernel/debug/lustre/mds/MDS/mdt/stats",
    "192.168.0.114@o2ib",
    ("192.168.0.100@o2ib", "192.168.0.101@o2ib"),
    "usecs",
)


@dataclass(frozen=True)
class Series:
    path: Path
    capture: Capture
    minutes: int
    storm: tuple[int, int] | None

    def at(self, minute: int) -> datetime:
        """Naive UTC time `minute` minutes after the first folder."""
        return (T0 + timedelta(minutes=minute)).replace(tzinfo=None)


def write_series(
    dest: Path,
    capture: Capture = HPE_210,
    *,
    minutes: int = 45,
    storm: tuple[int, int] | None = (15, 35),
    storm_rate: float = 40_000.0,
    storm_tag: str | None = None,
    login_tag: str | None = None,
    seed: int = 17,
) -> Series:
    """`minutes + 1` sample folders under `dest`; the storm covers minutes [a, b)."""
    rng = np.random.default_rng(seed)
    root = capture.base
    files = {
        p.relative_to(root): p.read_text()
        for p in root.rglob("*")
        if p.is_file() and p.name not in ("PROVENANCE.md", "expected.json")
    }
    compute = dict(zip(JOB_SPAN, capture.compute, strict=True))
    for m in range(minutes + 1):
        now = (T0 + timedelta(minutes=m)).timestamp()
        if m > 0:
            w = _Minute(rng)
            for job, (a, b) in JOB_SPAN.items():
                if a <= m - 1 < b:
                    w.add(compute[job], job, JOB_MIX)
            w.add(capture.login, login_tag, LOGIN_MIX)
            storming = storm is not None and storm[0] <= m - 1 < storm[1]
            if storming:
                w.add(capture.login, storm_tag, {"getattr": storm_rate})
            unit = capture.usecs
            md = capture.md_stats
            files[md] = advance_stats(files[md], _counts(w.md, unit), now)
            if w.tags:
                js = capture.job_stats
                jobs = {tag: _counts(ops, unit) for tag, ops in w.tags.items()}
                files[js] = advance_job_stats(files[js], jobs, now)
            for nid, ops in w.nids.items():
                path = capture.export(nid)
                files[path] = advance_stats(files[path], _counts(ops, unit), now)
            requests = sum(w.md.values()) + int(PINGS * 60)
            svc = Path(capture.service)
            deltas = _service_deltas(rng, requests, w.md, storming, unit or "usec")
            files[svc] = advance_stats(files[svc], deltas, now)
        folder = dest / (T0 + timedelta(minutes=m)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for rel, text in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return Series(dest, capture, minutes, storm)


class _Minute:
    """The operations of one minute: in md_stats, per jobstats id and per client NID."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng
        self.md: dict[str, int] = {}
        self.tags: dict[str, dict[str, int]] = {}
        self.nids: dict[str, dict[str, int]] = {}

    def add(self, nid: str, tag: str | None, mix: dict[str, float]) -> None:
        """`mix` ops/s from client `nid`, in job_stats under `tag` (None: no entry)."""
        for op, rate in mix.items():
            n = int(rate * 60 * self.rng.lognormal(0.0, 0.1))
            self.md[op] = self.md.get(op, 0) + n
            client = self.nids.setdefault(nid, {})
            client[op] = client.get(op, 0) + n
            if tag is not None:
                entry = self.tags.setdefault(tag, {})
                entry[op] = entry.get(op, 0) + n


def _counts(ops: dict[str, int], usecs: str | None) -> dict[str, Delta]:
    """Increments of operation counters: counts only (2.10 `[reqs]`), or with the latency
    sums of timed counters (`[usecs]`, 2.12+)."""
    if usecs is None:
        return {op: Delta(n) for op, n in ops.items()}
    return {
        op: Delta(n, n * LATENCY[op], 1, 4 * LATENCY[op], n * LATENCY[op] ** 2, usecs)
        for op, n in ops.items()
    }


def _service_deltas(
    rng: np.random.Generator, requests: int, md: dict[str, int], storming: bool, usec: str
) -> dict[str, Delta]:
    """One minute of `mds/MDS/mdt/stats`: queue, wait and busy threads per request."""
    noise = rng.lognormal(0.0, 0.1)
    qdepth = (12.0 if storming else 0.005) * noise
    wait = (400.0 if storming else 60.0) * noise
    active = float(THREADS) if storming else 1.5 * noise
    getattr_ = md.get("getattr", 0)

    def mean(n: int, value: float, lo: int, hi: int, unit: str) -> Delta:
        total = round(n * value)
        return Delta(n, total, lo, max(hi, lo), int(total * value), unit)

    return {
        "req_waittime": mean(requests, wait, 8, int(wait * 8), usec),
        "req_qdepth": mean(requests, qdepth, 0, int(qdepth * 3) + 1, "reqs"),
        "req_active": mean(requests, active, 1, THREADS, "reqs"),
        "req_timeout": mean(requests, 1.0, 1, 1, "sec"),
        "reqbuf_avail": mean(requests, 63.5, 63, 64, "bufs"),
        "mds_getattr": mean(getattr_, 35.0, 5, 900, usec),
        "obd_ping": mean(int(PINGS * 60), 40.0, 4, 400, usec),
    }
