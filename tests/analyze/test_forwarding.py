"""slow_forwarder and cache_thrashing on what real collectors produce.

Every server-side input enters the store the way a site's would: sample folders of real
formats (the forwarder-daemon files of `docs/forwarder-format.md`, a real LNet router
`stats`, real Lustre 2.14 `job_stats` and 2.10 `llite`/`osc` stats advanced with
`iolens.simulate.captures`) replayed through the agent's sources (`iolens import lustre`'s
code path). Tracer records and scheduler jobs are rows of their own tables, as the tracer
decoder and `sacct` import write them. Each test asserts the episode's kind, component and
span, or the gap that says what could not be assessed, and a healthy control finds nothing.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from iolens.analyze.components import analyze_components, component_gaps
from iolens.analyze.components.cache_thrashing import CacheThrashing
from iolens.analyze.components.slow_forwarder import SlowForwarder
from iolens.collect.base import Source
from iolens.collect.replay import Replay
from iolens.collect.sources.iofwd import IofwdSource
from iolens.collect.sources.lnet_router import LnetRouterSource
from iolens.collect.sources.lustre_client import LustreClientSource
from iolens.collect.sources.lustre_oss import LustreOssSource
from iolens.ingest.load import load
from iolens.model.schema import CLIENT_IO, FORWARDING, JOBS
from iolens.parse.iofwd import ForwarderStats, Tally, render_tree
from iolens.simulate.captures import Delta, advance_job_stats, advance_stats
from iolens.store import DuckDBStore

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect"
LNET_CASE = CASES / "lnet_router" / "lustre-2.10-proc"
JOBSTATS_CASE = CASES / "lustre_oss" / "ddn-2.14-jobstats"
CLIENT_CASE = CASES / "lustre_client" / "hpe-2.10.1"
JOB_STATS = "proc/fs/lustre/obdfilter/es01a-OST0001/job_stats"
LLITE = "proc/fs/lustre/llite/lustrefs-ffff88105db50000/stats"
OSCS = [
    "proc/fs/lustre/osc/lustrefs-OST0000-osc-ffff88105db50000/stats",
    "proc/fs/lustre/osc/lustrefs-OST0001-osc-ffff88105db50000/stats",
]
T0 = 1_736_150_400  # 2025-01-06T08:00:00Z, a minute boundary
MIB = 2**20


def at(minute: float) -> datetime:
    return datetime(2025, 1, 6, 8, 0) + timedelta(minutes=minute)


# -- building stores --------------------------------------------------------------------------


def replay(
    store: DuckDBStore,
    captures: Path,
    host: str,
    sources: Mapping[str, type[Source]],
    role: str | None = None,
) -> None:
    """Load sample folders through the agent's sources, as `iolens import lustre` does."""
    rp = Replay(captures, host=host, role=role, sources=sources)
    for _sample, batch in rp.batches():
        load(store, batch)
    assert not rp.failures()


def folder(base: Path, t: float) -> Path:
    path = base / str(int(t))
    path.mkdir(parents=True, exist_ok=True)
    return path


def put(root: Path, files: Mapping[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)


@dataclass
class Daemon:
    """A forwarding daemon's cumulative counters, advanced minute by minute."""

    clients: list[str]
    per_client: bool = True
    reads_per_min: int = 300  # 1 MiB reads per client and minute
    time: float = T0
    start: float = T0 - 3600

    def __post_init__(self) -> None:
        self.c = {c: {"rb": Tally(), "read": Tally(), "getattr": Tally()} for c in self.clients}
        self.back, self.back_t = Tally(), Tally()
        self.wait, self.qdepth, self.active = Tally(), Tally(), Tally()

    def minute(self, service_us: float, backend_factor: float, rng: np.random.Generator) -> None:
        """One minute of reads; every request's service time is `service_us` x mild noise."""
        n = self.reads_per_min
        for c in self.clients:
            svc = int(n * service_us * rng.lognormal(0, 0.1))
            st = self.c[c]
            st["rb"] += Tally(n, n * MIB, MIB, MIB)
            st["read"] += Tally(n, svc, int(svc / n * 0.5), int(svc / n * 2))
            st["getattr"] += Tally(10, 10 * 40, 20, 80)
        reqs = n * len(self.clients)
        back_bytes = int(reqs * MIB * backend_factor)
        self.back += Tally(back_bytes // (4 * MIB), back_bytes, 4 * MIB, 4 * MIB)
        self.back_t += Tally(back_bytes // (4 * MIB), back_bytes // (4 * MIB) * 3000, 800, 9000)
        self.wait += Tally(reqs, reqs * 200, 1, 5000)
        self.qdepth += Tally(reqs, reqs, 0, 8)
        self.active += Tally(reqs, reqs * 4, 1, 16)
        self.time += 60

    def files(self) -> dict[str, str]:
        def stats(parts: list[dict[str, Tally]], **extra: Tally) -> ForwarderStats:
            rb = sum((p["rb"] for p in parts), Tally())
            ops = {op: sum((p[op] for p in parts), Tally()) for op in ("read", "getattr")}
            ops["write"] = Tally()
            return ForwarderStats(self.time, self.start, rb, Tally(), ops, **extra)

        totals = stats(
            list(self.c.values()),
            backend_read_bytes=self.back,
            backend_write_bytes=Tally(),
            backend_read=self.back_t,
            req_waittime=self.wait,
            req_qdepth=self.qdepth,
            req_active=self.active,
        )
        clients = {c: stats([p]) for c, p in self.c.items()} if self.per_client else {}
        return render_tree("lwfs", totals, clients, threads_max=16)


def daemon_captures(
    base: Path,
    minutes: int,
    slow: Callable[[int], float] = lambda m: 1.0,
    amplified: Callable[[int], float] = lambda m: 1.0,
    clients: tuple[str, ...] = ("cn01", "cn02", "cn03", "cn04"),
    per_client: bool = True,
    seed: int = 7,
) -> Path:
    """One folder a minute of a forwarder's daemon files; `slow(m)` scales service times,
    `amplified(m)` the back-end reads, in minute m."""
    rng = np.random.default_rng(seed)
    d = Daemon(list(clients), per_client)
    put(folder(base, d.time), d.files())
    for m in range(minutes):
        d.minute(2000.0 * slow(m), amplified(m), rng)
        put(folder(base, d.time), d.files())
    return base


def lnet_captures(base: Path, minutes: int) -> Path:
    """A real 2.10 router's `stats` line, its routed bytes growing 2 GiB a minute."""
    fields = (LNET_CASE / "proc/sys/lnet/stats").read_text().split()
    for m in range(minutes + 1):
        fields[5] = str(int(fields[5]) + 2048 * m)  # route_count
        fields[9] = str(2 * 2**30 * m)  # route_length
        put(folder(base, T0 + 60 * m), {"proc/sys/lnet/stats": " ".join(fields) + "\n"})
    return base


def jobstats_captures(base: Path, minutes: int, reads: Callable[[int], dict[str, int]]) -> Path:
    """A real Lustre 2.14 OST `job_stats`, advanced every 30 s by `reads(minute)`: the
    bytes each job read from the OST in that minute, half in each sample."""
    text = (JOBSTATS_CASE / JOB_STATS).read_text()
    put(folder(base, T0), {JOB_STATS: text})
    for m in range(minutes):
        for half in (1, 2):
            deltas = {
                job: {"read_bytes": Delta(b // MIB // 2, b // 2, MIB, MIB, unit="bytes")}
                for job, b in reads(m).items()
                if b
            }
            now = T0 + 60 * m + 30 * half
            text = advance_job_stats(text, deltas, now)
            put(folder(base, now), {JOB_STATS: text})
    return base


def traced_reads(job: str, node: str, minutes: range, per_min: int, fid: int) -> list[dict]:
    """A process reading one file sequentially in 1 MiB calls: one merged tracer record
    per minute (the tracer's compressed form: count calls, contiguous offsets)."""
    rows = []
    for i, m in enumerate(minutes):
        n = per_min // MIB
        rows.append(
            {
                "job_id": job,
                "node": node,
                "rank": 0,
                "pid": 100 + fid,
                "layer": "posix",
                "op": "read",
                "file_id": fid,
                "offset": i * n * MIB,
                "size": MIB,
                "stride": MIB,
                "count": n,
                "t_start": at(m) + timedelta(seconds=1),
                "t_end": at(m) + timedelta(seconds=59),
                "dur_ns": 50_000_000 * n,
            }
        )
    return rows


def add_rows(
    store: DuckDBStore,
    jobs: list[tuple[str, list[str]]] = (),  # type: ignore[assignment]
    forwarding: list[tuple[str, str]] = (),  # type: ignore[assignment]
    client_io: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> None:
    if jobs:
        store.append(
            "jobs",
            pa.Table.from_pylist(
                [
                    {
                        "job_id": j,
                        "user": "u",
                        "app": f"app{j}",
                        "nodes": nodes,
                        "nprocs": 4,
                        "start": at(-30),
                        "end": at(600),
                        "state": "COMPLETED",
                        "source": "slurm",
                    }
                    for j, nodes in jobs
                ],
                schema=JOBS,
            ),
        )
    if forwarding:
        rows = [{"compute_node": n, "forwarder": f} for n, f in forwarding]
        store.append("forwarding", pa.Table.from_pylist(rows, schema=FORWARDING))
    if client_io:
        store.append("client_io", pa.Table.from_pylist(list(client_io), schema=CLIENT_IO))


def run(store: DuckDBStore, *detectors: Any) -> tuple[list[dict], list[dict]]:
    analyze_components(store, detectors=list(detectors))
    rows = store.query("SELECT * FROM anomalies ORDER BY component_id, start").to_pylist()
    for r in rows:
        r["evidence"] = json.loads(r["evidence"])
    return rows, component_gaps(store)


def near(t: datetime, minute: float, slack: float = 2) -> bool:
    """Within `slack` minutes: the peer engine may place an edge a minute either way."""
    return abs((t - at(minute)).total_seconds()) <= slack * 60


IOFWD = {"iofwd": IofwdSource}
LNET = {"lnet_router": LnetRouterSource}
OSS = {"lustre_oss": LustreOssSource}

# -- slow_forwarder -----------------------------------------------------------------------------


@pytest.fixture
def forwarders(tmp_path: Path) -> Callable[[bool], DuckDBStore]:
    """Two daemon forwarders and one LNet router over 90 minutes; fwd01 serves every
    request 5x slower in minutes 30-60 when `fault` is set."""

    def make(fault: bool) -> DuckDBStore:
        store = DuckDBStore(tmp_path / f"fwd-{fault}.duckdb")
        slow = (lambda m: 5.0 if 30 <= m < 60 else 1.0) if fault else (lambda m: 1.0)
        replay(store, daemon_captures(tmp_path / f"fwd01-{fault}", 90, slow), "fwd01", IOFWD)
        clients = ("cn11", "cn12")
        caps = daemon_captures(tmp_path / f"fwd02-{fault}", 90, clients=clients, seed=8)
        replay(store, caps, "fwd02", IOFWD)
        replay(store, lnet_captures(tmp_path / f"rtr-{fault}", 90), "rtr01", LNET, "forwarder")
        add_rows(store, jobs=[("101", ["cn01", "cn02"]), ("102", ["cn03"]), ("103", clients)])
        return store

    return make


def test_slow_forwarder_from_daemon_service_times(forwarders) -> None:
    with forwarders(True) as store:
        found, gaps = run(store, SlowForwarder())
    assert [(e["kind"], e["component_id"]) for e in found] == [("slow_forwarder", "fwd01")]
    e = found[0]
    assert near(e["start"], 30) and near(e["end"], 60)
    ev = e["evidence"]
    assert ev["slowdown"] == pytest.approx(5, rel=0.2)
    # who was served: per-client counters -> jobs through the scheduler's node lists
    assert ev["jobs_basis"].startswith("the forwarder's per-client counters")
    jobs = {j["job_id"]: j for j in ev["jobs"]}
    assert set(jobs) == {"101", "102"} and jobs["101"]["clients"] == 2
    assert jobs["101"]["share"] == pytest.approx(2 / 3, abs=0.01)
    assert [c["client"] for c in ev["other_clients"]] == ["cn04"]  # no job ran there
    assert {c["client"] for c in ev["clients"]} == {"cn01", "cn02", "cn03", "cn04"}
    assert all(c["service_us"] > 5000 for c in ev["clients"])  # every client saw it
    # the back end answered as fast as before: the forwarder itself was slow
    assert ev["backend_service_us"] == pytest.approx(ev["backend_service_us_before"], rel=0.05)
    # the LNet router is not judged from bytes and queue: it is reported as not assessed
    assert [(g["detector"], g["components"]) for g in gaps] == [("slow_forwarder", ["rtr01"])]
    assert "LNet" in gaps[0]["missing"]


def test_healthy_forwarders_give_no_episode_but_the_router_gap(forwarders) -> None:
    with forwarders(False) as store:
        found, gaps = run(store, SlowForwarder())
    assert found == []
    assert [g["components"] for g in gaps] == [["rtr01"]]


def test_episode_jobs_from_tracer_records_without_client_counters(tmp_path: Path) -> None:
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        caps = daemon_captures(
            tmp_path / "fwd", 90, lambda m: 6.0 if 30 <= m < 60 else 1.0, per_client=False
        )
        replay(store, caps, "fwd01", IOFWD)
        add_rows(
            store,
            jobs=[("201", ["cn01"]), ("202", ["cn02"])],
            forwarding=[("cn01", "fwd01"), ("cn02", "fwd01")],
            client_io=traced_reads("201", "cn01", range(0, 90), 300 * MIB, 1)
            + traced_reads("202", "cn02", range(20, 45), 100 * MIB, 2),
        )
        found, _gaps = run(store, SlowForwarder())
    assert [(e["kind"], e["component_id"]) for e in found] == [("slow_forwarder", "fwd01")]
    ev = found[0]["evidence"]
    assert near(found[0]["start"], 30) and near(found[0]["end"], 60)
    assert ev["jobs_basis"].startswith("tracer records")
    assert [j["job_id"] for j in ev["jobs"]] == ["201", "202"]
    # 202 read 100 MiB a minute in minutes 30-44 of the episode, 201 300 MiB in all 30
    assert ev["jobs"][1]["bytes"] == pytest.approx(15 * 100 * MIB, rel=0.1)


# -- cache_thrashing ----------------------------------------------------------------------------


@pytest.mark.parametrize("amplification", [3.5, 2.0, 1.0], ids=["beacon-3.5x", "2x", "healthy"])
def test_thrashing_from_tracer_and_ost_jobstats(tmp_path: Path, amplification: float) -> None:
    """fwd01 serves cn01/cn02, fwd02 cn03/cn04. Job 202 (cn03) reads through fwd02 and the
    OSTs serve it `amplification` times its bytes in minutes 10-24; job 203 reads on cn02
    and cn04, behind both forwarders, without amplification; 201 (cn01) too."""
    per_min = 512 * MIB

    def reads(m: int) -> dict[str, int]:
        if not 5 <= m < 30:
            return {}
        amp = amplification if 10 <= m < 25 else 1.0
        return {"201": per_min, "202": int(per_min * amp), "203": 2 * per_min}

    with DuckDBStore(tmp_path / "s.duckdb") as store:
        replay(store, jobstats_captures(tmp_path / "oss", 40, reads), "oss01", OSS)
        span = range(5, 30)
        add_rows(
            store,
            jobs=[("201", ["cn01"]), ("202", ["cn03"]), ("203", ["cn02", "cn04"])],
            forwarding=[("cn01", "fwd01"), ("cn02", "fwd01"), ("cn03", "fwd02"), ("cn04", "fwd02")],
            client_io=traced_reads("201", "cn01", span, per_min, 1)
            + traced_reads("202", "cn03", span, per_min, 2)
            + traced_reads("203", "cn02", span, per_min, 3)
            + traced_reads("203", "cn04", span, per_min, 4),
        )
        found, gaps = run(store, CacheThrashing())
    assert gaps == []
    if amplification == 1.0:
        assert found == []
        return
    assert [(e["kind"], e["component_id"]) for e in found] == [("cache_thrashing", "fwd02")]
    e = found[0]
    assert (e["start"], e["end"]) == (at(10), at(25))
    ev = e["evidence"]
    assert ev["basis"] == "tracer and jobstats"
    assert ev["ratio"] == pytest.approx((amplification + 1) / 2, rel=0.02)
    assert [j["job_id"] for j in ev["jobs"]] == ["202"]
    assert ev["jobs"][0]["ratio"] == pytest.approx(amplification, rel=0.02)
    assert ev["jobs"][0]["sequential_read_streams"] == 1 and ev["jobs"][0]["app"] == "app202"


def test_healthy_bursty_reads_with_misaligned_clocks_are_not_flagged(tmp_path: Path) -> None:
    """The noise the thresholds are derived from: bursts of 20 s to 4 min at random times,
    OST samples every 20 s at a 7 s phase with three missing, client clocks 1.5 s
    ahead, bursts of one job on nodes behind two forwarders at different times.
    Every byte reaches the OSTs exactly once, so nothing may be reported."""
    rng = np.random.default_rng(11)
    records, t = [], 60.0
    while t < 55 * 60:
        length = float(rng.uniform(20, 240))
        n = int(rng.integers(256, 2048))  # 1 MiB calls over the burst
        node = str(rng.choice(["cn01", "cn03"]))
        records.append((node, t, t + length, n))
        t += length + float(rng.uniform(5, 120))
    times = [T0 + 7 + 20 * k for k in range(180) if k not in (50, 51, 150)]
    text = (JOBSTATS_CASE / JOB_STATS).read_text()
    base = tmp_path / "oss"
    prev = T0 - 3
    put(folder(base, prev), {JOB_STATS: text})
    for now in times:
        got = sum(
            n * MIB * max(0.0, min(b, now - T0) - max(a, prev - T0)) / (b - a)
            for _node, a, b, n in records
        )
        if got:
            calls = max(1, round(got / MIB))
            text = advance_job_stats(
                text, {"701": {"read_bytes": Delta(calls, int(got), MIB, MIB, unit="bytes")}}, now
            )
        put(folder(base, now), {JOB_STATS: text})
        prev = now
    rows = []
    for i, (node, a, b, n) in enumerate(records):
        skew = timedelta(seconds=1.5)
        rows.append(
            {
                "job_id": "701",
                "node": node,
                "rank": 0,
                "pid": i,
                "layer": "posix",
                "op": "read",
                "file_id": i,
                "offset": 0,
                "size": MIB,
                "stride": MIB,
                "count": n,
                "t_start": at(a / 60) + skew,
                "t_end": at(b / 60) + skew,
                "dur_ns": n * 10**6,
            }
        )
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        replay(store, base, "oss01", OSS)
        add_rows(
            store,
            jobs=[("701", ["cn01", "cn03"])],
            forwarding=[("cn01", "fwd01"), ("cn03", "fwd02")],
            client_io=rows,
        )
        found, gaps = run(store, CacheThrashing())
    assert found == [] and gaps == []


def test_small_reads_are_counted_in_pages_not_flagged(tmp_path: Path) -> None:
    """100-byte random reads cost the OSTs a 4 KiB page each: 41x the bytes, no thrashing."""
    calls = 300_000

    def reads(m: int) -> dict[str, int]:
        return {"301": calls * 4096} if 2 <= m < 20 else {}

    rows = []
    for m in range(2, 20):
        rows.append(
            {
                "job_id": "301",
                "node": "cn01",
                "rank": 0,
                "pid": 1,
                "layer": "posix",
                "op": "read",
                "file_id": 9,
                "offset": -1,
                "size": 100,
                "stride": 7919,
                "count": calls,
                "t_start": at(m) + timedelta(seconds=1),
                "t_end": at(m) + timedelta(seconds=59),
                "dur_ns": calls * 10_000,
            }
        )
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        replay(store, jobstats_captures(tmp_path / "oss", 25, reads), "oss01", OSS)
        add_rows(store, jobs=[("301", ["cn01"])], forwarding=[("cn01", "fwd01")], client_io=rows)
        found, gaps = run(store, CacheThrashing())
    assert found == [] and gaps == []


def test_thrashing_from_the_daemons_back_end_counters(tmp_path: Path) -> None:
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        caps = daemon_captures(
            tmp_path / "fwd", 60, amplified=lambda m: 3.0 if 20 <= m < 40 else 1.0
        )
        replay(store, caps, "fwd01", IOFWD)
        add_rows(store, jobs=[("401", ["cn01", "cn02", "cn03"])])
        found, gaps = run(store, CacheThrashing())
    assert [(e["kind"], e["component_id"]) for e in found] == [("cache_thrashing", "fwd01")]
    e = found[0]
    assert (e["start"], e["end"]) == (at(20), at(40))
    ev = e["evidence"]
    assert ev["basis"] == "daemon" and ev["ratio"] == pytest.approx(3.0, rel=0.01)
    assert ev["jobs_basis"].startswith("the forwarder's per-client counters")
    assert [j["job_id"] for j in ev["jobs"]] == ["401"]
    assert gaps == []


def test_thrashing_from_the_forwarders_lustre_client(tmp_path: Path) -> None:
    """A Beacon-style forwarder is a Lustre client: llite counts what the daemon read,
    its OSCs what they fetched from the OSTs, read-ahead included (real 2.10 files)."""
    base = tmp_path / "fwd"
    llite = (CLIENT_CASE / LLITE).read_text()
    oscs = [(CLIENT_CASE / p).read_text() for p in OSCS]
    root = folder(base, T0)
    shutil.copytree(CLIENT_CASE / "proc", root / "proc")
    for m in range(40):
        amp = 3.0 if 10 <= m < 25 else 1.0
        for half in (1, 2):
            now = T0 + 60 * m + 30 * half
            ops = 256  # 4 MiB reads: 1 GiB a sample
            llite = advance_stats(
                llite,
                {"read_bytes": Delta(ops, ops * 4 * MIB, 4 * MIB, 4 * MIB, unit="bytes")},
                now,
            )
            rpcs = int(ops * amp / 2)
            d = Delta(rpcs, rpcs * 4 * MIB, 4 * MIB, 4 * MIB, unit="bytes")
            oscs = [advance_stats(text, {"read_bytes": d}, now) for text in oscs]
            root = folder(base, now)
            shutil.copytree(CLIENT_CASE / "proc", root / "proc")
            put(root, {LLITE: llite, **dict(zip(OSCS, oscs, strict=True))})
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        replay(store, base, "fwdL", {"lustre_client": LustreClientSource}, "forwarder")
        add_rows(
            store,
            jobs=[("501", ["cn01"])],
            forwarding=[("cn01", "fwdL")],
            client_io=traced_reads("501", "cn01", range(0, 40), 2048 * MIB, 1),
        )
        found, gaps = run(store, CacheThrashing(), SlowForwarder())
    assert [(e["kind"], e["component_id"]) for e in found] == [("cache_thrashing", "fwdL")]
    # llite and osc counters carry bytes and calls but no service time: said, not judged
    assert [(g["detector"], g["components"]) for g in gaps] == [("slow_forwarder", ["fwdL"])]
    assert "report only" in gaps[0]["missing"] and "read_bytes" in gaps[0]["missing"]
    e = found[0]
    assert (e["start"], e["end"]) == (at(10), at(25))
    assert e["evidence"]["basis"] == "lustre client"
    assert e["evidence"]["ratio"] == pytest.approx(3.0, rel=0.01)
    assert e["evidence"]["jobs_basis"].startswith("tracer records")
    assert [j["job_id"] for j in e["evidence"]["jobs"]] == ["501"]


def test_thrashing_gaps_name_the_missing_piece(tmp_path: Path) -> None:
    """A router with neither back-end counters nor a forwarding map; a mapped forwarder
    without OST jobstats in the store."""
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        replay(store, lnet_captures(tmp_path / "rtr", 20), "rtr01", LNET, "forwarder")
        add_rows(
            store,
            jobs=[("601", ["cn01"])],
            forwarding=[("cn01", "fwd09")],
            client_io=traced_reads("601", "cn01", range(0, 20), 512 * MIB, 1),
        )
        found, gaps = run(store, CacheThrashing())
    assert found == []
    by = {tuple(g["components"]): g for g in gaps}
    assert set(by) == {("rtr01",), ("fwd09",)}
    assert "forwarding" in by[("rtr01",)]["missing"]
    assert "job_stats" in by[("fwd09",)]["missing"]


def test_cli_prints_the_gaps(tmp_path: Path) -> None:
    from tests.conftest import run_cli

    path = tmp_path / "s.duckdb"
    with DuckDBStore(path) as store:
        replay(store, lnet_captures(tmp_path / "rtr", 10), "rtr01", LNET, "forwarder")
    res = run_cli("anomalies", "--db", str(path))
    assert res.returncode == 0, res.stderr
    assert "Not assessed" in res.stderr
    assert "slow_forwarder: rtr01: per-request service time: LNet" in res.stderr
