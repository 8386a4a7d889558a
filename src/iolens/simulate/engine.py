"""Time-stepped contention model: how fast each I/O phase progresses, second by second.

Every second, each active phase asks for what its processes could drive alone; forwarders,
OSTs and the MDS then scale the asks down to their capacity. The mechanisms are the ones
Beacon (section 4) found on TaihuLight:

* metadata requests have priority at a forwarder, so they eat its capacity first;
* N-1 requests are slow at the backend (one shared file, extent locks) and hold forwarder
  threads while they wait, so they clog the forwarder for every neighbour;
* N-N sequential reads with more streams than the forwarder cache can hold in read-ahead
  windows thrash the cache and read each byte ~3.5x from the OSTs;
* injected faults: a fail-slow OST, a slow forwarder, a metadata storm from login nodes
  (a fail-slow component serves each request `magnitude` times slower, so its capacity is
  divided by it).

It also keeps, for every slowed phase, which other jobs loaded its bottleneck: that blame
becomes the ground-truth interference list. None of it reaches the store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from iolens.simulate.topology import Topology
from iolens.simulate.workload import JobSpec, PhaseSpec

N1_FORWARDER_CLOG = 6.0  # N-1 requests hold forwarder threads this much longer
N1_OST_PENALTY = {"write": 3.0, "read": 1.5}  # shared-file lock contention at the OST
THRASH_AMPLIFICATION = (7, 2)  # 3.5x backend reads while the read-ahead cache thrashes
MD_OPS_PER_FILE = 4  # create(open), stat, close, unlink


@dataclass
class Fault:
    """An injected fault. `factor` is what the engine applies: the capacity multiplier of a
    slow component (1 / its slowdown) or a storm's offered load in multiples of the MDS
    capacity. `magnitude` is the size a detector would be judged by: how many times slower
    a fail-slow component is, or a storm's offered metadata operations per second."""

    kind: str
    component: str
    start: int
    end: int
    factor: float = 1.0
    extra: dict[str, str | None] = field(default_factory=dict)
    magnitude: float | None = None

    def active(self, t: int) -> bool:
        return self.start <= t < self.end


@dataclass
class PhaseRun:
    job: JobSpec
    index: int
    spec: PhaseSpec
    start: int
    nodes: np.ndarray  # compute node index of each taking-part rank
    fwd_share: np.ndarray
    ranks_per_fwd: np.ndarray  # processes of the phase behind each forwarder
    n_nodes: int
    ost_share: np.ndarray
    ost_of_file: list[list[int]]
    n1: bool
    remaining: float
    done: list[float] = field(default_factory=list)
    amp: list[bool] = field(default_factory=list)  # per second: backend reads amplified
    slowed: list[float] = field(default_factory=list)  # per second: 1 - granted/asked
    end: int = -1

    @property
    def units(self) -> int:
        return self.spec.units


@dataclass
class JobRun:
    spec: JobSpec
    first_node: int
    start: int
    end: int = -1
    phases: list[PhaseRun] = field(default_factory=list)
    next_phase: int = 0
    wake: int = 0  # when the current computation ends
    active: PhaseRun | None = None

    @property
    def nodes(self) -> np.ndarray:
        return np.arange(self.first_node, self.first_node + self.spec.nnodes)


@dataclass
class EngineResult:
    jobs: list[JobRun]
    faults: list[Fault]
    blame: dict[tuple[str, str], float]  # (victim, culprit) -> seconds of I/O time lost
    #: (job, slow OST) -> seconds the job's I/O took longer because that OST was slow: per
    #: second 1 - granted / what it would have been granted with the OST at full capacity.
    fault_loss: dict[tuple[str, str], float]
    io_seconds: dict[str, float]  # job -> seconds spent in I/O phases
    end: int  # last simulated second
    storm_ops: np.ndarray  # login-node metadata ops served per second
    fwd_load: np.ndarray  # [second, forwarder] offered load / capacity
    ost_load: np.ndarray  # [second, ost]
    mds_load: np.ndarray  # [second]
    fwd_cap: np.ndarray  # [second, forwarder] capacity multiplier (faults)
    ost_cap: np.ndarray
    fwd_busy: np.ndarray  # [second, forwarder] share of its current capacity it used (0-1)
    ost_busy: np.ndarray  # [second, ost]
    mds_busy: np.ndarray  # [second]


def water_fill(capacity: float, demand: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Share `capacity` in proportion to `weight`, never giving anyone more than its demand."""
    alloc = np.zeros_like(demand)
    todo = [i for i in np.argsort(demand / np.maximum(weight, 1e-300)) if demand[i] > 0]
    left, w_left = capacity, float(weight[todo].sum()) if todo else 0.0
    for k, i in enumerate(todo):
        fair = left * weight[i] / w_left if w_left > 0 else 0.0
        if demand[i] <= fair:
            alloc[i] = demand[i]
            left -= demand[i]
            w_left -= weight[i]
            continue
        rest = todo[k:]
        alloc[rest] = left * weight[rest] / w_left
        break
    return alloc


class Engine:
    def __init__(self, topo: Topology, faults: list[Fault], ost_rng: np.random.Generator) -> None:
        self.topo = topo
        self.caps = topo.caps
        self.faults = faults
        self.ost_rng = ost_rng
        self.ost_cursor = int(ost_rng.integers(len(topo.osts)))
        self.free = np.ones(len(topo.compute), bool)
        self.loads: list[tuple[np.ndarray, np.ndarray, float, np.ndarray, np.ndarray]] = []
        self.busy: list[tuple[np.ndarray, np.ndarray, float]] = []
        self.fault_loss: dict[tuple[str, str], float] = {}

    # -- placement ----------------------------------------------------------------------
    def _place(self, job: JobSpec) -> int | None:
        n = job.nnodes
        if job.first_node is not None:
            return job.first_node if self.free[job.first_node : job.first_node + n].all() else None
        idx = np.arange(len(self.free))
        last_busy = np.maximum.accumulate(np.where(self.free, -1, idx))
        group_start = idx // self.topo.nodes_per_forwarder * self.topo.nodes_per_forwarder
        # Prefer a block inside one forwarder group (locality), else any contiguous block.
        for run in (idx - np.maximum(last_busy, group_start - 1), idx - last_busy):
            fits = run >= n
            if fits.any():
                return int(np.argmax(fits)) - n + 1
        return None

    def _stripe(self, count: int) -> list[int]:
        """Lustre's round-robin OST allocator."""
        n = len(self.topo.osts)
        osts = [(self.ost_cursor + k) % n for k in range(min(count, n))]
        self.ost_cursor = (self.ost_cursor + 1) % n
        return osts

    def _begin_phase(self, run: JobRun, t: int, file_osts: list[list[int]]) -> PhaseRun:
        spec = run.spec.phases[run.next_phase]
        nodes = run.first_node + spec.ranks // run.spec.ppn
        weights = spec.count.astype(float)
        fwd_share = np.bincount(self.topo.fwd_of_node[nodes], weights, len(self.topo.forwarders))
        ost_share = np.zeros(len(self.topo.osts))
        if spec.kind != "meta":
            for f, w in zip(spec.file_idx, weights, strict=True):
                osts = file_osts[f]
                ost_share[osts] += w / len(osts)
        total = weights.sum() or 1.0
        shared = len(np.unique(spec.file_idx)) == 1 and len(spec.ranks) > 1
        ranks_per_fwd = np.bincount(self.topo.fwd_of_node[nodes], minlength=len(fwd_share))
        return PhaseRun(
            job=run.spec,
            index=run.next_phase,
            spec=spec,
            start=t,
            nodes=nodes,
            fwd_share=fwd_share / total,
            ranks_per_fwd=ranks_per_fwd,
            n_nodes=len(np.unique(nodes)),
            ost_share=ost_share / total,
            ost_of_file=file_osts,
            n1=shared,
            remaining=float(spec.units),
        )

    # -- the loop -----------------------------------------------------------------------
    def run(self, jobs: list[JobSpec], horizon: int) -> EngineResult:
        topo = self.topo
        n_fwd, n_ost = len(topo.forwarders), len(topo.osts)
        queue = sorted(jobs, key=lambda j: (j.submit, int(j.job_id)))
        running: list[JobRun] = []
        finished: list[JobRun] = []
        file_osts: dict[str, list[list[int]]] = {}
        blame: dict[tuple[str, str], float] = {}
        io_seconds: dict[str, float] = {}
        storm_ops: list[float] = []
        t = 0
        limit = horizon * 4 + 3600
        retry = True  # placement is retried only when nodes were freed or jobs arrived
        # Run at least to the horizon: faults planned late in the window must be in the data.
        while (queue or running or t < horizon) and t < limit:
            # Start queued jobs in order, backfilling smaller ones that fit.
            waiting = [j for j in queue if j.submit <= t]
            if waiting and waiting[-1].submit == t:
                retry = True
            for job in waiting if retry else []:
                first = self._place(job)
                if first is None:
                    continue
                self.free[first : first + job.nnodes] = False
                queue.remove(job)
                file_osts[job.job_id] = [self._stripe(f.stripe_count) for f in job.files]
                running.append(JobRun(job, first, t, wake=t + job.phases[0].compute_before))
            retry = False
            # Computation ends -> next phase starts; last phase done -> tail, then job ends.
            for run in list(running):
                if run.active is None and t >= run.wake:
                    if run.next_phase < len(run.spec.phases):
                        run.active = self._begin_phase(run, t, file_osts[run.spec.job_id])
                        run.phases.append(run.active)
                    else:
                        run.end = t
                        self.free[run.first_node : run.first_node + run.spec.nnodes] = True
                        running.remove(run)
                        finished.append(run)
                        retry = True
            active = [r.active for r in running if r.active is not None]
            storm_ops.append(self._step(t, active, n_fwd, n_ost, blame, io_seconds))
            # Completed phases hand over to the next computation.
            for run in running:
                p = run.active
                if p is not None and p.remaining <= 1e-9:
                    p.end = t + 1
                    run.active = None
                    run.next_phase += 1
                    nxt = run.next_phase
                    pause = (
                        run.spec.phases[nxt].compute_before
                        if nxt < len(run.spec.phases)
                        else run.spec.tail_compute
                    )
                    run.wake = t + 1 + pause
            t += 1
        if queue or running:
            raise RuntimeError("simulation did not finish: the workload overloads the cluster")
        faults = self.faults + self._thrash_episodes(finished)
        fwd_load, ost_load, mds_load, fwd_cap, ost_cap = (
            np.array(x) for x in zip(*self.loads, strict=True)
        )
        fwd_busy, ost_busy, mds_busy = (np.array(x) for x in zip(*self.busy, strict=True))
        return EngineResult(
            finished,
            faults,
            blame,
            self.fault_loss,
            io_seconds,
            t,
            np.array(storm_ops),
            fwd_load,
            ost_load,
            mds_load,
            fwd_cap,
            ost_cap,
            fwd_busy,
            ost_busy,
            mds_busy,
        )

    def _step(
        self,
        t: int,
        active: list[PhaseRun],
        n_fwd: int,
        n_ost: int,
        blame: dict[tuple[str, str], float],
        io_seconds: dict[str, float],
    ) -> float:
        caps = self.caps
        fwd_cap = np.ones(n_fwd)
        ost_cap = np.ones(n_ost)
        storm = 0.0
        for f in self.faults:
            if not f.active(t):
                continue
            if f.kind == "slow_forwarder":
                fwd_cap[self.topo.forwarders.index(f.component)] *= f.factor
            elif f.kind == "slow_ost":
                ost_cap[self.topo.osts.index(f.component)] *= f.factor
            elif f.kind == "metadata_storm":
                storm = f.factor * caps.mds_ops
        if not active:
            self.loads.append(
                (np.zeros(n_fwd), np.zeros(n_ost), storm / caps.mds_ops, fwd_cap, ost_cap)
            )
            self.busy.append(
                (np.zeros(n_fwd), np.zeros(n_ost), min(storm, caps.mds_ops) / caps.mds_ops)
            )
            return min(storm, caps.mds_ops)
        n = len(active)
        ask = np.zeros(n)
        c_fwd = np.zeros(n)  # forwarder thread-seconds per unit
        c_md = np.zeros(n)  # prioritised metadata cost per unit at the forwarder
        c_ost = np.zeros(n)
        mds_per_unit = np.zeros(n)
        S_fwd = np.array([p.fwd_share for p in active])
        outstanding = np.array([p.ranks_per_fwd for p in active], float)
        S_ost = np.array([p.ost_share for p in active])
        # Read-ahead thrashing: count sequential read streams per forwarder.
        streams = np.zeros(n_fwd)
        for p in active:
            if p.spec.kind == "read" and p.spec.sequential_read:
                streams += np.bincount(self.topo.fwd_of_node[p.nodes], minlength=n_fwd)
        thrashing = streams * caps.readahead_per_file > caps.forwarder_cache
        amp_num, amp_den = THRASH_AMPLIFICATION
        amplified = np.zeros(n, bool)
        for i, p in enumerate(active):
            s = p.spec
            ranks = len(s.ranks)
            nodes = p.n_nodes
            if s.kind == "meta":
                rate = ranks * caps.rank_md_ops / MD_OPS_PER_FILE
                c_md[i] = MD_OPS_PER_FILE / caps.forwarder_md_ops
                c_fwd[i] = s.size / caps.forwarder_bw + 1 / caps.forwarder_iops
                mds_per_unit[i] = MD_OPS_PER_FILE
            else:
                rate = (
                    min(ranks * caps.rank_bw, nodes * caps.node_bw, ranks * caps.rank_iops * s.size)
                    / s.size
                )
                c_fwd[i] = s.size / caps.forwarder_bw + 1 / caps.forwarder_iops
                c_ost[i] = s.size / caps.ost_bw + 1 / caps.ost_iops
                if p.n1:
                    c_fwd[i] *= N1_FORWARDER_CLOG
                    c_ost[i] *= N1_OST_PENALTY[s.kind]
                if s.kind == "read" and s.sequential_read and (thrashing & (p.fwd_share > 0)).any():
                    amplified[i] = True
                    c_ost[i] *= amp_num / amp_den
            ask[i] = min(p.remaining, rate)
        # MDS first (the storm competes there), then forwarder metadata with priority.
        md_load = float(ask @ mds_per_unit)
        mds_factor = min(1.0, self.caps.mds_ops / (md_load + storm)) if md_load + storm else 1.0
        asked = ask * np.where(mds_per_unit > 0, mds_factor, 1.0)
        fwd_md = (asked * c_md) @ S_fwd
        fwd_data_cap = np.maximum(fwd_cap - fwd_md, 0.05 * fwd_cap)
        # Forwarders: a closed-loop FIFO thread pool. Each process keeps one request
        # outstanding, so thread time is shared by outstanding requests x service time:
        # slow N-1 requests take most threads (Beacon 4.1, Table 5).
        fwd_demand = (asked * c_fwd)[:, None] * S_fwd
        fwd_weight = outstanding * c_fwd[:, None]
        fwd_alloc = np.zeros_like(fwd_demand)
        for f in range(n_fwd):
            fwd_alloc[:, f] = water_fill(fwd_data_cap[f], fwd_demand[:, f], fwd_weight[:, f])
        fwd_load = fwd_demand.sum(axis=0)
        with np.errstate(divide="ignore", invalid="ignore"):
            fwd_ratio = np.where(fwd_demand > 0, fwd_alloc / fwd_demand, np.inf)
        f_fwd = fwd_ratio.min(axis=1)
        # OSTs: requests share an OST in proportion to what they ask of it.
        ost_load = (asked * c_ost) @ S_ost
        ost_factor = np.minimum(
            1.0, np.divide(ost_cap, ost_load, out=np.ones(n_ost), where=ost_load > 0)
        )
        f_ost = np.where(S_ost > 0, ost_factor, np.inf).min(axis=1)
        factor = np.minimum(np.minimum(f_fwd, f_ost), 1.0)
        factor = np.where(mds_per_unit > 0, np.minimum(factor, mds_factor), factor)
        grant = ask * factor
        self._fault_loss(active, factor, f_fwd, ost_load, ost_cap, S_ost, mds_per_unit, mds_factor)
        self.loads.append(
            (
                (fwd_load + fwd_md) / np.maximum(fwd_cap, 1e-9),
                ost_load / ost_cap,
                (md_load + storm) / caps.mds_ops,
                fwd_cap,
                ost_cap,
            )
        )
        for i, p in enumerate(active):
            g = min(grant[i], p.remaining)
            p.remaining -= g
            if p.remaining < 1e-6 * max(1, p.units):
                g += p.remaining
                p.remaining = 0.0
            p.done.append(g)
            p.amp.append(bool(amplified[i]))
            lost = 1.0 - factor[i]
            p.slowed.append(lost)
            io_seconds[p.job.job_id] = io_seconds.get(p.job.job_id, 0.0) + 1.0
            if lost < 0.05:
                continue
            # Blame the other jobs loading this phase's bottleneck, by their share of it.
            if factor[i] == f_fwd[i]:
                r = int(np.argmin(fwd_ratio[i]))
                loads = fwd_alloc[:, r]
            elif factor[i] == f_ost[i]:
                r = int(np.argmin(np.where(S_ost[i] > 0, ost_factor, np.inf)))
                loads = asked * c_ost * S_ost[:, r]
            else:
                loads = asked * mds_per_unit
            total = loads.sum() + (storm if factor[i] == mds_factor else 0.0)
            others = total - loads[i]
            if others <= 0:
                continue
            # What the others took: all of the loss, unless the phase alone asks more than
            # the bottleneck gives (then it would get cap / own alone, and loses only
            # others / total of its time to them). Split by their shares of it.
            taken = min(lost, others / total)
            for j, q in enumerate(active):
                if q.job.job_id != p.job.job_id and loads[j] > 0:
                    key = (p.job.job_id, q.job.job_id)
                    blame[key] = blame.get(key, 0.0) + taken * loads[j] / others
        served = min(storm, max(0.0, self.caps.mds_ops - md_load * mds_factor))
        # What each component actually did, as a share of what it can do now.
        self.busy.append(
            (
                np.minimum(1.0, ((grant * (c_fwd + c_md)) @ S_fwd) / np.maximum(fwd_cap, 1e-9)),
                np.minimum(1.0, ((grant * c_ost) @ S_ost) / ost_cap),
                min(1.0, (float(grant @ mds_per_unit) + served) / caps.mds_ops),
            )
        )
        return served

    def _fault_loss(
        self,
        active: list[PhaseRun],
        factor: np.ndarray,
        f_fwd: np.ndarray,
        ost_load: np.ndarray,
        ost_cap: np.ndarray,
        S_ost: np.ndarray,
        mds_per_unit: np.ndarray,
        mds_factor: float,
    ) -> None:
        """Each phase's time lost this second to slow OSTs: its pace with every slowed OST
        back at full capacity (the rest unchanged) against its pace now."""
        slow = np.nonzero(ost_cap < 1.0)[0]
        if not len(slow):
            return
        healthy = np.minimum(1.0, np.divide(1.0, ost_load, out=np.ones_like(ost_load),
                                            where=ost_load > 0))  # fmt: skip
        now = np.minimum(1.0, np.divide(ost_cap, ost_load, out=np.ones_like(ost_load),
                                        where=ost_load > 0))  # fmt: skip
        for i, p in enumerate(active):
            hit = [o for o in slow if S_ost[i, o] > 0 and now[o] < healthy[o]]
            if not hit:
                continue
            per_ost = np.where(S_ost[i] > 0, now, np.inf)
            per_ost[hit] = healthy[hit]
            pace = min(float(f_fwd[i]), float(per_ost.min()), 1.0)
            if mds_per_unit[i] > 0:
                pace = min(pace, mds_factor)
            lost = 1.0 - float(factor[i]) / pace if pace > 0 else 0.0
            if lost <= 0:
                continue
            for o in hit:  # several slow OSTs at once: each is charged the whole loss
                key = (p.job.job_id, self.topo.osts[o])
                self.fault_loss[key] = self.fault_loss.get(key, 0.0) + lost

    def _thrash_episodes(self, runs: list[JobRun]) -> list[Fault]:
        """Turn the seconds where backend reads were amplified into fault episodes."""
        episodes: list[Fault] = []
        for run in runs:
            for p in run.phases:
                secs = [p.start + k for k, a in enumerate(p.amp) if a]
                if not secs:
                    continue
                fwds = [self.topo.forwarders[i] for i in np.nonzero(p.fwd_share)[0]]
                for fwd in fwds:
                    episodes.append(
                        Fault(
                            "cache_thrashing",
                            fwd,
                            secs[0],
                            secs[-1] + 1,
                            extra={"job_id": run.spec.job_id},
                        )
                    )
        return episodes
