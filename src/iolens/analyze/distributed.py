"""The analyses as Dask tasks over dataset partitions (`iolens analyze --dask`).

The embedded run (`analyze_jobs`, then `analyze_components`) is cut where its work is
independent, and every piece runs the unchanged analysis code on a worker:

1. **per-job work**: one task per chunk of jobs that started close together, each reading
   only the hourly partitions its jobs ran in (`Snapshot.restrict`): their reports (the
   client-record scans) and, when every job is analysed, their interference bursts (each
   job's are cut from its own samples and records);
2. **interference**, when every job is analysed: the span of the bursts cut into windows of
   time, each task reading only its window's target samples and getting only the bursts
   overlapping it. Every quantity of the diagnosis is per sample, so windows give their
   baseline histograms and culprit tallies separately; the histograms are pooled between
   the two rounds and the tallies merged (`iolens.analyze.jobs.interference`);
3. **cross-job assembly**: one task running `analyze_jobs` with the reports, bursts and
   merged tallies of steps 1-2: it keeps the pairs, then phases, history and the findings
   rules, which need every job's results but no samples;
4. **component detectors**: one task per detector, each over its window plus look-back.

Workers open a `DatasetStore` pinned to the files their task needs and to the results
head the client published, and journal their writes instead of publishing them; the
client replays each journal on its own store, in order, so the results (and what a later
run reads back) are those of the embedded run. The workers read the dataset from the
shared file system: no task is sent data, only file names.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from iolens.analyze.components import DETECTORS, Context, Detector, Episode, analyze_components
from iolens.analyze.jobreport import JobReport
from iolens.analyze.jobs import baseline, interference, service, usage
from iolens.analyze.jobs.baseline import Baseline
from iolens.analyze.jobs.service import LOOKAHEAD_S, Samples
from iolens.analyze.jobs.usage import EVERYTHING, Burst
from iolens.analyze.pipeline import Step, analyze_jobs
from iolens.analyze.report import build_many
from iolens.errors import StoreError
from iolens.model.finding import Finding
from iolens.store.dataset import DatasetStore, replay
from iolens.store.visibility import Snapshot

#: Jobs per report task. Each task scans the hours its jobs ran in, so fewer, larger
#: chunks do less work in all; the cut does not depend on the cluster, so neither do the
#: results (a day has ~100 chunks: enough to keep any sensible cluster busy).
CHUNK_JOBS = 64
#: Seconds per interference window (epoch-aligned, also independent of the cluster).
WINDOW_S = 600


@dataclass
class DistributedRun:
    """What a distributed analysis did: findings, episodes, task counts and stage times."""

    findings: list[Finding] = field(default_factory=list)
    episodes: int | None = None
    jobs: int = 0
    windows: int = 0  # interference windows of time
    tasks: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)


# -- on the workers ------------------------------------------------------------------------


def _threads() -> int:
    env = os.environ.get("IOLENS_DUCKDB_THREADS")
    if env:
        return int(env)
    try:
        from distributed import get_worker

        w = get_worker()
        state = getattr(w, "state", None)
        return int(getattr(state, "nthreads", None) or getattr(w, "nthreads", 1))
    except (ImportError, ValueError):
        return 1


def worker_store(snapshot: Snapshot) -> DatasetStore:
    """A journaling store over the task's files (what every task opens)."""
    return DatasetStore(snapshot.root, snapshot=snapshot, journal=True, threads=_threads())


@dataclass
class Chunk:
    """What a report task hands to the diagnosis task."""

    reports: list[JobReport]
    jobs: list[str]
    bursts: dict[str, list[Burst]] | None = None  # cut when all jobs are analysed


def reports_task(snapshot: Snapshot, job_ids: list[str], cut_bursts: bool = False) -> Chunk:
    """Step 1: the reports (with series) of a chunk of jobs and, when every job is analysed
    (the diagnosis then spans all data), the interference bursts of the same jobs. The
    snapshot is scoped to the chunk's jobs: their records and samples are all it reads."""
    store = worker_store(snapshot)
    try:
        chunk = Chunk(build_many(store, job_ids, with_series=True), job_ids)
        if cut_bursts:
            rows = usage.job_rows(store, EVERYTHING)
            mine = pa.array(job_ids, pa.string())
            rows = rows.filter(pc.is_in(rows.column("job_id"), value_set=mine))
            windows = usage.burst_windows(store, EVERYTHING)
            own = {j: windows[j] for j in job_ids if j in windows}
            chunk.bursts = usage.bursts(rows, own, set())
        return chunk
    finally:
        store.close()


def jobs_task(
    snapshot: Snapshot,
    job_ids: list[str] | None,
    silenced: frozenset[str],
    windows: Any,
    *chunks: Chunk,
) -> tuple[list[Finding], list[tuple[Any, ...]]]:
    """Step 3: `analyze_jobs` with prebuilt reports (and, over all jobs, their bursts and
    the interference windows' calibration and tallies); its findings and write journal."""
    store = worker_store(snapshot)
    tokens = []
    try:
        ids = job_ids
        if ids is None:
            q = store.query("SELECT job_id FROM jobs ORDER BY job_id")
            ids = q.column("job_id").to_pylist()
        by_id = {r.job_id: r for chunk in chunks for r in chunk.reports}
        reports = [by_id[j] for j in ids if j in by_id]
        if windows is not None:
            cut = {j: b for c in chunks for j, b in (c.bursts or {}).items()}
            tokens.append((interference.PRECUT_BURSTS, interference.PRECUT_BURSTS.set(cut)))
            tokens.append((interference.PRECOMPUTED, interference.PRECOMPUTED.set(windows)))
        found = analyze_jobs(store, job_ids, silenced, reports=reports)
        return found, store.journal or []
    finally:
        for var, token in reversed(tokens):
            var.reset(token)
        store.close()


# -- step 2: interference, window by window -------------------------------------------------


def _facts(chunk: Chunk) -> tuple[int | None, int | None, dict[str, str | None]]:
    """The span of a chunk's bursts and its jobs' I/O modes (what the client plans with)."""
    found = [b for bs in (chunk.bursts or {}).values() for b in bs]
    modes = {r.job_id: r.io_mode for r in chunk.reports}
    if not found:
        return None, None, modes
    return min(b.start for b in found), max(b.end for b in found), modes


def _pick(chunk: Chunk, lo: int, hi: int, n1: frozenset[str]) -> list[Burst]:
    """Copies of a chunk's bursts overlapping [lo, hi), N-1 marked."""
    out = []
    for job, found in (chunk.bursts or {}).items():
        mine = [replace(b) for b in interference.overlapping(found, lo, hi)]
        interference.mark_n1(mine, job in n1)
        out += mine
    return out


def _window(lo: int, hi: int, *picks: list[Burst]) -> interference.TimeWindow:
    return interference.TimeWindow(
        lo, hi, interference.diagnosis_order(b for p in picks for b in p)
    )


def samples_task(snapshot: Snapshot, lo: int, hi: int) -> Samples:
    store = worker_store(snapshot)
    try:
        return service.load(store, lo, hi)
    finally:
        store.close()


def _tallies(
    w: interference.TimeWindow,
    samples: Samples,
    fitted: Baseline,
    n1: frozenset[str],
    degraded: interference.Degraded,
) -> tuple[interference.Tallies, dict[str, float]]:
    return interference.window_tallies(samples, fitted, w.bursts, set(n1), degraded)


def _together(
    fitted: Baseline, parts: list[tuple[interference.Tallies, dict[str, float]]]
) -> tuple[Baseline, interference.Tallies, dict[str, float]]:
    other: dict[str, float] = {}
    for _, lost in parts:
        for v, d in lost.items():
            other[v] = other.get(v, 0.0) + d
    return fitted, interference.merge_tallies(t for t, _ in parts), other


def _interference_windows(
    client: Any, store: DatasetStore, snapshot: Snapshot, chunks: list[Any]
) -> tuple[Any, int, int]:
    """Submits step 2: a future of (baseline, tallies, losses to other clients), the number
    of windows and of tasks.

    Each window's task reads only the target samples of its seconds, and gets only the
    bursts overlapping them; the baseline histograms are pooled between the two rounds
    (`iolens.analyze.jobs.baseline`), all as tasks: the client waits only for the bursts'
    span.
    """
    facts = client.gather([client.submit(_facts, c, pure=False) for c in chunks])
    spans = [(lo, hi) for lo, hi, _ in facts if lo is not None]
    if not spans:
        return None, 0, len(chunks)
    modes = {j: m for _, _, ms in facts for j, m in ms.items()}
    n1 = frozenset(interference.n1_jobs(store, modes))
    degraded = interference.degraded_targets(store)
    t0, t1 = interference.sample_span(min(lo for lo, _ in spans), max(hi for _, hi in spans))
    edges = interference.window_edges(t0, t1, WINDOW_S)

    def submit(fn: Callable[..., Any], *args: Any) -> Any:
        return client.submit(fn, *args, pure=False)

    def utc(second: int) -> datetime:
        return datetime.fromtimestamp(second, UTC).replace(tzinfo=None)

    snaps = [snapshot.restrict(utc(lo), utc(hi + LOOKAHEAD_S), margin_h=0) for lo, hi in edges]
    wins = [
        submit(_window, lo, hi, *[submit(_pick, c, lo, hi, n1) for c in chunks]) for lo, hi in edges
    ]
    loaded = [submit(samples_task, sn, lo, hi) for sn, (lo, hi) in zip(snaps, edges, strict=True)]
    fitted = submit(baseline.merge, [submit(baseline.samples, s) for s in loaded])
    tallies = [
        submit(_tallies, w, s, fitted, n1, degraded) for w, s in zip(wins, loaded, strict=True)
    ]
    # per chunk its facts; per window a pick per chunk and four tasks; one pooling
    tasks = len(chunks) + len(edges) * (len(chunks) + 4) + 2
    return submit(_together, fitted, tallies), len(edges), tasks


def detect_task(
    snapshot: Snapshot,
    detector: Detector,
    start: datetime,
    end: datetime,
    open_ended: bool,
    m_load: int,
) -> list[Episode]:
    """Step 3: one detector over the window (its context as the client computed it)."""
    store = worker_store(snapshot)
    try:
        ctx = Context(store, start, end, open_ended=open_ended)
        ctx.m_load = m_load  # the look-back start of the whole dataset, not of this slice
        return detector.detect(ctx)
    finally:
        store.close()


# -- on the client -------------------------------------------------------------------------


class _RemoteDetector:
    """Stands in for a detector inside `analyze_components` and runs it on the cluster."""

    def __init__(self, plan: _DetectorPlan, detector: Detector) -> None:
        self.plan = plan
        self.detector = detector
        self.name = detector.name
        self.kind = detector.kind

    def detect(self, ctx: Context) -> list[Episode]:
        return self.plan.episodes(self, ctx)


class _DetectorPlan:
    """Submits every detector when the first is asked, so they run side by side."""

    def __init__(self, client: Any, snapshot: Snapshot, detectors: list[Detector]) -> None:
        self.client = client
        self.snapshot = snapshot
        self.remote = [_RemoteDetector(self, d) for d in detectors]
        self.futures: dict[str, Any] | None = None

    def episodes(self, who: _RemoteDetector, ctx: Context) -> list[Episode]:
        if self.futures is None:
            snap = self.snapshot.restrict(ctx.load_start, ctx.load_end)
            self.futures = {
                r.name: self.client.submit(
                    detect_task,
                    snap,
                    r.detector,
                    ctx.start,
                    ctx.end,
                    ctx.open_ended,
                    ctx.m_load,
                    pure=False,
                    key=f"iolens-detect-{r.name}-{os.urandom(4).hex()}",
                )
                for r in self.remote
            }
        return list(self.futures[who.name].result())


def _chunks(rows: list[dict[str, Any]], size: int) -> list[list[dict[str, Any]]]:
    """Jobs in start order, cut into chunks (jobs of one chunk ran at about the same time)."""
    never = datetime.max
    ordered = sorted(rows, key=lambda r: (r["start"] or never, r["job_id"]))
    return [ordered[i : i + size] for i in range(0, len(ordered), size)]


def _span(rows: Iterable[dict[str, Any]]) -> tuple[datetime | None, datetime | None]:
    rows = list(rows)
    if not rows or any(r["start"] is None or r["end"] is None for r in rows):
        return None, None  # unknown run times: the task reads every partition
    return min(r["start"] for r in rows), max(r["end"] for r in rows)


@dataclass
class _Reported:
    """Counts the jobs whose reports are in, from the report futures' done callbacks (on
    the client's event loop thread, hence the lock)."""

    jobs: int
    tasks: int
    on_job: Callable[[str], None] | None
    on_step: Step | None
    done_jobs: int = 0
    done_tasks: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    all_done: threading.Event = field(default_factory=threading.Event)

    def task_done(self, fut: Any) -> None:
        ids = [r.job_id for r in fut.result().reports] if fut.status == "finished" else []
        with self.lock:
            for job_id in ids:
                self.done_jobs += 1
                if self.on_job is not None:
                    self.on_job(job_id)
                if self.on_step is not None:
                    self.on_step("building reports", self.done_jobs, self.jobs)
            self.done_tasks += 1
            if self.done_tasks >= self.tasks:
                self.all_done.set()


def analyze_distributed(
    store: DatasetStore,
    client: Any,
    job_ids: list[str] | None = None,
    *,
    components: bool = True,
    silenced: frozenset[str] = frozenset(),
    on_job: Callable[[str], None] | None = None,
    on_step: Step | None = None,
    chunk_jobs: int = CHUNK_JOBS,
) -> DistributedRun:
    """What `iolens analyze` does (jobs, then components), with the work on `client`'s
    cluster; results land in `store` exactly as the embedded run writes them.

    `on_job(job_id)` and `on_step("building reports", done, total)` fire per job as each
    report task completes (a future's callback, so a progress bar moves while the others
    run), then `on_step` names the diagnosis and the component detectors."""
    import time

    from distributed import wait

    if not isinstance(store, DatasetStore):
        raise StoreError("distributed analysis needs a dataset (iolens serve --dataset)")
    run = DistributedRun()
    t0 = time.perf_counter()
    snapshot = store.snapshot()  # publishes pending results first
    everything = job_ids is None
    rows = store.query('SELECT job_id, "start", "end" FROM jobs ORDER BY job_id').to_pylist()
    if job_ids is not None:
        wanted = set(job_ids)
        rows = [r for r in rows if r["job_id"] in wanted]
    run.jobs = len(job_ids) if job_ids is not None else len(rows)
    futures = []
    for chunk in _chunks(rows, chunk_jobs):
        lo, hi = _span(chunk)
        futures.append(
            client.submit(
                reports_task,
                snapshot.restrict(lo, hi).scope([r["job_id"] for r in chunk]),
                [r["job_id"] for r in chunk],
                everything,
                pure=False,
            )
        )
    run.tasks["reports"] = len(futures)
    reported = _Reported(run.jobs, len(futures), on_job, on_step)
    for fut in futures:
        fut.add_done_callback(reported.task_done)
    windows = None
    if everything:  # interference over all data: spread over windows of time
        windows, run.windows, run.tasks["interference"] = _interference_windows(
            client, store, snapshot, futures
        )
    run.seconds["reports"] = time.perf_counter() - t0
    lo, hi = _span(rows)
    jobs_future = client.submit(
        jobs_task,
        snapshot.restrict(lo, hi),
        None if everything else list(job_ids or []),
        silenced,
        windows,
        *futures,
        pure=False,
    )
    if windows is not None:
        wait([windows])
        run.seconds["windows"] = time.perf_counter() - t0
    reported.all_done.wait(timeout=60)  # the last callbacks, after their futures' results
    if on_step is not None:
        on_step("diagnosing jobs", 0, 1)
    found, journal = jobs_future.result()
    if on_step is not None:
        on_step("diagnosing jobs", 1, 1)
    run.seconds["jobs"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    replay(journal, store)
    run.seconds["replay"] = time.perf_counter() - t1
    run.tasks["jobs"] = 1
    run.findings = found
    if components:
        if on_step is not None:
            on_step("component detectors", 0, 1)
        t2 = time.perf_counter()
        plan = _DetectorPlan(client, store.snapshot(), [d() for d in DETECTORS])
        run.episodes = analyze_components(store, detectors=plan.remote)  # type: ignore[arg-type]
        run.tasks["detectors"] = len(plan.remote) if plan.futures is not None else 0
        run.seconds["components"] = time.perf_counter() - t2
    run.seconds["total"] = time.perf_counter() - t0
    return run


# -- clusters ------------------------------------------------------------------------------


def slurm_cluster(
    workers: int,
    *,
    cores: int = 1,
    memory: str = "8GiB",
    walltime: str | None = None,
    queue: str | None = None,
    account: str | None = None,
) -> Any:
    """A dask-jobqueue SLURMCluster of `workers` single-process workers (one Slurm job
    each), started with this Python so they import the same iolens. Defaults not given
    here come from dask's `jobqueue.slurm` configuration."""
    import sys

    from dask_jobqueue import SLURMCluster

    kwargs: dict[str, Any] = {
        "cores": cores,
        "processes": 1,
        "memory": memory,
        "python": sys.executable,
        "name": "iolens-analyze",
    }
    for key, value in (("walltime", walltime), ("queue", queue), ("account", account)):
        if value is not None:
            kwargs[key] = value
    cluster = SLURMCluster(**kwargs)
    cluster.scale(workers)
    return cluster


def connect(
    address: str | None = None,
    *,
    slurm_workers: int | None = None,
    wait_s: float = 600.0,
    **slurm: Any,
) -> tuple[Any, Any]:
    """(client, cluster to close or None): an existing scheduler at `address`, or a new
    SLURMCluster with `slurm_workers` workers (waits for the first one to start)."""
    from distributed import Client

    if address:
        return Client(address, timeout=wait_s), None
    if not slurm_workers:
        raise ValueError("give a scheduler address or a number of Slurm workers")
    cluster = slurm_cluster(slurm_workers, **slurm)
    client = Client(cluster)
    client.wait_for_workers(1, timeout=wait_s)
    return client, cluster


__all__ = [
    "Chunk",
    "DistributedRun",
    "analyze_distributed",
    "connect",
    "detect_task",
    "jobs_task",
    "reports_task",
    "slurm_cluster",
    "worker_store",
]
