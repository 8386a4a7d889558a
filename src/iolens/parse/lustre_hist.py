"""Lustre histogram files: `brw_stats` (obdfilter/osd-*) and client `osc.*`/`mdc.*.rpc_stats`.

Both print a timestamp header, optional `name: value` gauges (rpc_stats: RPCs in flight,
pending pages), then sections, each a column-title line, a section-title line ending in
`<unit> % cum %`, and bucket lines `<bucket>: <n> <pct> <cum%> | <n> <pct> <cum%>`
(FORMATS.md 1.4/1.5). Percentages are derived data and dropped; bucket labels keep their
printed form (`1K`) and also get a numeric lower bound (1024). `mdc.*.rpc_stats` has a single
`modify` column, so the number of columns is read, not assumed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from iolens.errors import InputError
from iolens.parse._common import DEFAULT_SOURCE, parse_int, parse_seconds, read_text, shown

__all__ = [
    "HistBucket",
    "Histogram",
    "HistogramFile",
    "bucket_value",
    "parse_brw_stats",
    "parse_file",
    "parse_histograms",
    "parse_rpc_stats",
]

_TIME = re.compile(
    r"^(?P<key>snapshot_time|start_time|elapsed_time):\s+(?P<v>\S+)"
    r"(?:\s+\(?secs\.[nu]secs\)?)?\s*$"
)
_SECTION = re.compile(r"^(?P<title>\S.*?)\s+(?P<unit>\S+)\s+%\s+cum\s+%")
# ASCII digits only: '٣' is a \d to `re`, and int() then reads it as 3 (issue 19)
_BUCKET = re.compile(r"^(?P<label>\d+[KMGT]?):\s+(?P<rest>.*)$", re.ASCII)
_GAUGE = re.compile(r"^(?P<key>[A-Za-z][A-Za-z _/]*?):\s+(?P<v>\d+)\s*$", re.ASCII)
_COLUMN_WORDS = {"read", "write", "modify"}
_SUFFIX = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


@dataclass(frozen=True, slots=True)
class HistBucket:
    """One bucket: printed label, its numeric lower bound, and a count per column."""

    label: str
    lower: int
    counts: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Histogram:
    """One section, e.g. title `pages per bulk r/w`, unit `rpcs`, columns (`read`, `write`)."""

    title: str
    unit: str
    columns: tuple[str, ...]
    buckets: tuple[HistBucket, ...]

    def column(self, name: str) -> dict[str, int]:
        """Bucket label -> count for one column (`read`, `write` or `modify`)."""
        i = self.columns.index(name)
        return {b.label: b.counts[i] for b in self.buckets}


@dataclass(frozen=True, slots=True)
class HistogramFile:
    """A whole brw_stats or rpc_stats file."""

    snapshot_time: float | None
    start_time: float | None
    elapsed_time: float | None
    gauges: tuple[tuple[str, int], ...]
    histograms: tuple[Histogram, ...]

    def section(self, title: str) -> Histogram | None:
        """The section with this title, or None when this version does not print it."""
        return next((h for h in self.histograms if h.title == title), None)


def bucket_value(label: str) -> int:
    """`1K` -> 1024, `4M` -> 4194304, `32` -> 32 (binary suffixes, as Lustre prints them)."""
    m = re.fullmatch(r"(\d+)([KMGT]?)", label)
    if not m:
        raise ValueError(f"bad bucket label {label!r}")
    return int(m[1]) * _SUFFIX[m[2]]


def parse_histograms(
    text: str, source: str = DEFAULT_SOURCE, *, first_line: int = 1
) -> HistogramFile:
    """Parse brw_stats or rpc_stats text (they share the layout)."""
    times: dict[str, float] = {}
    gauges: list[tuple[str, int]] = []
    hists: list[Histogram] = []
    columns: tuple[str, ...] | None = None
    title: str | None = None
    unit = ""
    sect_cols: tuple[str, ...] = ()
    buckets: list[HistBucket] = []

    def close() -> None:
        if title is not None:
            hists.append(Histogram(title, unit, sect_cols, tuple(buckets)))

    for lineno, raw in enumerate(text.splitlines(), start=first_line):
        line = raw.strip()
        if not line:
            continue
        m = _TIME.match(line)
        if m:
            times[m["key"]] = parse_seconds(m["v"], source, lineno, m["key"])
            continue
        words = [w for w in line.split() if w != "|"]
        if words and all(w in _COLUMN_WORDS for w in words):
            columns = tuple(words)
            continue
        m = _SECTION.match(line)
        if m:
            close()
            title, unit, buckets = m["title"], m["unit"], []
            ngroups = line.count("|") + 1
            sect_cols = columns if columns and len(columns) == ngroups else _default(ngroups)
            columns = None
            continue
        m = _BUCKET.match(line)
        if m and title is not None:
            buckets.append(_bucket(m["label"], m["rest"], len(sect_cols), source, lineno))
            continue
        m = _GAUGE.match(line)
        if m and title is None:
            key = m["key"].strip()
            gauges.append((key, parse_int(m["v"], source, lineno, key)))
            continue
        raise InputError(source, f"not a histogram line: {line[:80]!r}", lineno)
    close()
    return HistogramFile(
        snapshot_time=times.get("snapshot_time"),
        start_time=times.get("start_time"),
        elapsed_time=times.get("elapsed_time"),
        gauges=tuple(gauges),
        histograms=tuple(hists),
    )


#: Names for readers of a specific file; the format is the same.
parse_brw_stats = parse_histograms
parse_rpc_stats = parse_histograms


def parse_file(path: str | Path) -> HistogramFile:
    """Read and parse a brw_stats/rpc_stats file; errors name `path`."""
    return parse_histograms(read_text(path), str(path))


def _default(n: int) -> tuple[str, ...]:
    return ("read", "write") if n == 2 else tuple(f"col{i}" for i in range(n))


def _bucket(label: str, rest: str, ncols: int, source: str, lineno: int) -> HistBucket:
    # a u64 count of the unit the suffix names (a 5,000-digit label made int() raise)
    parse_int(label.rstrip("KMGT"), source, lineno, "bucket label")
    groups = rest.split("|")
    if len(groups) != ncols:
        raise InputError(
            source, f"bucket {label}: expected {ncols} column(s), got {len(groups)}", lineno
        )
    counts = []
    for g in groups:
        toks = g.split()
        if len(toks) != 3:
            raise InputError(
                source, f"bucket {label}: expected '<n> <pct> <cum%>', got {shown(g)}", lineno
            )
        counts.append(parse_int(toks[0], source, lineno, f"bucket {label} count"))
    return HistBucket(label, bucket_value(label), tuple(counts))
