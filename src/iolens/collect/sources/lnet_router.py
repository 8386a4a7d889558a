"""LNet router traffic: Lustre's own I/O forwarding layer.

An LNet router moves Lustre traffic between the compute fabric and the storage fabric,
the role Beacon's forwarding nodes play; a slow or saturated router slows every job behind
it. LNet's global stats (`/proc/sys/lnet/stats` up to Lustre 2.10, debugfs
`/sys/kernel/debug/lnet/stats` after) count messages and bytes sent, received, routed and
dropped. They do not say whether a message carried a file read or a write, so this source
reports `route_bytes`, never `read_bytes`/`write_bytes`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.parse.lnet import LnetStats, parse_stats_file

#: Where each Lustre generation keeps the file, under the agent's root; the first found wins.
PATHS = (Path("proc/sys/lnet/stats"), Path("sys/kernel/debug/lnet/stats"))

#: Parsed field -> metric, for the cumulative counters.
COUNTERS: dict[str, str] = {
    "route_length": "route_bytes",
    "route_count": "route_msgs",
    "send_length": "send_bytes",
    "send_count": "send_msgs",
    "recv_length": "recv_bytes",
    "recv_count": "recv_msgs",
    "drop_length": "drop_bytes",
    "drop_count": "drop_msgs",
    "errors": "errors",
}


class LnetRouterSource:
    """One component per node: kind = the node's role (default `forwarder`), id = host.

    Every Lustre node has these counters; on a client or server the `route_*` ones stay at
    zero and `send_*`/`recv_*` are its own Lustre traffic. `msgs_alloc` (messages in flight)
    is also reported as `queue_len`, the queue-depth gauge the analyses read.
    """

    name: ClassVar[str] = "lnet_router"
    #: The runner passes the node's configured role (even its default, `node`: a node not
    #: declared a router is not labelled one); `forwarder` only when no role is given at all.
    takes_role: ClassVar[bool] = True

    def __init__(self, host: str, kind: str | None = None) -> None:
        self.host = host
        self.kind = kind or "forwarder"

    def collect(self, root: Path) -> Iterator[Reading]:
        path = next((root / p for p in PATHS if (root / p).is_file()), None)
        if path is None:
            return
        stats = parse_stats_file(path)
        yield from self._readings(stats)

    def _readings(self, stats: LnetStats) -> Iterator[Reading]:
        for field, metric in COUNTERS.items():
            # message counts are 32-bit in the kernel (lnet_counters) and wrap on a busy
            # router within hours; byte counts are 64-bit
            bits = 64 if field.endswith("_length") else 32
            value = float(getattr(stats, field))
            yield Reading(self.kind, self.host, metric, value, bits=bits)
        for metric, value in (
            ("msgs_alloc", stats.msgs_alloc),
            ("queue_len", stats.msgs_alloc),
            ("msgs_max", stats.msgs_max),
        ):
            yield Reading(self.kind, self.host, metric, float(value), counter=False)
