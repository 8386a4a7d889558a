"""Forwarder-daemon statistics (`docs/forwarder-format.md`): text -> typed records, and back.

A site's forwarding daemon (CIOD, DVS, an LWFS/IOFSL-like server, a FUSE forwarder) writes
its cumulative counters in Lustre's `stats` line format::

    snapshot_time             1736150400.000000000 secs.nsecs
    start_time                1736064000.000000000 secs.nsecs
    read_bytes                1853122 samples [bytes] 4096 4194304 3884510208000
    read                      1853122 samples [usecs] 41 91822 2032610012
    backend_read_bytes        901223 samples [bytes] 65536 4194304 3901120266240
    req_waittime              2389473 samples [usecs] 1 802211 481220110

Lines are split by :mod:`iolens.parse.lustre_stats`; this module gives them their meaning
and checks what the format requires (a snapshot time, the client-facing byte counters, the
unit and min/max/sum of every counter it knows, unique names). `render` is the inverse,
for the simulator and tests, and for a daemon's author as a reference.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from iolens.errors import InputError
from iolens.parse import lustre_stats
from iolens.parse._common import DEFAULT_SOURCE, read_text
from iolens.parse.lustre_stats import StatsCounter

__all__ = [
    "BACKEND_BYTES",
    "BACKEND_TIMES",
    "CLIENTS_DIR",
    "DATA_OPS",
    "QUEUE",
    "RUN_DIR",
    "STATS_FILE",
    "ForwarderStats",
    "Tally",
    "parse_file",
    "parse_stats",
    "render",
    "render_tree",
]

#: Where the daemon writes, relative to the agent's root: `<RUN_DIR>/<service>/stats`.
RUN_DIR = "run/iofwd"
STATS_FILE = "stats"
#: Per-client files: `<RUN_DIR>/<service>/clients/<client>/stats`.
CLIENTS_DIR = "clients"

#: Client-facing traffic, one sample per request; both are required.
TRAFFIC = ("read_bytes", "write_bytes")
#: The data operations among the timed ones; every other `[usecs]` name is metadata.
DATA_OPS = ("read", "write")
#: The daemon's own traffic to the parallel file system, and the time it took.
BACKEND_BYTES = ("backend_read_bytes", "backend_write_bytes")
BACKEND_TIMES = ("backend_read", "backend_write")
#: The request queue, sampled once per request as in Lustre's service stats: name -> unit.
QUEUE = {"req_waittime": "usecs", "req_qdepth": "reqs", "req_active": "reqs"}
#: Name prefixes kept for per-service counters (an error in a client file).
RESERVED_PREFIXES = ("backend_", "req_")

_UNIT_WIDTH = 25  # Lustre's `%-25s` name column


@dataclass(frozen=True, slots=True)
class Tally:
    """`count` events whose values (bytes, microseconds, queued requests) sum to `total`,
    the smallest being `low` and the largest `high` (0 while there are none)."""

    count: int = 0
    total: int = 0
    low: int = 0
    high: int = 0

    def __add__(self, other: Tally) -> Tally:
        if not other.count:
            return self
        if not self.count:
            return other
        return Tally(
            self.count + other.count,
            self.total + other.total,
            min(self.low, other.low),
            max(self.high, other.high),
        )

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass(frozen=True)
class ForwarderStats:
    """One `stats` file: a service's totals, or one client's share of them.

    `ops` holds every timed client operation by name (`read`, `write`, `open`, ...); a
    counter the daemon does not measure is absent (None / missing key), never zero."""

    snapshot_time: float
    start_time: float | None
    read_bytes: Tally
    write_bytes: Tally
    ops: Mapping[str, Tally] = field(default_factory=dict)
    backend_read_bytes: Tally | None = None
    backend_write_bytes: Tally | None = None
    backend_read: Tally | None = None
    backend_write: Tally | None = None
    req_waittime: Tally | None = None
    req_qdepth: Tally | None = None
    req_active: Tally | None = None

    @property
    def data_ops(self) -> Tally | None:
        """Service time of read and write requests together; None if neither is timed."""
        return _sum([t for n, t in self.ops.items() if n in DATA_OPS])

    @property
    def md_ops(self) -> Tally | None:
        """Service time of every other timed operation; None if none is timed."""
        return _sum([t for n, t in self.ops.items() if n not in DATA_OPS])


def _sum(tallies: list[Tally]) -> Tally | None:
    if not tallies:
        return None
    out = Tally()
    for t in tallies:
        out = out + t
    return out


# -- parsing ----------------------------------------------------------------------------------


def parse_stats(text: str, source: str = DEFAULT_SOURCE, *, client: bool = False) -> ForwarderStats:
    """Parse a service's `stats` file, or a client's (`client=True`: client-facing lines only).

    Raises InputError naming `source` and the line for anything the format forbids."""
    st = lustre_stats.parse_stats(text, source)
    last = max(1, len(text.splitlines()))
    if st.snapshot_time is None:
        raise InputError(source, "no snapshot_time line: when was this written?", 1)
    if st.epoch is not None and not 0 <= st.epoch <= st.snapshot_time:
        # a start after the snapshot (or before 1970) cannot be, and would render back as a
        # negative elapsed_time that no reader accepts (found by the fuzz suite, issue 19)
        raise InputError(
            source,
            f"counters start at {st.epoch:.9f}, after the snapshot at {st.snapshot_time:.9f}",
            1,
        )
    by: dict[str, StatsCounter] = {}
    for c in st.counters:
        if c.name in by:
            raise InputError(
                source, f"{c.name} given twice (first on line {by[c.name].line})", c.line
            )
        by[c.name] = c
    for name in TRAFFIC:
        if name not in by:
            raise InputError(
                source, f"no {name} line: every forwarder counts its clients' bytes", last
            )
    ops: dict[str, Tally] = {}
    for c in st.counters:
        if c.name.startswith(RESERVED_PREFIXES):
            if client:
                raise InputError(
                    source, f"{c.name} is a per-service counter; a client file has none", c.line
                )
        elif c.name not in TRAFFIC and c.unit == "usecs":
            ops[c.name] = _tally(c, "usecs", source)

    def opt(name: str, unit: str) -> Tally | None:
        # other req_*/backend_* names (Lustre's req_timeout, later additions) are ignored,
        # like any counter this version does not read
        return _tally(by[name], unit, source) if name in by else None

    return ForwarderStats(
        snapshot_time=st.snapshot_time,
        start_time=st.epoch,
        read_bytes=_tally(by["read_bytes"], "bytes", source),
        write_bytes=_tally(by["write_bytes"], "bytes", source),
        ops=ops,
        backend_read_bytes=opt("backend_read_bytes", "bytes"),
        backend_write_bytes=opt("backend_write_bytes", "bytes"),
        backend_read=opt("backend_read", "usecs"),
        backend_write=opt("backend_write", "usecs"),
        req_waittime=opt("req_waittime", "usecs"),
        req_qdepth=opt("req_qdepth", "reqs"),
        req_active=opt("req_active", "reqs"),
    )


def parse_file(path: str | Path, *, client: bool = False) -> ForwarderStats:
    """Read and parse a stats file; errors name `path`."""
    return parse_stats(read_text(path), str(path), client=client)


def _tally(c: StatsCounter, unit: str, source: str) -> Tally:
    """The counter as a Tally, once its unit and values are what the format says."""
    if c.unit != unit:
        raise InputError(source, f"{c.name}: unit must be [{unit}], got [{c.raw_unit}]", c.line)
    if c.sum is None or c.min is None or c.max is None:
        raise InputError(source, f"{c.name}: needs min, max and sum after the unit", c.line)
    if c.samples and c.min > c.max:
        raise InputError(source, f"{c.name}: min {c.min} is larger than max {c.max}", c.line)
    if not c.samples and c.sum:
        raise InputError(source, f"{c.name}: a sum of {c.sum} over 0 samples", c.line)
    return Tally(c.samples, c.sum, c.min, c.max)


# -- rendering --------------------------------------------------------------------------------


def render(stats: ForwarderStats) -> str:
    """The file a daemon writes for `stats`, in the layout Lustre uses (`%-25s %llu samples
    [%s] %llu %llu %llu`); `parse_stats(render(s))` gives `s` back."""
    lines = [_time_line("snapshot_time", stats.snapshot_time)]
    if stats.start_time is not None:
        lines.append(_time_line("start_time", stats.start_time))
        lines.append(_time_line("elapsed_time", stats.snapshot_time - stats.start_time))
    lines.append(_line("read_bytes", stats.read_bytes, "bytes"))
    lines.append(_line("write_bytes", stats.write_bytes, "bytes"))
    order = [n for n in DATA_OPS if n in stats.ops] + sorted(set(stats.ops) - set(DATA_OPS))
    lines += [_line(name, stats.ops[name], "usecs") for name in order]
    for name, unit in (
        ("backend_read_bytes", "bytes"),
        ("backend_write_bytes", "bytes"),
        ("backend_read", "usecs"),
        ("backend_write", "usecs"),
        *QUEUE.items(),
    ):
        tally = getattr(stats, name)
        if tally is not None:
            lines.append(_line(name, tally, unit))
    return "\n".join(lines) + "\n"


def render_tree(
    service: str,
    totals: ForwarderStats,
    clients: Mapping[str, ForwarderStats] | None = None,
    threads_max: int | None = None,
) -> dict[str, str]:
    """One service's files as {path relative to the agent's root: text}, ready to write
    into a sample folder for `iolens import lustre`."""
    base = f"{RUN_DIR}/{service}"
    out = {f"{base}/{STATS_FILE}": render(totals)}
    for name, stats in (clients or {}).items():
        out[f"{base}/{CLIENTS_DIR}/{name}/{STATS_FILE}"] = render(stats)
    if threads_max is not None:
        out[f"{base}/threads_max"] = f"{threads_max}\n"
    return out


def _line(name: str, t: Tally, unit: str) -> str:
    return f"{name:<{_UNIT_WIDTH}} {t.count} samples [{unit}] {t.low} {t.high} {t.total}"


def _time_line(name: str, seconds: float) -> str:
    return f"{name:<{_UNIT_WIDTH}} {seconds:.9f} secs.nsecs"
