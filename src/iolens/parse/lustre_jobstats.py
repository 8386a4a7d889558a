"""Lustre jobstats: `obdfilter.*.job_stats` (OST) and `mdt.*.job_stats` (MDT).

Almost YAML (FORMATS.md 1.3), so it is parsed line by line instead of with a YAML loader::

    job_stats:
    - job_id:          "SLURM_JOB10:0:es18kxe-co-client"      # quoted in 2.14+ when needed
      snapshot_time:   1723114647.887515895 secs.nsecs        # bare integer before 2.12
      start_time:      1723102025.057286226 secs.nsecs        # 2.14+
      elapsed_time:    12622.830229669 secs.nsecs             # 2.14+
      write_bytes:     { samples: 861, unit: bytes, min: 24576, max: 16777216, sum: 11025514496,
                         sumsq: 166242808078794752, hist: { 32K: 1, 64K: 1 } }

Job ids are taken verbatim after `job_id:` (procname_uid ids like `vim.0`, ids with `:`, `=`,
spaces or `#`); only a surrounding pair of quotes is removed. Old formats have no sumsq/hist
and `unit: reqs` event counters. Entries age out after `job_cleanup_interval`, so a missing
job is not a reset; :attr:`JobStats.epoch` (2.14+) is what changes on a reset.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from iolens.errors import InputError
from iolens.parse._common import (
    DEFAULT_SOURCE,
    counter_epoch,
    parse_int,
    parse_seconds,
    read_text,
    shown,
)
from iolens.parse.lustre_stats import MAX_NAME, normalise_unit

__all__ = ["JobCounter", "JobStats", "parse_file", "parse_job_id", "parse_job_stats"]

_ENTRY = re.compile(r"^-\s+job_id:\s?(?P<id>.*)$")
_TIME = re.compile(
    r"^\s+(?P<key>snapshot_time|start_time|elapsed_time):\s+(?P<v>\S+)(?:\s+secs\.[nu]secs)?\s*$"
)
_OP = re.compile(r"^\s+(?P<op>[A-Za-z0-9_]+):\s+\{(?P<body>.*)\}\s*$")
_HIST = re.compile(r",?\s*hist:\s*\{(?P<h>[^}]*)\}")
_SCALAR = re.compile(r"^\s+(?P<key>[A-Za-z0-9_]+):\s*(?P<v>.*)$")


@dataclass(frozen=True, slots=True)
class JobCounter:
    """One op of one job. `hist` is the 2.14+ I/O-size histogram: (bucket label, count)."""

    name: str
    samples: int
    unit: str
    raw_unit: str
    min: int | None = None
    max: int | None = None
    sum: int | None = None
    sumsq: int | None = None
    hist: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True, slots=True)
class JobStats:
    """All counters of one job on one target; `line` is where its `- job_id:` line is."""

    job_id: str
    snapshot_time: float | None
    start_time: float | None
    elapsed_time: float | None
    counters: tuple[JobCounter, ...]
    line: int

    @property
    def epoch(self) -> float | None:
        """When this job's counters started (2.14+); a change means they were reset."""
        return counter_epoch(self.start_time, self.snapshot_time, self.elapsed_time)

    def by_name(self) -> dict[str, JobCounter]:
        """Counters keyed by op name (names are unique within a job entry)."""
        return {c.name: c for c in self.counters}


def parse_job_id(raw: str) -> str:
    """The job id as printed, minus one pair of surrounding quotes (2.14+ quotes ids that
    contain YAML-special characters, with `\\"`/`\\\\` escapes inside double quotes)."""
    v = raw.strip()
    if len(v) >= 2 and v[0] == v[-1] == '"':
        return re.sub(r"\\(.)", r"\1", v[1:-1])
    if len(v) >= 2 and v[0] == v[-1] == "'":
        return v[1:-1].replace("''", "'")
    return v


def parse_job_stats(
    text: str, source: str = DEFAULT_SOURCE, *, first_line: int = 1
) -> list[JobStats]:
    """Parse a job_stats file; an empty file or a bare `job_stats:` gives []."""
    jobs: list[JobStats] = []
    cur: _Entry | None = None
    for lineno, raw in enumerate(text.splitlines(), start=first_line):
        if not raw.strip():
            continue
        if raw.rstrip() in ("job_stats:", "job_stats: []"):
            continue
        m = _ENTRY.match(raw)
        if m:
            if cur is not None:
                jobs.append(cur.build())
            job_id = parse_job_id(m["id"])
            if not job_id:
                raise InputError(source, "empty job_id", lineno)
            cur = _Entry(job_id, lineno)
            continue
        if cur is None:
            raise InputError(
                source, f"expected 'job_stats:' or '- job_id:', got {raw[:80]!r}", lineno
            )
        m = _TIME.match(raw)
        if m:
            cur.times[m["key"]] = parse_seconds(m["v"], source, lineno, m["key"])
            continue
        m = _OP.match(raw)
        if m:
            cur.counters.append(_op(m["op"], m["body"], source, lineno))
            continue
        if _SCALAR.match(raw):  # an entry field this version added that we do not use
            continue
        raise InputError(source, f"not a job_stats line: {raw[:80]!r}", lineno)
    if cur is not None:
        jobs.append(cur.build())
    return jobs


@dataclass
class _Entry:
    job_id: str
    line: int
    times: dict[str, float] = field(default_factory=dict)
    counters: list[JobCounter] = field(default_factory=list)

    def build(self) -> JobStats:
        return JobStats(
            job_id=self.job_id,
            snapshot_time=self.times.get("snapshot_time"),
            start_time=self.times.get("start_time"),
            elapsed_time=self.times.get("elapsed_time"),
            counters=tuple(self.counters),
            line=self.line,
        )


def parse_file(path: str | Path) -> list[JobStats]:
    """Read and parse a job_stats file; errors name `path`."""
    return parse_job_stats(read_text(path), str(path))


def _op(name: str, body: str, source: str, lineno: int) -> JobCounter:
    if len(name) > MAX_NAME:
        raise InputError(source, f"counter name {shown(name)} is not a Lustre counter", lineno)
    hist: list[tuple[str, int]] = []
    hm = _HIST.search(body)
    if hm:
        body = body[: hm.start()] + body[hm.end() :]
        for item in hm["h"].split(","):
            if not item.strip():
                continue
            k, sep, v = item.partition(":")
            if not sep:
                raise InputError(source, f"{name}: bad hist item {shown(item.strip())}", lineno)
            hist.append((k.strip(), parse_int(v.strip(), source, lineno, f"{name} hist")))
    fields: dict[str, str] = {}
    for item in body.split(","):
        if not item.strip():
            continue
        k, sep, v = item.partition(":")
        if not sep:
            raise InputError(
                source, f"{name}: expected 'key: value', got {shown(item.strip())}", lineno
            )
        fields[k.strip()] = v.strip()
    if "samples" not in fields:
        raise InputError(source, f"{name}: no 'samples' field", lineno)

    def num(key: str) -> int | None:
        return parse_int(fields[key], source, lineno, f"{name} {key}") if key in fields else None

    raw_unit = fields.get("unit", "")
    return JobCounter(
        name=name,
        samples=parse_int(fields["samples"], source, lineno, f"{name} samples"),
        unit=normalise_unit(raw_unit),
        raw_unit=raw_unit,
        min=num("min"),
        max=num("max"),
        sum=num("sum"),
        sumsq=num("sumsq"),
        hist=tuple(hist),
    )
