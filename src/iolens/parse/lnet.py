"""LNet's global counters: `/proc/sys/lnet/stats` (Lustre <= 2.10) or debugfs
`/sys/kernel/debug/lnet/stats` (later releases), FORMATS.md 1.6.

One line of 11 integers::

    msgs_alloc msgs_max errors send_count recv_count route_count drop_count
    send_length recv_length route_length drop_length

`msgs_alloc` is the number of LNet messages in flight now (a queue-depth gauge) and
`msgs_max` its high-water mark; the rest are cumulative. `*_length` are bytes. `route_*`
is traffic this node forwarded for others (non-zero only on an LNet router); LNet does not
know whether a message carried file reads or writes, so neither does this record.
(`lnetctl stats show` prints the same counters as YAML; that CLI form is not parsed here.)
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

from iolens.errors import InputError
from iolens.parse._common import DEFAULT_SOURCE, parse_int, read_text

__all__ = ["FIELDS", "LnetStats", "parse_stats", "parse_stats_file"]


@dataclass(frozen=True, slots=True)
class LnetStats:
    """The 11 fields of the stats line, in file order."""

    msgs_alloc: int
    msgs_max: int
    errors: int
    send_count: int
    recv_count: int
    route_count: int
    drop_count: int
    send_length: int
    recv_length: int
    route_length: int
    drop_length: int


#: Field names in the order the kernel prints them.
FIELDS: tuple[str, ...] = tuple(f.name for f in fields(LnetStats))


def parse_stats(text: str, source: str = DEFAULT_SOURCE) -> LnetStats:
    """Parse the stats line. Exactly 11 fields: a different count means a format this code
    does not know, and reading it positionally would mislabel counters."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise InputError(source, "empty LNet stats file", 1)
    if len(lines) > 1:
        raise InputError(source, "LNet stats is one line; found more", lines[1][0])
    lineno, line = lines[0]
    tokens = line.split()
    if len(tokens) != len(FIELDS):
        raise InputError(
            source,
            f"expected {len(FIELDS)} integers ({' '.join(FIELDS)}), got {len(tokens)}",
            lineno,
        )
    values = [
        parse_int(tok, source, lineno, name) for tok, name in zip(tokens, FIELDS, strict=True)
    ]
    return LnetStats(*values)


def parse_stats_file(path: str | Path) -> LnetStats:
    """Read and parse a captured stats file; errors name `path`."""
    return parse_stats(read_text(path), str(path))
