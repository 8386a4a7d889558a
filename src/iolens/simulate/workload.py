"""Job mix of the simulated cluster: applications, their I/O modes and I/O phases.

Each application has a fixed I/O behaviour (so repeated runs at one scale look alike, as
Beacon's history-based anomaly detection assumes) and runs at a few scales. The mix covers
Beacon's four I/O modes, checkpoint phases, small-I/O, metadata-heavy and read-after-write
jobs. Volumes are per process and exact, so ground-truth byte counts are exact integers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

KiB, MiB, GiB = 2**10, 2**20, 2**30


@dataclass
class FileSpec:
    path: str
    stripe_count: int = 1
    stripe_size: int = 1 * MiB


@dataclass
class PhaseSpec:
    """One I/O phase. Units are requests for read/write phases and files for meta phases."""

    kind: str  # "read" | "write" | "meta"
    size: int  # bytes per request; for meta, bytes written into each created file
    ranks: np.ndarray  # ranks that take part
    count: np.ndarray  # units per taking-part rank
    file_idx: np.ndarray  # per rank: index into JobSpec.files (meta: the rank's directory)
    offset0: np.ndarray  # per rank: offset of its first request
    stride: int  # offset step between a rank's consecutive requests
    compute_before: int  # seconds of computation before the phase starts
    sequential_read: bool = False

    @property
    def units(self) -> int:
        return int(self.count.sum())


@dataclass
class JobSpec:
    job_id: str
    user: str
    app: str
    nnodes: int
    ppn: int
    submit: int  # seconds after the simulation start
    io_mode: str
    phases: list[PhaseSpec]
    files: list[FileSpec]
    tail_compute: int
    state: str = "COMPLETED"
    first_node: int | None = None  # planted jobs: fixed placement
    meta_file_prefix: list[str] = field(default_factory=list)  # per meta-phase rank dirs

    @property
    def nprocs(self) -> int:
        return self.nnodes * self.ppn


@dataclass(frozen=True)
class App:
    name: str
    user: str
    mode: str  # the I/O mode every data phase of this app follows
    scales: tuple[int, ...]  # node counts it runs at
    ppn: int = 4


APPS: tuple[App, ...] = (
    App("lammps", "alice", "N-N", (32, 64, 128)),
    App("wrf", "bob", "1-1", (16, 64)),
    App("awp", "carol", "N-1", (64, 128)),
    App("shentu", "dave", "N-N", (32, 64)),
    App("xcfd", "erin", "N-M", (64, 128)),
    App("dndc", "frank", "N-N", (8, 16)),  # metadata-heavy
    App("vasp", "grace", "N-N", (4, 8)),  # small I/O
    App("cesm", "heidi", "N-M", (32, 64)),  # read-after-write
    App("gromacs", "ivan", "1-1", (2, 4)),
)
APP_BY_NAME = {a.name: a for a in APPS}


class JobFactory:
    """Builds the phases and files of one job of an application, deterministically."""

    def __init__(self, rng: np.random.Generator) -> None:
        self.rng = rng

    def make(self, job_id: str, app: App, nnodes: int, submit: int) -> JobSpec:
        job = JobSpec(job_id, app.user, app.name, nnodes, app.ppn, submit, app.mode, [], [], 0)
        builder = getattr(self, f"_{app.name}")
        builder(job)
        job.tail_compute = int(self.rng.integers(60, 240))
        if self.rng.random() < 0.05:
            job.state = "FAILED"
        return job

    # -- helpers ------------------------------------------------------------------------
    def _dir(self, job: JobSpec) -> str:
        return f"/lustre/{job.user}/{job.app}/{job.job_id}"

    def _compute(self, lo: int, hi: int) -> int:
        return int(self.rng.integers(lo, hi))

    def _add_files(self, job: JobSpec, paths: list[str], stripe_count: int = 1) -> np.ndarray:
        first = len(job.files)
        job.files.extend(FileSpec(p, stripe_count) for p in paths)
        return np.arange(first, first + len(paths))

    def _n_n(
        self,
        job: JobSpec,
        kind: str,
        name: str,
        per_rank: int,
        size: int,
        compute: int,
        ranks: np.ndarray | None = None,
        seq: bool = False,
    ) -> PhaseSpec:
        """Each taking-part rank accesses a file of its own, contiguously."""
        ranks = np.arange(job.nprocs) if ranks is None else ranks
        files = self._add_files(job, [f"{self._dir(job)}/{name}.{r:05d}" for r in ranks])
        n = per_rank // size
        return PhaseSpec(
            kind,
            size,
            ranks,
            np.full(len(ranks), n),
            files,
            np.zeros(len(ranks), np.int64),
            size,
            compute,
            seq,
        )

    def _n_1(
        self,
        job: JobSpec,
        kind: str,
        name: str,
        per_rank: int,
        size: int,
        compute: int,
        strided: bool,
        stripe_count: int,
    ) -> PhaseSpec:
        """All ranks share one file: interleaved (strided) or one segment per rank."""
        ranks = np.arange(job.nprocs)
        file = self._add_files(job, [f"{self._dir(job)}/{name}"], stripe_count)[0]
        n = per_rank // size
        if strided:
            offset0, stride = ranks.astype(np.int64) * size, size * len(ranks)
        else:
            offset0, stride = ranks.astype(np.int64) * n * size, size
        return PhaseSpec(
            kind,
            size,
            ranks,
            np.full(len(ranks), n),
            np.full(len(ranks), file),
            offset0,
            stride,
            compute,
        )

    # -- applications -------------------------------------------------------------------
    def _lammps(self, job: JobSpec) -> None:
        for i in range(3):  # checkpoints, N-N
            job.phases.append(
                self._n_n(job, "write", f"restart.{i}", 64 * MiB, 4 * MiB, self._compute(120, 300))
            )

    def _wrf(self, job: JobSpec) -> None:
        root = np.array([0])
        for i in range(4):  # rank 0 writes history files
            job.phases.append(
                self._n_n(
                    job,
                    "write",
                    f"wrfout.{i}",
                    2 * GiB,
                    1 * MiB,
                    self._compute(90, 240),
                    ranks=root,
                )
            )

    def _awp(self, job: JobSpec) -> None:
        stripes = 1 if self.rng.random() < 0.7 else 4  # users rarely restripe (Beacon 4.3)
        job.phases.append(
            self._n_1(
                job,
                "read",
                "mesh.in",
                16 * MiB,
                1 * MiB,
                self._compute(20, 60),
                strided=True,
                stripe_count=stripes,
            )
        )
        for i in range(2):
            job.phases.append(
                self._n_1(
                    job,
                    "write",
                    f"ckpt.{i}",
                    8 * MiB,
                    1 * MiB,
                    self._compute(150, 300),
                    strided=bool(i % 2 == 0),
                    stripe_count=stripes,
                )
            )

    def _shentu(self, job: JobSpec) -> None:
        job.phases.append(
            self._n_n(job, "read", "input", 256 * MiB, 1 * MiB, self._compute(10, 30), seq=True)
        )
        job.phases.append(
            self._n_n(job, "write", "result", 32 * MiB, 4 * MiB, self._compute(200, 400))
        )

    def _n_m(
        self,
        job: JobSpec,
        kind: str,
        name: str,
        per_agg: int,
        size: int,
        compute: int,
        group: int,
        shared: bool,
    ) -> PhaseSpec:
        """N processes aggregate into M = N/group files."""
        nprocs = job.nprocs
        if not shared:  # every group-th rank is an aggregator with a file of its own
            return self._n_n(
                job, kind, name, per_agg, size, compute, ranks=np.arange(0, nprocs, group)
            )
        ranks = np.arange(nprocs)  # groups of `group` ranks stride through one file each
        files = self._add_files(
            job, [f"{self._dir(job)}/{name}.{g:04d}" for g in range(nprocs // group)]
        )
        n = per_agg // group // size
        return PhaseSpec(
            kind,
            size,
            ranks,
            np.full(nprocs, n),
            files[ranks // group],
            (ranks % group).astype(np.int64) * size,
            size * group,
            compute,
        )

    def _xcfd(self, job: JobSpec) -> None:
        shared = bool(self.rng.random() < 0.5)
        for i in range(2):
            job.phases.append(
                self._n_m(
                    job,
                    "write",
                    f"field.{i}",
                    128 * MiB,
                    4 * MiB,
                    self._compute(150, 300),
                    group=8,
                    shared=shared,
                )
            )

    def _cesm(self, job: JobSpec) -> None:
        write = self._n_m(
            job,
            "write",
            "restart",
            64 * MiB,
            4 * MiB,
            self._compute(100, 200),
            group=16,
            shared=False,
        )
        read = PhaseSpec(
            "read",
            write.size,
            write.ranks,
            write.count.copy(),
            write.file_idx,
            write.offset0,
            write.stride,
            self._compute(120, 240),
            True,
        )
        job.phases += [write, read]  # read-after-write of the same restart files

    def _dndc(self, job: JobSpec) -> None:
        ranks = np.arange(job.nprocs)
        for i in range(2):  # mdtest-like: create, write 4 KiB, stat, close, unlink
            dirs = self._add_files(job, [f"{self._dir(job)}/tmp{i}/r{r:05d}" for r in ranks])
            job.phases.append(
                PhaseSpec(
                    "meta",
                    4 * KiB,
                    ranks,
                    np.full(len(ranks), 400),
                    dirs,
                    np.zeros(len(ranks), np.int64),
                    0,
                    self._compute(60, 180),
                )
            )

    def _vasp(self, job: JobSpec) -> None:
        for i in range(2):  # small writes
            job.phases.append(
                self._n_n(job, "write", f"OUTCAR.{i}", 8 * MiB, 2 * KiB, self._compute(60, 200))
            )

    def _gromacs(self, job: JobSpec) -> None:
        root = np.array([0])
        job.phases.append(
            self._n_n(
                job, "read", "topol.tpr", 256 * MiB, 1 * MiB, self._compute(5, 20), ranks=root
            )
        )
        job.phases.append(
            self._n_n(
                job, "write", "traj.xtc", 512 * MiB, 1 * MiB, self._compute(200, 500), ranks=root
            )
        )


def planted_sizes(rng: np.random.Generator, nodes: int) -> dict[str, int]:
    """Node counts of the planted scenarios, drawn from the seed so no detector can be tuned
    to one size: the N-1 culprit takes 8-75 % of a forwarder's 512 nodes (40-384; Beacon
    calls N > 32 nodes large), its N-N victim 6-25 %, and the sequential reader 44-88 %
    (224-448 nodes, 4 streams each: always more read-ahead windows than the cache holds)."""
    per_fwd = min(512, nodes)

    def draw(lo: float, hi: float, floor: int) -> int:
        return int(
            rng.integers(max(floor, round(per_fwd * lo)), max(floor, round(per_fwd * hi)) + 1)
        )

    culprit = draw(40 / 512, 384 / 512, 4)
    victim = min(draw(1 / 16, 1 / 4, 2), per_fwd - culprit)
    thrasher = draw(224 / 512, 448 / 512, 2)
    return {"culprit": culprit, "victim": max(1, victim), "thrasher": thrasher}


def arrivals(
    rng: np.random.Generator,
    rate: float,
    horizon: float,
    diurnal: Callable[[np.ndarray], np.ndarray] | None = None,
    start_hour: float = 0.0,
) -> list[float]:
    """Poisson arrival times in [30 s, horizon): mean `rate` per second, modulated by the
    load cycle `diurnal(hour of day)` (thinning: candidates at the peak rate, each kept with
    probability factor / peak)."""
    hours = np.linspace(0.0, 24.0, 97)
    peak = float(np.max(diurnal(hours))) if diurnal is not None else 1.0
    out: list[float] = []
    t = 30.0
    while True:
        t += rng.exponential(1.0 / (rate * peak))
        if t >= horizon:
            return out
        keep = 1.0
        if diurnal is not None:
            keep = float(diurnal(np.array([(start_hour + t / 3600.0) % 24.0]))[0]) / peak
        if rng.random() < keep:
            out.append(t)


def generate_jobs(
    rng: np.random.Generator,
    nodes: int,
    hours: float,
    first_id: int = 100001,
    *,
    diurnal: Callable[[np.ndarray], np.ndarray] | None = None,
    start_hour: float = 0.0,
) -> list[JobSpec]:
    """Planted scenarios first (placed at t=0 on an empty machine), then a Poisson stream.

    The first job is the N-1 culprit, the second its victim, the third (with >= 2
    forwarders) the sequential reader that thrashes the read-ahead cache."""
    factory = JobFactory(rng)
    jobs: list[JobSpec] = []
    next_id = first_id

    def add(app: str, nnodes: int, submit: int, first_node: int | None = None) -> JobSpec:
        nonlocal next_id
        job = factory.make(str(next_id), APP_BY_NAME[app], nnodes, submit)
        job.first_node = first_node
        next_id += 1
        jobs.append(job)
        return job

    per_fwd = min(512, nodes)
    sizes = planted_sizes(rng, nodes)
    # N-1 interference on a shared forwarder: a large N-1 job next to an N-N victim.
    culprit = add("awp", sizes["culprit"], 0, first_node=0)
    culprit.phases[0].compute_before = 20
    culprit.phases[1].compute_before = 10
    victim = add("lammps", sizes["victim"], 0, first_node=culprit.nnodes)
    victim.phases[0].compute_before = 45
    # N-N sequential read big enough to thrash the forwarder read-ahead cache.
    if nodes >= 2 * per_fwd:
        thrasher = add("shentu", sizes["thrasher"], 0, first_node=per_fwd)
        thrasher.phases[0].compute_before = 900  # well after the N-1 scenario

    horizon = int(hours * 3600)
    grow = max(1, int(np.sqrt(nodes / 1024)))  # bigger machines: bigger and more jobs
    mean_nodes = float(np.mean([min(s * grow, max(1, nodes // 4)) for a in APPS for s in a.scales]))
    rate = 0.9 * nodes / mean_nodes / 1500.0  # keep the machine ~busy (jobs last ~25 min)
    for t in arrivals(rng, rate, horizon * 0.8, diurnal, start_hour):
        app = APPS[int(rng.integers(len(APPS)))]
        scale = int(app.scales[int(rng.integers(len(app.scales)))])
        scale = max(1, min(scale * grow, nodes // 4))
        add(app.name, scale, int(t))
    return jobs
