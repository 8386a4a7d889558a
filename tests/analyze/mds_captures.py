"""A metadata server's history written into real Lustre 2.10 MDS files, one folder a minute.

The base is the HPE 2.10.1 MDS capture (`tests/cases/collect/lustre_mds/hpe-2.10.1`,
Apache-2.0): its `md_stats`, `job_stats`, `exports/<nid>/stats` and `mds/MDS/*/stats`
are advanced with `iolens.simulate.captures`, every other byte kept, so `iolens import
lustre` reads exactly what the real agent would have seen on that server.

What is written (rates per second, mild lognormal noise, sigma 0.1 per minute):

- ordinary job traffic: Slurm job 4101 on client 172.20.20.4@o2ib for the whole run, job
  4102 on 172.20.20.5@o2ib from minute 8 to 40 (open/close/getattr/setattr/mknod/unlink),
  counted in md_stats, in job_stats under the job id and in the client's export;
- interactive use on the login node 172.20.20.6@o2ib, ~6 ops/s (`bash.1001` in job_stats
  when the site's clients tag processes as procname_uid, else in no entry at all);
- optionally a storm: `storm_rate` getattr/s from the login NID for the `storm` minutes,
  counted in md_stats and the login export, and in job_stats as `find.1003` or nowhere;
- the MDS metadata service (`mds/MDS/mdt/stats`): one request per operation plus 20
  pings/s, `req_qdepth` mean ~0.005 (as in the real captures' lifetime means) and ~12
  during the storm, `req_waittime` ~60 us and ~400 us, `req_active` ~1.5 and all 17
  started threads; `mds_getattr` [usec] timed at ~35 us.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from iolens.simulate.captures import Delta, advance_job_stats, advance_stats

BASE = Path(__file__).resolve().parents[1] / "cases" / "collect" / "lustre_mds" / "hpe-2.10.1"
L = Path("proc/fs/lustre")
MDT = "lustrefs-MDT0000"
MDS_HOST = "mds1"
LOGIN = "172.20.20.6@o2ib"
COMPUTE = {"4101": "172.20.20.4@o2ib", "4102": "172.20.20.5@o2ib"}
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
JOB_SPAN = {"4101": (0, 10_000), "4102": (8, 40)}
PINGS = 20.0  # obd_ping requests/s from connected clients
THREADS = 17  # threads_started of the captured mdt service


@dataclass(frozen=True)
class Series:
    path: Path
    minutes: int
    storm: tuple[int, int] | None

    def at(self, minute: int) -> datetime:
        """Naive UTC time `minute` minutes after the first folder."""
        return (T0 + timedelta(minutes=minute)).replace(tzinfo=None)


def write_series(
    dest: Path,
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
    files = {p.relative_to(BASE): p.read_text() for p in (BASE / L).rglob("*") if p.is_file()}
    md_stats = L / "mdt" / MDT / "md_stats"
    job_stats = L / "mdt" / MDT / "job_stats"
    service = L / "mds/MDS/mdt/stats"

    def export(nid: str) -> Path:
        return L / "mdt" / MDT / "exports" / nid / "stats"

    for m in range(minutes + 1):
        now = (T0 + timedelta(minutes=m)).timestamp()
        if m > 0:
            w = _Minute(rng)
            for job, (a, b) in JOB_SPAN.items():
                if a <= m - 1 < b:
                    w.add(COMPUTE[job], job, JOB_MIX)
            w.add(LOGIN, login_tag, LOGIN_MIX)
            storming = storm is not None and storm[0] <= m - 1 < storm[1]
            if storming:
                w.add(LOGIN, storm_tag, {"getattr": storm_rate})
            files[md_stats] = advance_stats(files[md_stats], _counts(w.md), now)
            if w.jobs:
                files[job_stats] = advance_job_stats(files[job_stats], w.jobs, now)
            for nid, ops in w.nids.items():
                files[export(nid)] = advance_stats(files[export(nid)], _counts(ops), now)
            requests = sum(w.md.values()) + int(PINGS * 60)
            files[service] = advance_stats(
                files[service], _service_deltas(rng, requests, w.md, storming), now
            )
        folder = dest / (T0 + timedelta(minutes=m)).strftime("%Y-%m-%dT%H:%M:%SZ")
        for rel, text in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return Series(dest, minutes, storm)


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

    @property
    def jobs(self) -> dict[str, dict[str, Delta]]:
        return {tag: _counts(ops) for tag, ops in self.tags.items()}


def _counts(ops: dict[str, int]) -> dict[str, Delta]:
    return {op: Delta(n) for op, n in ops.items()}


def _service_deltas(
    rng: np.random.Generator, requests: int, md: dict[str, int], storming: bool
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
        "req_waittime": mean(requests, wait, 8, int(wait * 8), "usec"),
        "req_qdepth": mean(requests, qdepth, 0, int(qdepth * 3) + 1, "reqs"),
        "req_active": mean(requests, active, 1, THREADS, "reqs"),
        "req_timeout": mean(requests, 1.0, 1, 1, "sec"),
        "reqbuf_avail": mean(requests, 63.5, 63, 64, "bufs"),
        "mds_getattr": mean(getattr_, 35.0, 5, 900, "usec"),
        "obd_ping": mean(int(PINGS * 60), 40.0, 4, 400, "usec"),
    }


def copy_series(src: Series, dest: Path) -> Series:
    shutil.copytree(src.path, dest)
    return Series(dest, src.minutes, src.storm)
