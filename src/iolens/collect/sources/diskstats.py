"""Block devices under a server (/proc/diskstats): operations, bytes, time per I/O, busy.

What a storage server's own statistics do not say: whether its disks are slow. Lustre's
`brw_stats` times the OST's disk I/Os; a MooseFS chunkserver times its own reads and
writes, page cache included (`moosefs`). The kernel's per-device counters time what
reached the device (the writeback of that cache included), so a disk that fails slow
shows here even when the server's own times are flattered by its cache.

Per device, kind `blockdev`, component `<host>:<device>` (whole devices only: the names
under /sys/block, when that directory is there; devices that never did an I/O are left out):

| metric | type | from (diskstats fields, Documentation/admin-guide/iostats.rst) |
|---|---|---|
| `read_ops`, `write_ops` | counter | reads / writes completed (1, 5) |
| `read_bytes`, `write_bytes` | counter | sectors read / written (3, 7) x 512 |
| `io_time_us` | mean per I/O | (ms reading + ms writing) x 1000 over the I/Os (4, 8) |
| `busy_ms` | counter (ms/s; / 1000 = utilisation) | ms doing I/O (10) |
| `in_flight` | gauge | I/Os in progress (9) |

Off unless configured: enable on the storage servers.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.errors import InputError
from iolens.parse._common import parse_int, read_text, shown

KIND = "blockdev"
SECTOR = 512


class DiskstatsSource:
    """Every whole block device of the node that has done I/O."""

    name: ClassVar[str] = "diskstats"
    DEFAULT_ENABLED: ClassVar[bool] = False
    SAMPLE: ClassVar[str] = (
        "# Block devices (/proc/diskstats): enable on storage servers\nenabled = false"
    )

    def __init__(self, host: str, kind: str | None = None) -> None:
        self.host = host

    def collect(self, root: Path) -> Iterator[Reading]:
        path = root / "proc" / "diskstats"
        if not path.exists():
            return
        block = root / "sys" / "block"
        whole = {p.name for p in block.iterdir()} if block.is_dir() else None
        src = str(path)
        for n, line in enumerate(read_text(path).splitlines(), 1):
            f = line.split()
            if not f:
                continue
            if len(f) < 14:
                raise InputError(src, f"expected at least 14 fields, got {len(f)}", n)
            dev = f[2]
            if whole is not None and dev not in whole:
                continue  # a partition: its disk is counted
            v = [parse_int(x, src, n, f"{shown(dev)} field {i + 1}") for i, x in enumerate(f[3:14])]
            reads, _rm, rsect, rms, writes, _wm, wsect, wms, inflight, busy, _weighted = v
            if reads + writes == 0:
                continue
            comp = f"{self.host}:{dev}"
            yield Reading(KIND, comp, "read_ops", float(reads))
            yield Reading(KIND, comp, "write_ops", float(writes))
            yield Reading(KIND, comp, "read_bytes", float(rsect * SECTOR))
            yield Reading(KIND, comp, "write_bytes", float(wsect * SECTOR))
            yield Reading(
                KIND,
                comp,
                "io_time_us",
                float((rms + wms) * 1000),
                counter=False,
                per=float(reads + writes),
            )
            yield Reading(KIND, comp, "busy_ms", float(busy))
            yield Reading(KIND, comp, "in_flight", float(inflight), counter=False)
