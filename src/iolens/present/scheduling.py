"""Analyses on a timetable inside `iolens serve`: running jobs as their data grows, jobs
as they end, components hourly, then alerts (admins') and owner alerts (subscribers').

Beacon analyses each job once it finishes and screens components continuously; without
this, findings would wait for someone to ask. The server process owns the DuckDB store
(one writing process), so the scheduler is a thread of that process and follows the
ingest service's discipline: every use of the writer's connection happens under
`IngestService.lock`, the lock the group-commit writer holds while it loads batches. A
batch and an analysis therefore never interleave inside one connection; the lock is
taken per chunk of jobs, so ingest waits at most one chunk's analysis.

Which jobs: those whose scheduler end time is `settle_s` in the past (agents ship their
last samples up to an interval late) and that have no summary analysed after that point —
so a job the query API analysed while it was still running is analysed again once it
has ended. Components: every `components_every` seconds from `lookback_s` ago to the
newest sample, open-ended so an episode still abnormal at the end stays ongoing;
`analyze_components` re-examines an episode open at the window's start from its
beginning, so it keeps its start (and its alert key) rather than being cut in two.

Running jobs (`live_analysis.py`): every `live_pass_s` the running jobs whose data changed
are looked up; at most `live_jobs` of them, each at most once per `live_every` seconds,
are analysed in one hold of the lock. Owner alerts (`owner_alerts.py`) follow each pass
that can add findings, sending outside the lock like the admins' alerts.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from iolens.present.live_analysis import LiveTracker
from iolens.store.base import Store

if TYPE_CHECKING:
    from iolens.present.alerts import AlertsSection

log = logging.getLogger(__name__)

#: Jobs analysed per hold of the writer's lock.
CHUNK = 16


def utcnow() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


def ended_unanalyzed_jobs(store: Store, now: datetime, settle_s: float = 0.0) -> list[str]:
    """Jobs that ended by `now - settle_s` and have no summary from after that settling,
    less those whose analysis failed on the data they still have (`analysis_errors`)."""
    from iolens.store.queries import failing_jobs

    settle = timedelta(seconds=settle_s)
    todo = (
        store.query(
            """
            SELECT j.job_id FROM jobs j LEFT JOIN job_summaries s USING (job_id)
            WHERE j."end" IS NOT NULL AND j."end" <= ?
              AND (s.job_id IS NULL OR s.analyzed IS NULL OR s.analyzed < j."end" + ?)
            ORDER BY j."end", j.job_id
            """,
            [now - settle, settle],
        )
        .column("job_id")
        .to_pylist()
    )
    failing = failing_jobs(store, todo)  # recorded, and no new data since: not every minute
    return [j for j in todo if j not in failing]


def analyze_since(store: Store, since: datetime, now: datetime | None = None) -> dict[str, Any]:
    """`iolens analyze --since`: jobs that ended in [since, now], then the components from
    `since` to the newest sample (open-ended, as the server runs them)."""
    from iolens.analyze.components import analyze_components
    from iolens.analyze.pipeline import analyze_jobs

    now = now or utcnow()
    ids = (
        store.query(
            'SELECT job_id FROM jobs WHERE "end" >= ? AND "end" <= ? ORDER BY "end", job_id',
            [since, now],
        )
        .column("job_id")
        .to_pylist()
    )
    found = analyze_jobs(store, ids) if ids else []
    episodes = analyze_components(store, since)
    return {"jobs": ids, "findings": found, "anomalies": episodes}


@dataclass
class SchedulerStats:
    jobs_analyzed: int = 0
    component_runs: int = 0
    alert_checks: int = 0
    alerts_sent: int = 0
    alerts_failed: int = 0
    live_analyzed: int = 0
    owner_alerts_sent: int = 0
    owner_alerts_failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    last_error: str | None = None


class AnalysisScheduler:
    """A daemon thread running due analyses; `tick()` is one pass, for tests and reuse."""

    def __init__(
        self,
        store: Store,
        lock: threading.Lock,
        *,
        analyze_every: float = 60.0,
        components_every: float = 3600.0,
        alerts: AlertsSection | None = None,
        alerts_every: float = 60.0,
        settle_s: float = 30.0,
        lookback_s: float | None = None,
        registry: Any | None = None,  # prometheus CollectorRegistry of the ingest service
        now: Callable[[], datetime] = utcnow,
        live_every: float = 30.0,
        live_pass_s: float = 5.0,
        live_jobs: int = 8,
        live_window_s: float | None = None,
        owner_alerts: bool = True,
    ) -> None:
        self.store = store
        self.lock = lock
        self.analyze_every = analyze_every
        self.components_every = components_every
        self.alerts = alerts
        self.alerts_every = alerts_every
        self.settle_s = settle_s
        self.lookback = timedelta(
            seconds=lookback_s if lookback_s is not None else max(2 * components_every, 3600)
        )
        self.now = now
        self.live_every = live_every
        # looking for running jobs with new data is cheap; analysing them is gated per job
        self.live_pass_s = min(live_pass_s, live_every) if live_every > 0 else 0.0
        self.live_jobs = live_jobs
        self.live_window_s = live_window_s
        self.owner_alerts = owner_alerts
        self.live = LiveTracker()
        self._clock = 0.0
        self.stats = SchedulerStats()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._due: dict[str, float] = {}
        self.broken: dict[str, str] = {}  # job id -> why its analysis failed
        self._metrics = _Metrics(registry) if registry is not None else None

    @property
    def enabled(self) -> bool:
        return bool(
            self.analyze_every > 0
            or self.components_every > 0
            or self.alerts
            or self.live_every > 0
        )

    # -- the thread ---------------------------------------------------------------------
    def start(self) -> None:
        if not self.enabled or self._thread is not None:
            return
        self._thread = threading.Thread(target=self._run, name="iolens-scheduler", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 60.0) -> None:
        """Ask the thread to finish (after the analysis it is in) and wait for it."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick(time.monotonic())
            pending = [t for t in self._due.values() if t > 0]
            wait = max(0.05, min(pending) - time.monotonic()) if pending else 1.0
            self._stop.wait(min(wait, 1.0))

    # -- one pass -----------------------------------------------------------------------
    def tick(self, clock: float) -> None:
        """Run every task that is due at monotonic time `clock`; each failure is logged and
        counted, never raised (the next period tries again)."""
        self._clock = clock
        tasks: list[tuple[str, float, Callable[[], object]]] = [
            ("live", self.live_pass_s, self.analyze_running_jobs),
            ("jobs", self.analyze_every, self.analyze_ended_jobs),
            ("components", self.components_every, self.analyze_components),
        ]
        if self.alerts is not None:
            tasks.append(("alerts", self.alerts_every, self.check_alerts))
        if self.owner_alerts:
            tasks.append(("owner_alerts", self.alerts_every, self.check_owner_alerts))
        for name, every, task in tasks:
            if every <= 0 or self._stop.is_set():
                continue
            if clock < self._due.get(name, 0.0):
                continue
            self._due[name] = clock + every
            try:
                task()
            except Exception as exc:
                self.stats.failures[name] = self.stats.failures.get(name, 0) + 1
                self.stats.last_error = f"{name}: {type(exc).__name__}: {exc}"
                if self._metrics:
                    self._metrics.failures.labels(name).inc()
                log.warning("scheduled %s analysis failed: %s", name, exc, exc_info=True)

    def analyze_running_jobs(self) -> list[str]:
        """Re-analyse running jobs with new data (bounded: see the module docstring), then
        send the owner alerts their findings call for."""
        from iolens.present.live_analysis import WINDOW_S, analyze_running, running_stamps

        with self.lock:
            stamps = running_stamps(self.store)
        self.live.forget_except(set(stamps))
        todo = self.live.due(stamps, self._clock, self.live_every, self.live_jobs)
        todo = [j for j in todo if j not in self.broken]
        if not todo:
            return []
        window = self.live_window_s if self.live_window_s is not None else WINDOW_S
        # The history check's first use imports scikit-learn (seconds on a busy node):
        # done here, outside the lock, so ingest never waits for an import.
        import sklearn.cluster  # noqa: F401

        try:
            with self.lock:
                analyze_running(self.store, todo, window)
        except Exception:
            todo = [j for j in todo if self._analyze_running_one(j, window)]
        self.live.done({j: stamps[j] for j in todo}, self._clock)
        self.stats.live_analyzed += len(todo)
        if self._metrics:
            self._metrics.runs.labels("live").inc()
        if self.owner_alerts:
            self.check_owner_alerts()
        return todo

    def _analyze_running_one(self, job_id: str, window: float) -> bool:
        from iolens.present.live_analysis import analyze_running

        try:
            with self.lock:
                analyze_running(self.store, [job_id], window)
        except Exception as exc:
            self.broken[job_id] = f"{type(exc).__name__}: {exc}"
            log.warning("live analysis of job %s failed; not retried: %s", job_id, exc)
            return False
        return True

    def check_owner_alerts(self) -> None:
        """Alerts to the owners who subscribed, for their jobs' new findings."""
        from iolens.present.owner_alerts import check_owner_alerts

        result = check_owner_alerts(self.store, self.alerts, self.now(), guard=lambda: self.lock)
        self.stats.owner_alerts_sent += result.sent
        self.stats.owner_alerts_failed += result.failed

    def analyze_ended_jobs(self) -> list[str]:
        """Analyse the jobs that have ended since the last pass, CHUNK per lock hold."""
        from iolens.analyze.pipeline import analyze_jobs

        with self.lock:
            todo = ended_unanalyzed_jobs(self.store, self.now(), self.settle_s)
        todo = [j for j in todo if j not in self.broken]
        done: list[str] = []
        for i in range(0, len(todo), CHUNK):
            if self._stop.is_set():
                break
            chunk = todo[i : i + CHUNK]
            try:
                with self.lock:
                    analyze_jobs(self.store, chunk)
            except Exception:
                # One job's bad data must not stall every job after it: retry one by one
                # and leave the failing ones alone until the server restarts.
                chunk = [j for j in chunk if self._analyze_one(j)]
            done += chunk
            if self._metrics:
                self._metrics.jobs.inc(len(chunk))
        self.stats.jobs_analyzed += len(done)
        if self._metrics:
            self._metrics.runs.labels("jobs").inc()
        if done and self.owner_alerts:
            self.check_owner_alerts()
        return done

    def _analyze_one(self, job_id: str) -> bool:
        from iolens.analyze.pipeline import analyze_jobs

        try:
            with self.lock:
                analyze_jobs(self.store, [job_id])
        except Exception as exc:
            self.broken[job_id] = f"{type(exc).__name__}: {exc}"
            log.warning("analysis of job %s failed; not retried: %s", job_id, exc, exc_info=True)
            return False
        return True

    def analyze_components(self) -> int:
        """Component detectors over the recent window, then alerts for what they found."""
        from iolens.analyze.components import analyze_components

        with self.lock:
            episodes = analyze_components(self.store, self.now() - self.lookback)
        self.stats.component_runs += 1
        if self._metrics:
            self._metrics.runs.labels("components").inc()
        if self.alerts is not None:
            self.check_alerts()
        return episodes

    def check_alerts(self) -> None:
        from iolens.present.alerts import check_alerts

        if self.alerts is None:
            return
        result = check_alerts(self.store, self.alerts, self.now(), guard=lambda: self.lock)
        self.stats.alert_checks += 1
        self.stats.alerts_sent += result.sent
        self.stats.alerts_failed += result.failed
        if self._metrics:
            self._metrics.runs.labels("alerts").inc()
            for a in result.attempts:
                self._metrics.alerts.labels(a.channel, "ok" if a.ok else "failed").inc()


class _Metrics:
    """The scheduler's counters on the server's /metrics."""

    def __init__(self, registry: Any) -> None:
        from prometheus_client import Counter

        self.jobs = Counter(
            "iolens_analysis_jobs", "Jobs analysed by the scheduler", registry=registry
        )
        self.runs = Counter(
            "iolens_analysis_runs",
            "Scheduled analysis passes, by task",
            ["task"],
            registry=registry,
        )
        self.failures = Counter(
            "iolens_analysis_failures",
            "Scheduled analysis passes that failed, by task",
            ["task"],
            registry=registry,
        )
        self.alerts = Counter(
            "iolens_alerts",
            "Alert attempts, by channel and result",
            ["channel", "result"],
            registry=registry,
        )


def start_for_service(service: Any, **options: Any) -> AnalysisScheduler:
    """A running scheduler on an `IngestService`'s store, lock and metrics registry."""
    sched = AnalysisScheduler(service.store, service.lock, registry=service.registry, **options)
    sched.start()
    return sched
