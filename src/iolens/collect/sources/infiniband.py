"""InfiniBand / Omni-Path port counters from sysfs (`/sys/class/infiniband/<dev>/ports/<n>/`).

The fabric is the layer between compute, forwarding and storage nodes; its per-port bytes,
congestion (`port_xmit_wait`) and error counters tell a slow link from a slow server.
Parsing is :mod:`iolens.parse.infiniband`; this file only names the metrics.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.parse.infiniband import DATA_WORD_BYTES, SysfsPort, read_sysfs_tree, saturated

KIND = "ib_port"

#: sysfs counter -> (metric, multiplier). Data counters count 4-byte words, in sysfs as
#: in perfquery, whether the driver reads the 32-bit or the extended 64-bit MAD.
RENAMED: dict[str, tuple[str, int]] = {
    "port_xmit_data": ("tx_bytes", DATA_WORD_BYTES),
    "port_rcv_data": ("rx_bytes", DATA_WORD_BYTES),
    "port_xmit_packets": ("tx_packets", 1),
    "port_rcv_packets": ("rx_packets", 1),
}

#: Not counters, though they sit in `hw_counters/` (mlx5 `lifespan` is the cache period, ms).
HW_NOT_COUNTERS = frozenset({"lifespan"})


class InfinibandSource:
    """Every port of every HCA: one `ib_port` component `<host>:<dev>:<port>` each.

    Counters other than data and packets keep their sysfs names, lower-cased
    (`symbol_error`, `link_downed`, `port_rcv_errors`, `port_xmit_discards`,
    `port_xmit_wait`, `vl15_dropped`, ...); `hw_counters/` entries get a `hw_` prefix.
    A legacy 32-bit counter stuck at 2^32-1 yields no reading (its rate would be a made-up
    zero); `saturated_counters` counts them per port so the gap is visible.
    """

    name: ClassVar[str] = "infiniband"

    def __init__(self, host: str, kind: str | None = None) -> None:
        # `kind` is the node's role, accepted for the uniform source constructor. Ports are
        # components of their own kind whatever the node does, so it changes nothing here.
        self.host = host
        self.role = kind

    def collect(self, root: Path) -> Iterator[Reading]:
        for port in read_sysfs_tree(root):
            yield from self._port(port)

    def _port(self, port: SysfsPort) -> Iterator[Reading]:
        component = f"{self.host}:{port.device}:{port.port}"
        stuck = 0
        counters = [(n, v) for n, v in port.counters.items()]
        counters += [
            (f"hw_{n}", v) for n, v in port.hw_counters.items() if n not in HW_NOT_COUNTERS
        ]
        for name, value in counters:
            if saturated(value):
                stuck += 1
                continue
            metric, scale = RENAMED.get(name, (name.lower(), 1))
            yield Reading(KIND, component, metric, float(value * scale))
        yield Reading(KIND, component, "saturated_counters", float(stuck), counter=False)
        if port.state is not None:
            up = 1.0 if port.state == "ACTIVE" else 0.0
            yield Reading(KIND, component, "link_up", up, counter=False)
        if port.rate_gbps is not None:
            yield Reading(KIND, component, "rate_gbps", port.rate_gbps, counter=False)
