"""Server processes (/proc/PID/io, /proc/PID/stat): the I/O and CPU of named daemons.

A storage server's counters say what it served; its process says what it cost: the bytes
it asked the kernel for (`rchar`/`wchar`, cache hits included) against those that reached
the disks (`read_bytes`/`write_bytes`), its system calls, and its CPU time. A daemon that
is stopped, starved or throttled (a fail-slow server) does less per second of the same
demand. Which processes: `names`, their command names (`comm`), e.g. MooseFS's
`mfschunkserver` and `mfsmaster`; every process of each name is reported, kind
`process`, component `<host>:<comm>:<pid>` (a restarted daemon is a new component).

| metric | type | from |
|---|---|---|
| `rchar`, `wchar`, `syscr`, `syscw`, `read_bytes`, `write_bytes` | counter | /proc/PID/io |
| `cpu_seconds` | counter (s/s: cores busy) | /proc/PID/stat utime + stime / clock ticks |

Off unless configured (`names`); reading another user's /proc/PID/io needs root.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.errors import InputError
from iolens.parse._common import parse_int, shown

KIND = "process"
IO_FIELDS = ("rchar", "wchar", "syscr", "syscw", "read_bytes", "write_bytes")
DEFAULT_NAMES = ("mfschunkserver", "mfsmaster")


class ProcioSource:
    """The I/O and CPU counters of every process whose command name is in `names`."""

    name: ClassVar[str] = "procio"
    DEFAULT_ENABLED: ClassVar[bool] = False
    OPTIONS: ClassVar[tuple[str, ...]] = ("names",)
    SAMPLE: ClassVar[str] = (
        "# I/O and CPU of named server daemons (/proc/PID/io, stat): enable on servers\n"
        "enabled = false\n"
        'names = ["mfschunkserver", "mfsmaster"]'
    )

    def __init__(
        self, host: str, kind: str | None = None, names: list[str] | tuple[str, ...] = DEFAULT_NAMES
    ) -> None:
        if isinstance(names, str) or not all(isinstance(n, str) and n for n in names):
            raise InputError("sources.procio.names", f"expected a list of names, got {names!r}")
        self.host = host
        self.names = frozenset(names)
        self.tick = float(os.sysconf("SC_CLK_TCK"))

    def collect(self, root: Path) -> Iterator[Reading]:
        proc = root / "proc"
        if not proc.is_dir():
            return
        for d in proc.iterdir():
            if not d.name.isdigit():
                continue
            try:
                comm = (d / "comm").read_text(errors="replace").strip()
                if comm not in self.names:
                    continue
                io = (d / "io").read_text()
                stat = (d / "stat").read_text()
            except OSError:  # gone, or not ours to read
                continue
            yield from self._process(comm, d, io, stat)

    def _process(self, comm: str, d: Path, io: str, stat: str) -> Iterator[Reading]:
        comp = f"{self.host}:{comm}:{d.name}"
        src = str(d / "io")
        seen = {}
        for n, line in enumerate(io.splitlines(), 1):
            key, _, value = line.partition(":")
            if key in IO_FIELDS:
                seen[key] = parse_int(value.strip(), src, n, key)
        for key in IO_FIELDS:
            if key in seen:
                yield Reading(KIND, comp, key, float(seen[key]))
        # the command name may hold spaces and parentheses: fields start after the last ')'
        fields = stat.rpartition(")")[2].split()
        if len(fields) < 13:
            raise InputError(
                str(d / "stat"), f"expected 13+ fields after the name, got {shown(stat)}"
            )
        ticks = parse_int(fields[11], str(d / "stat"), 1, "utime") + parse_int(
            fields[12], str(d / "stat"), 1, "stime"
        )
        yield Reading(KIND, comp, "cpu_seconds", ticks / self.tick)
