"""Sample folders of a real OSS capture with traffic and a fail-slow OST written into them.

`write_replay` takes the OSS files of a real capture (obdfilter `stats` and `job_stats`,
`brw_stats`, the `ost/OSS` services) and writes one sample folder per minute in which
every counter has advanced as a busy OSS would advance it, with
`iolens.simulate.captures` (Lustre's own line layouts; every other byte kept):

- ordinary striped traffic: every OST gets Poisson-many read and write RPCs of the
  capture's usual size each minute, split between the jobs in `jobs`;
- latency per RPC = the OST's own speed (log-normal, sd 0.1) x a load factor all OSTs
  share x the OST's noise (log-normal AR(1), `sigma` per minute, `ar1`), x `fault.factor`
  on the faulty OST during the fault;
- where the capture's stats time reads and writes (`[usecs]`, 2.12+) the sums grow by
  RPCs x latency; the `I/O time (1/1000s)` histogram gets one I/O per RPC, its time drawn
  log-normal around the latency (ms, rounded up to Lustre's power-of-two buckets); an
  osd-zfs OST times reads only, as real ZFS OSDs do;
- job_stats entries (when the capture has the file) grow by each job's share, with the
  job's own `[usecs]` where the file's format has them.

Faults are written into the real formats this way; `iolens import lustre` then reads them
with the real agent sources. Nothing here knows about the detector.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from iolens.simulate.captures import (
    Delta,
    advance_histograms,
    advance_job_stats,
    advance_stats,
)

IO_TIME = "I/O time (1/1000s)"
PAGES = "pages per bulk r/w"


@dataclass(frozen=True)
class Fault:
    ost: str
    start: int  # minute of the replay the fault begins
    minutes: int
    factor: float


@dataclass
class Ost:
    name: str
    stats: str  # relative paths inside a sample folder
    brw: str | None
    jobs: str | None
    zfs: bool
    speed: float = 1.0
    noise: float = 0.0
    texts: dict[str, str] = field(default_factory=dict)


def oss_files(capture: Path) -> list[str]:
    """The files of `capture` an OSS agent reads: obdfilter, osd-*, ost/OSS, hostname."""
    keep = re.compile(r"(^|/)(obdfilter|osd-[a-z]+|ost/OSS)/|proc/sys/kernel/hostname$")
    out = []
    for p in sorted(capture.rglob("*")):
        rel = p.relative_to(capture).as_posix()
        if p.is_file() and keep.search(rel) and not rel.split("/")[-1].startswith("."):
            out.append(rel)
    return out


def _osts(capture: Path, files: list[str]) -> list[Ost]:
    osts = []
    for rel in files:
        m = re.search(r"obdfilter/([^/]+)/stats$", rel)
        if not m:
            continue
        name = m[1]
        brw = next((f for f in files if re.search(rf"osd-[a-z]+/{name}/brw_stats$", f)), None)
        jobs = next((f for f in files if f.endswith(f"obdfilter/{name}/job_stats")), None)
        osts.append(Ost(name, rel, brw, jobs, zfs=bool(brw and "osd-zfs" in brw)))
    return osts


def _usecs(stats_text: str) -> bool:
    """Does this version time bulk RPCs (`read`/`write` [usecs] in obdfilter stats)?

    2.14+ prints `[usecs]` on every operation, so any such line means yes; 2.10 has
    `[reqs]` only."""
    return "[usecs]" in stats_text


def write_replay(
    capture: Path,
    out: Path,
    *,
    start: datetime,
    minutes: int,
    seed: int,
    fault: Fault | None = None,
    jobs: tuple[str, ...] = ("4001", "4002", "4003"),
    job_stats_from: Path | None = None,
    sigma: float = 0.2,
    ar1: float = 0.5,
    rpc_bytes: int = 1 << 20,
    read_rpcs: float = 1500.0,
    write_rpcs: float = 1500.0,
    read_us: float = 3000.0,
    write_us: float = 2000.0,
) -> list[str]:
    """Write `minutes + 1` sample folders (one per minute from `start`); returns the OSTs.

    An OST whose capture has no job_stats entries gets none, unless `job_stats_from` names
    a real job_stats file to start from (its entries are kept, new jobs copy its layout)."""
    rng = np.random.default_rng(seed)
    files = oss_files(capture)
    osts = _osts(capture, files)
    texts = {rel: (capture / rel).read_text().rstrip("\x00") for rel in files}
    for o in osts:
        if job_stats_from is not None and (o.jobs is None or "- job_id:" not in texts[o.jobs]):
            o.jobs = o.stats.rsplit("/", 1)[0] + "/job_stats"
            texts[o.jobs] = job_stats_from.read_text()
        elif o.jobs is not None and "- job_id:" not in texts[o.jobs]:
            o.jobs = None  # jobstats on, no entry yet: nothing to copy the layout from
    for o in osts:
        o.speed = float(np.exp(rng.normal(0.0, 0.1)))
    timed = {o.name: _usecs(texts[o.stats]) for o in osts}
    load_phase = rng.uniform(0, 2 * math.pi)
    t0 = start.replace(tzinfo=UTC).timestamp()
    share = rng.dirichlet(np.ones(len(jobs)))
    for i in range(minutes + 1):
        now = t0 + 60 * i
        if i > 0:
            load = math.exp(0.15 * math.sin(load_phase + 2 * math.pi * i / 90))
            for o in osts:
                o.noise = ar1 * o.noise + rng.normal(0.0, sigma * math.sqrt(1 - ar1 * ar1))
                slow = (
                    fault
                    and fault.ost == o.name
                    and fault.start <= i - 1 < fault.start + fault.minutes
                )
                factor = (
                    o.speed * load * math.exp(o.noise) * (fault.factor if slow and fault else 1.0)
                )
                _advance(
                    o,
                    texts,
                    rng,
                    now,
                    factor,
                    timed[o.name],
                    jobs,
                    share,
                    rpc_bytes,
                    read_rpcs,
                    write_rpcs,
                    read_us,
                    write_us,
                )
        folder = out / datetime.fromtimestamp(now, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for rel, text in texts.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    return [o.name for o in osts]


def _advance(
    o: Ost,
    texts: dict[str, str],
    rng: np.random.Generator,
    now: float,
    factor: float,
    timed: bool,
    jobs: tuple[str, ...],
    share: np.ndarray,
    rpc_bytes: int,
    read_rpcs: float,
    write_rpcs: float,
    read_us: float,
    write_us: float,
) -> None:
    """One minute of traffic on one OST, written into its files."""
    n = {"read": int(rng.poisson(read_rpcs)), "write": int(rng.poisson(write_rpcs))}
    mean = {"read": read_us * factor, "write": write_us * factor}
    deltas: dict[str, Delta] = {}
    for op in ("read", "write"):
        if n[op] == 0:
            continue
        deltas[f"{op}_bytes"] = Delta(n[op], n[op] * rpc_bytes, rpc_bytes, rpc_bytes, unit="bytes")
        if timed:
            total = int(n[op] * mean[op])
            deltas[op] = Delta(n[op], total, int(mean[op] / 2), int(mean[op] * 3), unit="usecs")
    texts[o.stats] = advance_stats(texts[o.stats], deltas, now)
    if o.brw:
        pages = max(1, rpc_bytes // 4096)
        hist: dict[str, dict[int, tuple[int, int]]] = {PAGES: {pages: (n["read"], n["write"])}}
        io: dict[int, list[int]] = {}
        for col, op in enumerate(("read", "write")):
            if op == "write" and o.zfs:
                continue  # osd-zfs hands writes to the DMU untimed
            ms = rng.lognormal(math.log(mean[op] / 1000), 0.5, n[op])
            for b, c in zip(*np.unique(_bucket(ms), return_counts=True), strict=True):
                io.setdefault(int(b), [0, 0])[col] += int(c)
        hist[IO_TIME] = {b: (r, w) for b, (r, w) in io.items()}
        texts[o.brw] = advance_histograms(texts[o.brw], hist, now)
    if o.jobs and jobs:
        per_job: dict[str, dict[str, Delta]] = {}
        usecs_jobs = "unit: usecs" in texts[o.jobs]
        for job, part in zip(jobs, share, strict=True):
            ops: dict[str, Delta] = {}
            for op in ("read", "write"):
                k = round(float(n[op] * part))
                if k == 0:
                    continue
                ops[f"{op}_bytes"] = Delta(k, k * rpc_bytes, rpc_bytes, rpc_bytes, unit="bytes")
                if usecs_jobs:
                    ops[op] = Delta(k, int(k * mean[op]), unit="usecs")
            per_job[job] = ops
        texts[o.jobs] = advance_job_stats(texts[o.jobs], per_job, now)


def _bucket(ms: np.ndarray) -> np.ndarray:
    """Lustre's log2 bucket of each time: the smallest power of two >= ceil(ms), 1 for 0-1."""
    whole = np.maximum(np.ceil(ms), 1)
    return (2 ** np.ceil(np.log2(whole))).astype(np.int64)
