"""Lustre "stats" files: obdfilter/osd stats, mdt md_stats, ost.OSS.* and mds.MDS.* service stats,
osc/mdc/llite/lwp client stats, exports.*.stats and ldlm pool/service stats.

All share one line format (FORMATS.md 1.1/1.2)::

    snapshot_time   1510782606.789180921 secs.nsecs      # secs.usecs before 2.x
    start_time      1704411148.063790068 secs.nsecs      # 2.14+
    elapsed_time    512933.788585696 secs.nsecs          # 2.14+
    <name>  <count> samples [<unit>] [<min> <max> <sum> [<sumsq>]]

Quirks handled here rather than in every caller: units renamed between versions (`usec` ->
`usecs`, `sec` -> `secs`, the 2.10 llite typo `regs` -> `reqs`) are normalised; duplicate
counter names are kept in order (2.10 obdfilter prints `statfs` twice) and merged only on
request; `sumsq` is an unbounded int because it exceeds 2^63 and silently wraps modulo 2^64 for
byte counters, so :attr:`StatsCounter.sumsq_reliable` says when it may be used.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
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

__all__ = [
    "MAX_NAME",
    "UNIT_ALIASES",
    "LustreStats",
    "StatsCounter",
    "merge_counters",
    "normalise_unit",
    "parse_file",
    "parse_stats",
]

#: Unit spellings that changed between Lustre versions, mapped to one name.
UNIT_ALIASES: dict[str, str] = {"usec": "usecs", "sec": "secs", "regs": "reqs"}

_HEADER_FIELDS = ("snapshot_time", "start_time", "elapsed_time")
#: Longer than any counter name Lustre prints (they are C identifiers of ~30 characters).
MAX_NAME = 128
_COUNTER = re.compile(
    r"^(?P<name>\S+)\s+(?P<count>\S+)\s+samples(?:\s+\[(?P<unit>[^\]]*)\])?(?P<rest>(?:\s+\S+)*)\s*$"
)
_HEADER = re.compile(
    r"^(?P<key>snapshot_time|start_time|elapsed_time):?\s+(?P<value>\S+)(?:\s+\(?"
    r"secs\.[nu]secs\)?)?\s*$"
)


def normalise_unit(unit: str) -> str:
    """One spelling per unit, so `[usec]` (2.10) and `[usecs]` (2.14) compare equal."""
    return UNIT_ALIASES.get(unit, unit)


@dataclass(frozen=True, slots=True)
class StatsCounter:
    """One counter line. `min`/`max`/`sum` exist only for avg-min-max counters, `sumsq` only
    for stddev counters; `line` is the 1-based line in the source, for error messages."""

    name: str
    samples: int
    unit: str
    raw_unit: str
    min: int | None = None
    max: int | None = None
    sum: int | None = None
    sumsq: int | None = None
    line: int = 0

    @property
    def sumsq_reliable(self) -> bool:
        """False when sumsq is absent, counts bytes (wraps modulo 2^64 in practice), or is
        provably wrapped (sumsq * samples < sum^2 cannot hold for true squares)."""
        if self.sumsq is None or self.sum is None:
            return False
        if self.unit == "bytes":
            return False
        return self.sumsq * self.samples >= self.sum * self.sum

    @property
    def mean(self) -> float | None:
        """sum / samples, e.g. mean request wait for `req_waittime`; None without data."""
        if self.sum is None or self.samples == 0:
            return None
        return self.sum / self.samples


@dataclass(frozen=True, slots=True)
class LustreStats:
    """A whole stats file. `counters` keeps file order and duplicates."""

    snapshot_time: float | None
    start_time: float | None
    elapsed_time: float | None
    counters: tuple[StatsCounter, ...]

    @property
    def epoch(self) -> float | None:
        """When the counters last started from zero (2.14+ only): a change means a reset."""
        return counter_epoch(self.start_time, self.snapshot_time, self.elapsed_time)

    def by_name(self) -> dict[str, StatsCounter]:
        """Counters keyed by name, duplicates merged (see :func:`merge_counters`)."""
        out: dict[str, StatsCounter] = {}
        for c in self.counters:
            out[c.name] = merge_counters(out[c.name], c) if c.name in out else c
        return out

    def get(self, name: str) -> StatsCounter | None:
        """The (merged) counter `name`, or None when this Lustre does not report it."""
        return self.by_name().get(name)


def merge_counters(a: StatsCounter, b: StatsCounter) -> StatsCounter:
    """Sum two lines of the same name: counts and sums add, min/max combine; sumsq adds only
    when both have it. The unit of the first line wins."""

    def add(x: int | None, y: int | None) -> int | None:
        return None if x is None or y is None else x + y

    def lo(x: int | None, y: int | None) -> int | None:
        vals = [v for v in (x, y) if v is not None]
        return min(vals) if vals else None

    def hi(x: int | None, y: int | None) -> int | None:
        vals = [v for v in (x, y) if v is not None]
        return max(vals) if vals else None

    return StatsCounter(
        name=a.name,
        samples=a.samples + b.samples,
        unit=a.unit,
        raw_unit=a.raw_unit,
        min=lo(a.min, b.min),
        max=hi(a.max, b.max),
        sum=add(a.sum, b.sum),
        sumsq=add(a.sumsq, b.sumsq),
        line=a.line,
    )


def parse_stats(text: str, source: str = DEFAULT_SOURCE, *, first_line: int = 1) -> LustreStats:
    """Parse one stats file. `first_line` is the line number of `text`'s first line in the
    source (non-1 when the text was cut out of `lctl get_param` output)."""
    headers: dict[str, float] = {}
    counters: list[StatsCounter] = []
    for lineno, raw in _numbered(text.splitlines(), first_line):
        line = raw.strip()
        if not line:
            continue
        m = _HEADER.match(line)
        if m:
            key = m["key"]
            if key in headers:
                raise InputError(source, f"{key} given twice", lineno)
            headers[key] = parse_seconds(m["value"], source, lineno, key)
            continue
        m = _COUNTER.match(line)
        if not m:
            raise InputError(
                source,
                f"not a stats line (want '<name> <n> samples [unit] ...'): {line[:80]!r}",
                lineno,
            )
        counters.append(_counter(m, source, lineno))
    return LustreStats(
        snapshot_time=headers.get("snapshot_time"),
        start_time=headers.get("start_time"),
        elapsed_time=headers.get("elapsed_time"),
        counters=tuple(counters),
    )


def parse_file(path: str | Path) -> LustreStats:
    """Read and parse a stats file; errors name `path`."""
    return parse_stats(read_text(path), str(path))


def _counter(m: re.Match[str], source: str, lineno: int) -> StatsCounter:
    name = m["name"]
    if len(name) > MAX_NAME:  # every message below names it: keep them one short line
        raise InputError(source, f"counter name {shown(name)} is not a Lustre counter", lineno)
    samples = parse_int(m["count"], source, lineno, f"{name} sample count")
    raw_unit = m["unit"] if m["unit"] is not None else ""
    nums = [parse_int(t, source, lineno, f"{name} value") for t in m["rest"].split()]
    if len(nums) not in (0, 3, 4):
        raise InputError(
            source, f"{name}: expected 0, 3 or 4 numbers after the unit, got {len(nums)}", lineno
        )
    mn, mx, total, sumsq = (nums + [None] * 4)[:4] if nums else (None, None, None, None)
    return StatsCounter(
        name=name,
        samples=samples,
        unit=normalise_unit(raw_unit),
        raw_unit=raw_unit,
        min=mn,
        max=mx,
        sum=total,
        sumsq=sumsq,
        line=lineno,
    )


def _numbered(lines: Iterable[str], first: int) -> Iterable[tuple[int, str]]:
    return enumerate(lines, start=first)
