"""Drive one simulation: topology, faults, workload, engine, then what collectors see.

The client side (tracer records, scheduler rows, file layouts) is emitted as tables
(`emit.py`); the servers' side is rendered as the files real servers expose and collected
by the real agent (`collection.py`). `Simulation.load` puts both into a store the way the
ingest server does.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iolens.ingest.load import load_many
from iolens.model.batch import Batch
from iolens.simulate.collection import PATHS, Collection, memory_dir
from iolens.simulate.emit import Emitter
from iolens.simulate.engine import THRASH_AMPLIFICATION, Engine, EngineResult, Fault
from iolens.simulate.realism import Realism
from iolens.simulate.servers.forwarder import EXPORTS
from iolens.simulate.topology import Topology
from iolens.simulate.workload import JobSpec, generate_jobs
from iolens.store.base import Store

DEFAULT_START = datetime(2025, 3, 3, 8, 0, tzinfo=UTC)
BATCH_RECORDS = 500_000
INTERFERENCE_MIN_S = 10.0  # a victim must lose at least this much I/O time to one culprit
INTERFERENCE_MIN_SHARE = 0.25  # ... and at least this share of its own I/O time
#: Beacon (section 4.1): an N-1 job on more than 32 nodes behind one forwarder is an anomaly.
BEACON_N1_NODES = 32
FAULT_KINDS = ("slow_ost", "slow_forwarder", "metadata_storm")
GROUP_MAX_BATCHES = 256  # as the ingest server's group commit
STORM_IDS = ("find.1003", None)  # how job_stats names the storm: procname.uid, or not at all


@dataclass(frozen=True)
class SimConfig:
    """What to simulate. Fault sizes and durations are parameters so accuracy can be
    measured as curves; left at None, durations are drawn from the seed (30-60 min slow
    components, 15-30 min storm)."""

    nodes: int = 1024
    hours: float = 2.0
    seed: int = 0
    start: datetime = DEFAULT_START
    faults: bool = True
    #: Inject only these fault kinds (of `FAULT_KINDS`); None: all of them.
    fault_kinds: tuple[str, ...] | None = None
    #: How many times slower the fail-slow OST serves each request (capacity / factor).
    ost_slow_factor: float = 10.0
    ost_slow_minutes: float | None = None
    forwarder_slow_factor: float = 4.0
    forwarder_slow_minutes: float | None = None
    #: Metadata operations per second the login-node storm offers; None: 1.5x the MDS.
    storm_ops: float | None = None
    storm_minutes: float | None = None
    #: Multiplies the fitted service-time noise (`Realism.service_sigma`).
    noise_scale: float = 1.0
    #: Seconds between two rounds of every server's agent.
    agent_interval_s: float = 10.0
    realism: Realism = field(default_factory=Realism)
    #: "direct" (fast) or "files" (rendered files read by the real sources); same store.
    collect: str = "direct"
    #: What forwarding nodes export (`servers/forwarder.py`: "lnet").
    forwarder_export: str = "iofwd"

    def __post_init__(self) -> None:
        if self.collect not in PATHS:
            raise ValueError(f"collect must be one of {', '.join(PATHS)}, got {self.collect!r}")
        unknown = set(self.fault_kinds or ()) - set(FAULT_KINDS)
        if unknown:
            known = ", ".join(FAULT_KINDS)
            raise ValueError(f"unknown fault kind(s) {', '.join(sorted(unknown))}; known: {known}")
        for name in ("ost_slow_factor", "forwarder_slow_factor"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} is a slowdown (>= 1), got {getattr(self, name)}")
        if self.noise_scale < 0:
            raise ValueError(f"noise_scale must be >= 0, got {self.noise_scale}")
        if self.forwarder_export not in EXPORTS:
            known = ", ".join(EXPORTS)
            raise ValueError(
                f"forwarder_export must be one of {known}, got {self.forwarder_export!r}"
            )
        if self.agent_interval_s < 1:
            raise ValueError(f"agent_interval_s must be at least 1 s, got {self.agent_interval_s}")

    def effective_realism(self) -> Realism:
        return replace(self.realism, service_sigma=self.realism.service_sigma * self.noise_scale)


def plan_faults(
    rng: np.random.Generator, topo: Topology, horizon: int, c: SimConfig
) -> list[Fault]:
    """One of each injected fault kind (or of `c.fault_kinds`), at seeded times inside the
    monitored window. The draws are made for every kind, so choosing kinds moves nothing."""

    def window(lo_min: int, hi_min: int, minutes: float | None) -> tuple[int, int]:
        drawn = int(rng.integers(lo_min, hi_min)) * 60
        length = min(int(minutes * 60) if minutes is not None else drawn, horizon // 2)
        start = int(rng.integers(horizon // 6, max(horizon // 6 + 1, horizon - length)))
        return start, start + length

    wanted = set(c.fault_kinds if c.fault_kinds is not None else FAULT_KINDS)
    faults = []
    s, e = window(30, 60, c.ost_slow_minutes)
    ost = topo.osts[int(rng.integers(len(topo.osts)))]
    f = c.ost_slow_factor
    faults.append(Fault("slow_ost", ost, s, e, 1 / f, magnitude=f))
    s, e = window(30, 60, c.forwarder_slow_minutes)
    fwd = topo.forwarders[int(rng.integers(len(topo.forwarders)))]
    f = c.forwarder_slow_factor
    faults.append(Fault("slow_forwarder", fwd, s, e, 1 / f, magnitude=f))
    s, e = window(15, 30, c.storm_minutes)
    ops = c.storm_ops if c.storm_ops is not None else 1.5 * topo.caps.mds_ops
    storm_id = STORM_IDS[int(rng.integers(len(STORM_IDS)))]
    extra = {"source": topo.login, "client_nid": topo.nid(topo.login), "job_stats_id": storm_id}
    faults.append(Fault("metadata_storm", topo.mdt, s, e, ops / topo.caps.mds_ops, extra, ops))
    return [f for f in faults if f.kind in wanted]


@dataclass
class Simulation:
    config: SimConfig
    topology: Topology
    jobs: list[JobSpec]
    result: EngineResult
    truth: dict[str, Any] = field(default_factory=dict)
    _collection: Collection | None = field(default=None, repr=False)

    @property
    def collection(self) -> Collection:
        """The server hosts and their agents (built on first use: the truth needs none)."""
        if self._collection is None:
            c = self.config
            storm = next((f for f in self.result.faults if f.kind == "metadata_storm"), None)
            self._collection = Collection(
                self.topology,
                self.result,
                start=c.start.timestamp(),
                interval=c.agent_interval_s,
                realism=c.effective_realism(),
                seed=c.seed,
                storm_id=storm.extra.get("job_stats_id") if storm else None,
                forwarder_export=c.forwarder_export,
            )
        return self._collection

    @property
    def base_us(self) -> int:
        return int(self.config.start.timestamp() * 1_000_000)

    def site_batch(self) -> Batch:
        """The topology as a site gives it: the simulator writes the site topology file
        (`Topology.site_toml`) and loads it with `iolens site topology`'s own code."""
        from iolens.ingest.topology import SiteTopology, plan
        from iolens.tomlconfig import parse_toml

        text = self.topology.site_toml()
        topo = parse_toml(text, SiteTopology, "simulated site topology")
        return plan(topo, "simulated site topology").batch("topology:simulated")

    def client_batches(
        self, emitter: Emitter, workdir: Path | None = None
    ) -> Iterator[tuple[str, Batch]]:
        """Client records and file layouts, as the tracer gives them: on the real path
        (`collect="files"`) each process's records are written in the tracer's file format
        (`tracefile.writer`) and read back by the real decoder into the batch `iolens
        import trace` makes of it; on the fast path, the same tables directly."""
        if self.config.collect == "files":
            yield from self._traced(emitter, workdir)
            return
        pending: list[tuple[pa.Table, pa.Table]] = []
        for i, run in enumerate(self.result.jobs):
            pending.append(emitter.job_batch(i))
            # Coalesce jobs into large batches: one transaction per ~500k records.
            if (
                sum(p[1].num_rows for p in pending) >= BATCH_RECORDS
                or i == len(self.result.jobs) - 1
            ):
                files, client = (pa.concat_tables(t) for t in zip(*pending, strict=True))
                pending.clear()
                yield (
                    f"job {run.spec.job_id}",
                    Batch("simulator:tracer", files=files, client_io=client),
                )

    def _traced(self, emitter: Emitter, workdir: Path | None) -> Iterator[tuple[str, Batch]]:
        """One trace file per process, through the real format and decoder."""
        from iolens.tracefile import batch_of, decode
        from iolens.tracefile.writer import process_trace, write

        spool = Path(tempfile.mkdtemp(prefix="iolens-traces-", dir=workdir or memory_dir()))
        try:
            for i, run in enumerate(self.result.jobs):
                files, client = emitter.job_batch(i)
                order = pc.sort_indices(client, [("node", "ascending"), ("pid", "ascending")])
                client = client.take(order)
                node = client.column("node").to_numpy(zero_copy_only=False)
                pid = client.column("pid").to_numpy()
                cut = np.flatnonzero((node[1:] != node[:-1]) | (pid[1:] != pid[:-1])) + 1
                for a, b in zip(np.r_[0, cut], np.r_[cut, len(node)], strict=True):
                    trace = process_trace(
                        client.slice(int(a), int(b - a)),
                        files,
                        user=run.spec.user,
                        exe=f"/apps/{run.spec.app}/bin/{run.spec.app}",
                    )
                    path = write(trace, spool)
                    yield f"job {run.spec.job_id}", batch_of(decode(path))
                    path.unlink()
        finally:
            shutil.rmtree(spool, ignore_errors=True)

    def batches(self, workdir: Path | None = None) -> Iterator[tuple[str, Batch]]:
        """Batches in collection order: topology, scheduler, tracer, then every agent round
        of every server host (keyed `agent:<host>:<time>`, as a live agent's)."""
        emitter = Emitter(self.topology, self.result, self.base_us)
        yield "topology", self.site_batch()
        yield "scheduler", Batch("simulator:slurm", jobs=emitter.jobs_table())
        yield from self.client_batches(emitter, workdir)
        for batch in self.collection.batches(self.config.collect, workdir):
            yield batch.source, batch

    def load(
        self,
        store: Store,
        on_batch: Callable[[str], None] | None = None,
        workdir: Path | None = None,
    ) -> None:
        """Everything into `store`, agent batches by group commit as the ingest server does."""
        group: list[Batch] = []
        for name, batch in self.batches(workdir):
            if batch.key is None:
                load_many(store, [batch])
            else:
                group.append(batch)
                if len(group) >= GROUP_MAX_BATCHES:
                    load_many(store, group)
                    group = []
            if on_batch is not None:
                on_batch(name)
        if group:
            load_many(store, group)

    def batch_count(self) -> int:
        """How many batches `batches()` yields at most (for progress bars)."""
        c = self.collection
        return 2 + len(self.result.jobs) + c.rounds.count * len(c.hosts)


def simulate(config: SimConfig) -> Simulation:
    rng = np.random.default_rng(config.seed)
    realism = config.effective_realism()
    topo = Topology.build(config.nodes)
    horizon = int(config.hours * 3600)
    faults = plan_faults(rng, topo, horizon, config) if config.faults else []
    start_hour = config.start.hour + config.start.minute / 60
    jobs = generate_jobs(
        rng, config.nodes, config.hours, diurnal=realism.diurnal, start_hour=start_hour
    )
    result = Engine(topo, faults, np.random.default_rng(config.seed + 1)).run(jobs, horizon)
    sim = Simulation(config, topo, jobs, result)
    sim.truth = ground_truth(sim)
    return sim


def n1_truth(sim: Simulation, interference: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`n1_interference` episodes by Beacon's criterion (4.1), on the simulator's own
    losses: an N-1 job over `BEACON_N1_NODES` compute nodes behind a forwarder, with a
    victim that truly lost enough to it (the `interference` list) and has nodes behind the
    same forwarder. One per (culprit, forwarder), over the culprit's N-1 phases."""
    topo = sim.topology
    runs = {r.spec.job_id: r for r in sim.result.jobs}

    def behind(job: str) -> dict[int, int]:
        run = runs[job]
        fwd = topo.fwd_of_node[run.first_node : run.first_node + run.spec.nnodes]
        return {int(f): int(n) for f, n in zip(*np.unique(fwd, return_counts=True), strict=True)}

    victims: dict[str, list[dict[str, Any]]] = {}
    for pair in interference:
        victims.setdefault(pair["culprit"], []).append(pair)
    out = []
    start = sim.config.start
    for culprit, pairs in sorted(victims.items()):
        run = runs[culprit]
        n1 = [p for p in run.phases if p.n1]
        if not n1:
            continue
        for f, n in sorted(behind(culprit).items()):
            hurt = [p for p in pairs if f in behind(p["victim"])]
            if n <= BEACON_N1_NODES or not hurt:
                continue
            out.append(
                {
                    "kind": "n1_interference",
                    "component": topo.forwarders[f],
                    "start": (start + timedelta(seconds=min(p.start for p in n1)))
                    .isoformat()
                    .replace("+00:00", "Z"),
                    "end": (start + timedelta(seconds=max(p.end for p in n1)))
                    .isoformat()
                    .replace("+00:00", "Z"),
                    "culprit": culprit,
                    "culprit_nodes": n,
                    "magnitude": n,
                    "victims": {p["victim"]: p["lost_seconds"] for p in hurt},
                    "planted": culprit == sim.jobs[0].job_id,
                }
            )
    return out


def ground_truth(sim: Simulation) -> dict[str, Any]:
    start = sim.config.start

    def iso(second: int) -> str:
        return (start + timedelta(seconds=second)).isoformat().replace("+00:00", "Z")

    jobs: dict[str, dict[str, Any]] = {}
    for run in sim.result.jobs:
        s = run.spec
        read = sum(int(p.count.sum()) * p.size for p in s.phases if p.kind == "read")
        write = sum(int(p.count.sum()) * p.size for p in s.phases if p.kind in ("write", "meta"))
        jobs[s.job_id] = {
            "io_mode": s.io_mode,
            "read_bytes": read,
            "write_bytes": write,
            "user": s.user,
            "app": s.app,
            "nnodes": s.nnodes,
            "nprocs": s.nprocs,
            "state": s.state,
            "start": iso(run.start),
            "end": iso(run.end),
            "io_seconds": sim.result.io_seconds.get(s.job_id, 0.0),
        }
    interference = []
    for (victim, culprit), lost in sorted(sim.result.blame.items()):
        io_s = sim.result.io_seconds.get(victim, 0.0)
        if lost >= max(INTERFERENCE_MIN_S, INTERFERENCE_MIN_SHARE * io_s):
            interference.append(
                {"victim": victim, "culprit": culprit, "lost_seconds": round(lost, 1)}
            )
    faults = [
        {
            "kind": f.kind,
            "component": f.component,
            "start": iso(f.start),
            "end": iso(f.end),
            **({"factor": f.factor} if f.kind != "cache_thrashing" else {}),
            **({"magnitude": f.magnitude} if f.magnitude is not None else {}),
            **f.extra,
        }
        for f in sim.result.faults
    ]
    faults += n1_truth(sim, interference)
    slowed = [
        {"job_id": job, "component": comp, "lost_seconds": round(lost, 1)}
        for (job, comp), lost in sorted(sim.result.fault_loss.items())
    ]
    culprit, victim = sim.jobs[0], sim.jobs[1]  # the planted N-1 pair
    thrasher = sim.jobs[2] if len(sim.jobs) > 2 and sim.jobs[2].first_node is not None else None
    num, den = THRASH_AMPLIFICATION
    for f in faults:
        if f["kind"] == "cache_thrashing":
            f["magnitude"] = num / den  # backend reads per byte the clients read
    return {
        "config": {
            "nodes": sim.config.nodes,
            "hours": sim.config.hours,
            "seed": sim.config.seed,
            "start": iso(0),
            "agent_interval_s": sim.config.agent_interval_s,
            "noise_scale": sim.config.noise_scale,
        },
        "jobs": jobs,
        "faults": faults,
        "interference": interference,
        "fault_losses": slowed,  # per job: I/O seconds lost to each slow OST
        "planted": {
            "n1_culprit": {"job_id": culprit.job_id, "nodes": culprit.nnodes},
            "n1_victim": {"job_id": victim.job_id, "nodes": victim.nnodes},
            **(
                {
                    "thrasher": {
                        "job_id": thrasher.job_id,
                        "nodes": thrasher.nnodes,
                        "streams": thrasher.nprocs,
                    }
                }
                if thrasher is not None
                else {}
            ),
        },
    }
