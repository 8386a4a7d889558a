"""`/metrics/site`: the monitored state in Prometheus' exposition format.

A custom `prometheus_client` collector: every scrape asks for a `monitored.Snapshot`,
which is computed at most once per `cache_s` (Prometheus servers of an HA pair, Grafana's
"explore" and a curl all scrape; the store is read once for them all). `METRICS` declares
every family with its help text and labels: the collector emits only those, and
`docs/monitoring.md` and the Grafana dashboards' test read the same table.

The server's own counters (batches, analysis passes, alerts) stay on `/metrics`; this is a
separate registry so that public endpoint never carries site data.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from pydantic import BaseModel, ConfigDict, Field

from iolens.present.monitored import Snapshot, snapshot
from iolens.store.base import Store

log = logging.getLogger(__name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class MetricsConfig(BaseModel):
    """The `[web.metrics]` table of `iolens serve --web-config FILE`."""

    model_config = ConfigDict(extra="forbid")

    token_file: Path | None = Field(
        default=None,
        description="File of bearer tokens (one per line) that may read /metrics/site and "
        "nothing else; the file Prometheus reads as `credentials_file`. Admins' tokens work "
        "too.",
    )
    top_jobs: int = Field(
        default=20,
        ge=0,
        le=1000,
        description="Jobs with their own series: the N busiest by bytes/s and the N busiest "
        'by metadata ops/s (at most 2N); the rest add up into job_id="_other".',
    )
    cache_s: float = Field(
        default=5.0, ge=0, le=300, description="Seconds a snapshot of the store is reused."
    )
    max_age_s: float = Field(
        default=120.0,
        gt=0,
        description="A component whose latest sample ended longer than this before the "
        "newest sample is not exported (stopped reporting, or idle).",
    )
    recent_s: float = Field(
        default=900.0,
        ge=0,
        description="Anomaly episodes that ended within this many seconds still count.",
    )


@dataclass(frozen=True)
class Spec:
    """One exported family: name, help text, labels and what it is drawn from."""

    name: str
    help: str
    labels: tuple[str, ...]


_C = ("kind", "component")
_J = ("job_id", "user")

#: Per component: (metric, ComponentNow attribute, help).
COMPONENT_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("iolens_component_read_bytes_per_second", "read_bps", "Bytes read per second"),
    ("iolens_component_write_bytes_per_second", "write_bps", "Bytes written per second"),
    ("iolens_component_read_requests_per_second", "read_iops", "Read requests per second"),
    ("iolens_component_write_requests_per_second", "write_iops", "Write requests per second"),
    (
        "iolens_component_metadata_ops_per_second",
        "md_ops",
        "Metadata requests per second (MDT md_stats; OST object operations)",
    ),
    (
        "iolens_component_service_time_seconds",
        "service_s",
        "Mean service time of a request (absent when no request was served)",
    ),
    ("iolens_component_wait_time_seconds", "wait_s", "Mean time a request waited in the queue"),
    ("iolens_component_queue_length", "queue_len", "Mean number of requests queued"),
    ("iolens_component_active_threads", "active_threads", "Mean busy service threads"),
    (
        "iolens_component_peak_bytes_per_second",
        "peak_bw",
        "Benchmarked peak bandwidth (site topology)",
    ),
    (
        "iolens_component_peak_requests_per_second",
        "peak_ops",
        "Benchmarked peak requests per second (site topology)",
    ),
    (
        "iolens_component_sample_interval_seconds",
        "interval_s",
        "Length of the sample the values come from",
    ),
)

#: Per job: (metric, JobNow attribute, help).
JOB_GAUGES: tuple[tuple[str, str, str], ...] = (
    ("iolens_job_read_bytes_per_second", "read_bps", "Bytes the job read per second (OSTs)"),
    ("iolens_job_write_bytes_per_second", "write_bps", "Bytes the job wrote per second (OSTs)"),
    ("iolens_job_read_requests_per_second", "read_iops", "Read requests per second (OSTs)"),
    ("iolens_job_write_requests_per_second", "write_iops", "Write requests per second (OSTs)"),
    ("iolens_job_metadata_ops_per_second", "md_ops", "Metadata requests per second (MDTs)"),
)

METRICS: tuple[Spec, ...] = (
    *(Spec(n, h, _C) for n, _, h in COMPONENT_GAUGES),
    Spec(
        "iolens_component_last_sample_timestamp_seconds",
        "End of the component's latest sample, Unix time",
        _C,
    ),
    *(Spec(n, h, _J) for n, _, h in JOB_GAUGES),
    Spec("iolens_jobs_doing_io", "Jobs with I/O in the latest samples (before the top-N cut)", ()),
    Spec(
        "iolens_anomalies_active",
        "Component anomaly episodes open or recently ended",
        ("anomaly", "kind", "component", "severity"),
    ),
    Spec("iolens_samples_newest_timestamp_seconds", "End of the newest sample, Unix time", ()),
    Spec("iolens_site_scrape_duration_seconds", "Time to read the store for this snapshot", ()),
    Spec("iolens_site_scrape_success", "1 if the store was read, 0 if reading it failed", ()),
)
SPECS = {s.name: s for s in METRICS}


def _unix(t: datetime) -> float:
    """A stored (naive UTC) time as Unix seconds."""
    return t.replace(tzinfo=UTC).timestamp()


def _family(name: str) -> GaugeMetricFamily:
    spec = SPECS[name]
    return GaugeMetricFamily(name, spec.help, labels=list(spec.labels))


def families(snap: Snapshot) -> list[GaugeMetricFamily]:
    """The snapshot as metric families, in `METRICS` order (families without samples too,
    so `# HELP`/`# TYPE` always document them)."""
    out = {s.name: _family(s.name) for s in METRICS}
    for c in snap.components:
        labels = [c.kind, c.component_id]
        for name, attr, _ in COMPONENT_GAUGES:
            value = getattr(c, attr)
            if value is not None:
                out[name].add_metric(labels, float(value))
        out["iolens_component_last_sample_timestamp_seconds"].add_metric(labels, _unix(c.ts))
    for j in snap.jobs:
        for name, attr, _ in JOB_GAUGES:
            out[name].add_metric([j.job_id, j.user], float(getattr(j, attr)))
    out["iolens_jobs_doing_io"].add_metric([], float(snap.jobs_busy))
    for a in snap.anomalies:
        labels = [a.kind, a.component_kind, a.component_id, a.severity]
        out["iolens_anomalies_active"].add_metric(labels, float(a.episodes))
    if snap.newest is not None:
        out["iolens_samples_newest_timestamp_seconds"].add_metric([], _unix(snap.newest))
    return list(out.values())


Reader = Callable[[], AbstractContextManager[Store]]


@dataclass(frozen=True)
class _Read:
    """One read of the store: the snapshot and how the read went."""

    snap: Snapshot
    ok: bool
    took_s: float
    at: float  # time.monotonic() when read


class SiteCollector(Collector):
    """Reads the store at scrape time, at most once per `cache_s`."""

    def __init__(self, reader: Reader, config: MetricsConfig | None = None) -> None:
        self.reader = reader
        self.config = config or MetricsConfig()
        self._lock = threading.Lock()
        self._last: _Read | None = None
        self._hint: datetime | None = None

    def current(self) -> _Read:
        """The cached read, redone when older than `cache_s`; on a store error an empty
        snapshot and `ok` False (never stale values as current)."""
        with self._lock:
            last = self._last
            if last is not None and time.monotonic() - last.at < self.config.cache_s:
                return last
            t0 = time.perf_counter()
            cfg = self.config
            try:
                with self.reader() as store:
                    snap = snapshot(
                        store,
                        max_age_s=cfg.max_age_s,
                        recent_s=cfg.recent_s,
                        top_jobs=cfg.top_jobs,
                        hint=self._hint,
                    )
                self._hint = snap.newest or self._hint
                ok = True
            except Exception as exc:  # the store's trouble must not break the scrape
                if last is None or last.ok:
                    log.warning("reading the store for /metrics/site failed: %s", exc)
                snap, ok = Snapshot(), False
            self._last = _Read(snap, ok, time.perf_counter() - t0, time.monotonic())
            return self._last

    def collect(self) -> Iterator[GaugeMetricFamily]:
        read = self.current()
        fams = families(read.snap)
        for f in fams:
            if f.name == "iolens_site_scrape_duration_seconds":
                f.add_metric([], read.took_s)
            elif f.name == "iolens_site_scrape_success":
                f.add_metric([], 1.0 if read.ok else 0.0)
        yield from fams


def site_registry(collector: SiteCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return registry


def exposition(registry: CollectorRegistry) -> bytes:
    return generate_latest(registry)


__all__ = [
    "CONTENT_TYPE",
    "METRICS",
    "MetricsConfig",
    "SiteCollector",
    "Spec",
    "exposition",
    "families",
    "site_registry",
]
