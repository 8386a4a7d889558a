"""Node basics from /proc: load, memory, CPU time, network bytes.

Every number is checked (ASCII digits, within a u64) and a file that is not what the kernel
writes is one InputError naming it and the line: a damaged capture replayed by `--root`
must not stop the agent's round with a ValueError (issue 19, found by the fuzz suite)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.errors import InputError
from iolens.parse._common import is_digits, parse_int, read_text, shown

_LOAD = re.compile(r"^\d+(?:\.\d+)?$", re.ASCII)

CPU_FIELDS = ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal")


class NodeSource:
    """What every node has: the denominator for "is this server busy or broken"."""

    name: ClassVar[str] = "node"

    def __init__(self, host: str, kind: str = "node") -> None:
        self.host = host
        self.kind = kind

    def collect(self, root: Path) -> Iterator[Reading]:
        proc = root / "proc"
        yield from self._loadavg(proc / "loadavg")
        yield from self._meminfo(proc / "meminfo")
        yield from self._stat(proc / "stat")
        yield from self._netdev(proc / "net" / "dev")

    def _gauge(self, metric: str, value: float) -> Reading:
        return Reading(self.kind, self.host, metric, value, counter=False)

    def _loadavg(self, path: Path) -> Iterator[Reading]:
        if not path.exists():
            return
        fields = read_text(path).split()
        if len(fields) < 3:
            raise InputError(str(path), "expected three load averages", 1)
        for name, value in zip(("load1", "load5", "load15"), fields, strict=False):
            if not _LOAD.match(value) or len(value) > 40:
                raise InputError(
                    str(path), f"{name}: expected a load like 0.52, got {shown(value)}", 1
                )
            yield self._gauge(name, float(value))

    def _meminfo(self, path: Path) -> Iterator[Reading]:
        if not path.exists():
            return
        wanted = {"MemTotal": "mem_total_bytes", "MemAvailable": "mem_available_bytes"}
        for n, line in enumerate(read_text(path).splitlines(), 1):
            key, _, rest = line.partition(":")
            if key in wanted:
                parts = rest.split()
                if not parts or not is_digits(parts[0]):
                    raise InputError(str(path), f"bad value for {key}", n)
                kib = parse_int(parts[0], str(path), n, key)
                yield self._gauge(wanted[key], float(kib * 1024))

    def _stat(self, path: Path) -> Iterator[Reading]:
        if not path.exists():
            return
        for n, line in enumerate(read_text(path).splitlines(), 1):
            if line.startswith("cpu "):
                values = line.split()[1:]
                for name, v in zip(CPU_FIELDS, values, strict=False):
                    jiffies = parse_int(v, str(path), n, f"cpu {name}")
                    yield Reading(self.kind, self.host, f"cpu_{name}_jiffies", float(jiffies))
                return

    def _netdev(self, path: Path) -> Iterator[Reading]:
        if not path.exists():
            return
        for n, line in enumerate(read_text(path).splitlines()[2:], 3):
            iface, _, rest = line.partition(":")
            fields = rest.split()
            if len(fields) < 9:
                raise InputError(str(path), "expected 16 counters per interface", n)
            iface = iface.strip()
            if iface == "lo":
                continue
            rx = parse_int(fields[0], str(path), n, f"{iface} rx bytes")
            tx = parse_int(fields[8], str(path), n, f"{iface} tx bytes")
            yield Reading(self.kind, self.host, f"net_{iface}_rx_bytes", float(rx))
            yield Reading(self.kind, self.host, f"net_{iface}_tx_bytes", float(tx))
