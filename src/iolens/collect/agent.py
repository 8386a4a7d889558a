"""The node agent: run every source each round, rate the counters, ship one batch.

A round never fails as a whole: each source runs on its own, its errors are logged the
first time they occur (not every round) and counted, and the agent reports per-source
self-metrics (duration, success, readings) alongside the data. Counter state is kept in
the spool directory, so `--once` runs from cron still produce rates.

A Lustre server's agent also knows part of the topology: the targets it reads are the
ones this host serves (and the fabric source knows which switch each port is cabled to).
Its batch carries them as `components` rows (an OST with this host as its OSS, an MDT
with this host as its MDS, and the host itself) whenever the set changes, without peaks:
rows merge by key on load, so a site's peaks stay.

Batches hold `Columns` (plain lists), not Arrow tables: the agent runs without pyarrow or
numpy (`iolens[agent]`), and the wire format ships its tables as compressed JSON.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from iolens.collect.base import BatchSource, Reading, Source
from iolens.collect.rates import RateKeeper
from iolens.model.batch import Batch
from iolens.model.rows import NAMES, Columns

log = logging.getLogger(__name__)

#: Metrics that also feed the wide `server_samples` table the analyses use.
STANDARD = ("read_bytes", "write_bytes", "read_ops", "write_ops", "md_ops")
STANDARD_GAUGES = ("wait_us", "service_us", "queue_len", "active_threads")
#: Target kinds the Lustre server sources read, and the kind of the host serving them.
SERVED_BY = {"ost": "oss", "mdt": "mds"}
#: Ports the fabric source places (`Reading.parent` set): the kind of the switch they are on.
CABLED_TO = {"switch_port": "switch", "ib_port": "switch"}
PARENT_KIND = SERVED_BY | CABLED_TO


@dataclass
class SourceHealth:
    runs: int = 0
    failures: int = 0
    readings: int = 0
    last_duration_s: float = 0.0
    errors_seen: set[str] = field(default_factory=set)


class Agent:
    def __init__(
        self,
        host: str,
        root: Path,
        sources: list[Source],
        state_file: Path | None = None,
        clock: Callable[[], float] = time.time,
        batch_sources: list[BatchSource] | None = None,
    ) -> None:
        self.host = host
        self.root = root
        self.sources = sources
        self.batch_sources = batch_sources or []
        self.clock = clock
        self.state_file = state_file
        self.rates = RateKeeper()
        self.last_round: float | None = None  # gauge-only components borrow its interval
        self.health = {s.name: SourceHealth() for s in [*sources, *self.batch_sources]}
        self.served: dict[str, tuple[str, str]] = {}  # targets reported: id -> (kind, host)
        self._state_error = False  # the last save failed (logged once)
        self._load_state()

    # -- counter state across runs ------------------------------------------------------
    def _load_state(self) -> None:
        if self.state_file is None or not self.state_file.exists():
            return
        try:
            raw = json.loads(self.state_file.read_text())
            if isinstance(raw, dict):  # {"last_round": t, "counters": [[key, value]...]}
                self.last_round = raw.get("last_round")
                raw = raw["counters"]
            self.rates.last = {tuple(k): tuple(v) for k, v in raw}  # type: ignore[misc]
        except (ValueError, TypeError, KeyError):
            log.warning("ignoring unreadable counter state %s", self.state_file)

    def _save_state(self) -> None:
        """Counter state to the spool directory (0600); a full disk costs only the state
        file (the counters stay in memory; logged once), never the round."""
        if self.state_file is None:
            return
        tmp = self.state_file.with_suffix(".tmp")
        counters = [[list(k), list(v)] for k, v in self.rates.last.items()]
        text = json.dumps({"last_round": self.last_round, "counters": counters})
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            tmp.replace(self.state_file)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            if not self._state_error:
                log.error("cannot save counter state %s: %s", self.state_file, exc)
            self._state_error = True
            return
        self._state_error = False

    # -- one round ----------------------------------------------------------------------
    def collect_round(self) -> Batch:
        now = self.clock()
        readings: list[Reading] = []
        for source in self.sources:
            h = self.health[source.name]
            started = time.perf_counter()
            h.runs += 1
            try:
                got = list(source.collect(self.root))
            except Exception as exc:  # one source must never stop the others
                h.failures += 1
                self._log_once(source.name, h, exc)
                got = []
            h.last_duration_s = time.perf_counter() - started
            h.readings += len(got)
            readings += got
            readings += self._self_metrics(source.name, h, ok=len(h.errors_seen) == 0 or bool(got))
        for bsource in self.batch_sources:  # their health as of the previous round
            h = self.health[bsource.name]
            readings += self._self_metrics(bsource.name, h, ok=h.failures == 0)
        batch = self._to_batch(readings, now)
        self._save_state()
        return batch

    def collect_batches(self) -> Iterator[tuple[Batch, Callable[[], None]]]:
        """Ready-made batches (tracer files), each with its `done`; failures as above."""
        for source in self.batch_sources:
            h = self.health[source.name]
            h.runs += 1
            try:
                for batch, done in source.batches(self.root):
                    h.readings += batch.rows() if batch.trace is None else 1
                    yield batch, done
            except Exception as exc:
                h.failures += 1
                self._log_once(source.name, h, exc)

    def _log_once(self, name: str, h: SourceHealth, exc: Exception) -> None:
        message = f"{type(exc).__name__}: {exc}"
        if message not in h.errors_seen:
            h.errors_seen.add(message)
            log.error("source %s failed: %s", name, message)

    def _self_metrics(self, name: str, h: SourceHealth, ok: bool) -> list[Reading]:
        def g(metric: str, value: float) -> Reading:
            return Reading("agent", self.host, f"source_{name}_{metric}", value, counter=False)

        return [
            g("duration_seconds", h.last_duration_s),
            g("success", float(ok)),
            g("readings_total", float(h.readings)),
            g("failures_total", float(h.failures)),
        ]

    @staticmethod
    def _born(r: Reading, prev_round: float | None) -> float | None:
        """The previous round's time, if `r` is a counter born since then (`Reading.fresh`)."""
        if r.fresh is None or prev_round is None:
            return None
        # -inf: the file does not say when; first seen since the last round means born since
        return prev_round if r.fresh == float("-inf") or r.fresh >= prev_round else None

    def _interval_mean(
        self, r: Reading, now: float, born: float | None = None
    ) -> tuple[float, float] | None:
        """Mean per event over the interval: delta(sum) / delta(count); None if no events."""
        key = (r.kind, r.component, r.metric, r.job_id)
        total = self.rates.rate(key, r.value, now, born=born)
        events = self.rates.rate(
            (*key[:2], f"{r.metric}#per", r.job_id), r.per or 0.0, now, born=born
        )
        if total is None or events is None or events[0] <= 0:
            return None
        return total[0] / events[0], total[1]

    def _to_batch(self, readings: list[Reading], now: float) -> Batch:
        prev_round = self.last_round
        round_interval = None if prev_round is None else now - prev_round
        self.last_round = now
        rows: dict[str, list[object]] = {n: [] for n in NAMES["metrics"]}
        wide: dict[tuple[str, str, str | None], dict[str, float]] = {}
        intervals: dict[tuple[str, str, str | None], float] = {}
        ts = int(now * 1_000_000)
        for r in readings:
            interval: float | None = None
            value = r.value
            at = now
            if r.window is not None:
                shipped = self._windowed(r)
                if shipped is None:
                    continue
                value, interval, at = shipped
            elif r.per is not None:
                mean = self._interval_mean(r, now, self._born(r, prev_round))
                if mean is None:
                    continue
                value, interval = mean
            elif r.counter:
                key = (r.kind, r.component, r.metric, r.job_id)
                rated = self.rates.rate(key, r.value, now, r.bits, self._born(r, prev_round))
                if rated is None or (r.sparse and rated[0] == 0):
                    continue
                value, interval = rated
            for name, v in (
                ("ts", at),
                ("interval_s", interval),
                ("kind", r.kind),
                ("component_id", r.component),
                ("job_id", r.job_id),
                ("metric", r.metric),
                ("value", value),
            ):
                rows[name].append(v)
            key = (r.kind, r.component, r.job_id, at)
            if r.metric in STANDARD and interval is not None:
                wide.setdefault(key, {})[r.metric] = round(value * interval)
                intervals[key] = interval
            elif r.metric in STANDARD_GAUGES:
                wide.setdefault(key, {})[r.metric] = value
                if interval is not None:
                    intervals.setdefault(key, interval)
        stamps: dict[float, datetime] = {}

        def stamp(t: float) -> datetime:
            if t not in stamps:
                stamps[t] = datetime.fromtimestamp(t, UTC).replace(tzinfo=None)
            return stamps[t]

        rows["ts"] = [stamp(t) for t in rows["ts"]]
        samples = [
            {
                "ts": stamp(k[3]),
                "interval_s": intervals.get(k, round_interval),
                "kind": k[0],
                "component_id": k[1],
                "job_id": k[2],
                **vals,
            }
            for k, vals in wide.items()
            if k in intervals or round_interval is not None
        ]
        targets = {
            r.component: (r.kind, r.parent or self.host)
            for r in readings
            if (r.kind in SERVED_BY or (r.kind in CABLED_TO and r.parent)) and r.job_id is None
        }
        return Batch(
            source=f"agent:{self.host}",
            key=f"agent:{self.host}:{ts}",
            metrics=Columns("metrics", rows),
            server_samples=Columns.from_rows("server_samples", samples),
            components=served_rows(self.served, targets),
        )

    def _windowed(self, r: Reading) -> tuple[float, float, float] | None:
        """(value, interval, end) of a reading over its own window (`Reading.window`), or
        None if that window was shipped before (its end is kept with the counter state, so
        a restarted agent does not ship it twice) or holds no event."""
        start, end = r.window or (0.0, 0.0)
        interval = end - start
        key = (r.kind, r.component, f"{r.metric}#window", r.job_id)
        last = self.rates.last.get(key)
        if interval <= 0 or (last is not None and end <= last[0]):
            return None
        self.rates.last[key] = (end, end)
        if r.per is not None:
            return (r.value / r.per, interval, end) if r.per > 0 else None
        return (r.value / interval if r.counter else r.value), interval, end


def served_rows(
    served: dict[str, tuple[str, str]], seen: dict[str, tuple[str, str]]
) -> Columns | None:
    """`components` rows of the targets this agent reports (`seen`: id -> (kind, serving
    host), the host being the agent's own unless the source names another; for fabric
    ports, the switch they are on), when they changed since the last batch (a target
    mounted or moved, a cable moved), else None; `served` (what was reported before) is
    updated."""
    if all(served.get(c) == v for c, v in seen.items()):
        return None
    served.update(seen)
    hosts = sorted({(host, PARENT_KIND[k]) for k, host in seen.values()})
    rows = [{"component_id": h, "kind": k, "parent": None} for h, k in hosts] + [
        {"component_id": c, "kind": k, "parent": host} for c, (k, host) in sorted(seen.items())
    ]
    return Columns.from_rows("components", rows)
