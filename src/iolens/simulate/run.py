"""Drive one simulation: topology, faults, workload, engine, then emission as batches."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.model.batch import Batch
from iolens.simulate.emit import Emitter
from iolens.simulate.engine import Engine, EngineResult, Fault
from iolens.simulate.topology import Topology
from iolens.simulate.workload import JobSpec, generate_jobs

DEFAULT_START = datetime(2025, 3, 3, 8, 0, tzinfo=UTC)
BATCH_RECORDS = 500_000
INTERFERENCE_MIN_S = 10.0  # a victim must lose at least this much I/O time to one culprit
INTERFERENCE_MIN_SHARE = 0.25  # ... and at least this share of its own I/O time


@dataclass(frozen=True)
class SimConfig:
    nodes: int = 1024
    hours: float = 2.0
    seed: int = 0
    start: datetime = DEFAULT_START
    faults: bool = True


def plan_faults(rng: np.random.Generator, topo: Topology, horizon: int) -> list[Fault]:
    """One of each injected fault kind, at seeded times inside the monitored window."""

    def window(lo_min: int, hi_min: int) -> tuple[int, int]:
        length = min(int(rng.integers(lo_min, hi_min)) * 60, horizon // 2)
        start = int(rng.integers(horizon // 6, max(horizon // 6 + 1, horizon - length)))
        return start, start + length

    faults = []
    s, e = window(30, 60)
    faults.append(Fault("slow_ost", topo.osts[int(rng.integers(len(topo.osts)))], s, e, 0.1))
    s, e = window(30, 60)
    fwd = topo.forwarders[int(rng.integers(len(topo.forwarders)))]
    faults.append(Fault("slow_forwarder", fwd, s, e, 0.25))
    s, e = window(15, 30)
    faults.append(Fault("metadata_storm", topo.mds, s, e, 1.5, {"source": topo.login}))
    return faults


@dataclass
class Simulation:
    config: SimConfig
    topology: Topology
    jobs: list[JobSpec]
    result: EngineResult
    truth: dict[str, Any] = field(default_factory=dict)

    @property
    def base_us(self) -> int:
        return int(self.config.start.timestamp() * 1_000_000)

    def batches(self) -> Iterator[tuple[str, Batch]]:
        """Batches in collection order: topology, scheduler, per-job traces, agent totals."""
        topo = self.topology
        emitter = Emitter(topo, self.result, self.base_us)
        yield (
            "topology",
            Batch(
                "simulator:topology",
                components=topo.components_table(),
                forwarding=topo.forwarding_table(),
            ),
        )
        yield "scheduler", Batch("simulator:slurm", jobs=emitter.jobs_table())
        pending: list[tuple[pa.Table, pa.Table, pa.Table]] = []
        for i, run in enumerate(self.result.jobs):
            pending.append(emitter.job_batch(i))
            # Coalesce jobs into large batches: one transaction per ~500k records.
            if (
                sum(p[1].num_rows for p in pending) >= BATCH_RECORDS
                or i == len(self.result.jobs) - 1
            ):
                files, client, samples = (pa.concat_tables(t) for t in zip(*pending, strict=True))
                pending.clear()
                yield (
                    f"job {run.spec.job_id}",
                    Batch(
                        "simulator:tracer+jobstats",
                        files=files,
                        client_io=client,
                        server_samples=samples,
                    ),
                )
        yield "agents", Batch("simulator:agents", server_samples=emitter.totals_table())


def simulate(config: SimConfig) -> Simulation:
    rng = np.random.default_rng(config.seed)
    topo = Topology.build(config.nodes)
    horizon = int(config.hours * 3600)
    faults = plan_faults(rng, topo, horizon) if config.faults else []
    jobs = generate_jobs(rng, config.nodes, config.hours)
    result = Engine(topo, faults, np.random.default_rng(config.seed + 1)).run(jobs, horizon)
    sim = Simulation(config, topo, jobs, result)
    sim.truth = ground_truth(sim)
    return sim


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
            **f.extra,
        }
        for f in sim.result.faults
    ]
    culprit, victim = sim.jobs[0].job_id, sim.jobs[1].job_id  # the planted N-1 pair
    pair = next(
        (i for i in interference if i["victim"] == victim and i["culprit"] == culprit), None
    )
    if pair is not None:
        run = next(r for r in sim.result.jobs if r.spec.job_id == culprit)
        fwd = sim.topology.forwarders[int(sim.topology.fwd_of_node[run.first_node])]
        n1 = [p for p in run.phases if p.n1]
        faults.append(
            {
                "kind": "n1_interference",
                "component": fwd,
                "start": iso(min(p.start for p in n1)),
                "end": iso(max(p.end for p in n1)),
                "culprit": culprit,
                "victim": victim,
            }
        )
    return {
        "config": {
            "nodes": sim.config.nodes,
            "hours": sim.config.hours,
            "seed": sim.config.seed,
            "start": iso(0),
        },
        "jobs": jobs,
        "faults": faults,
        "interference": interference,
    }
