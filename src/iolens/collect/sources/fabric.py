"""The InfiniBand fabric seen from its switches: `ibnetdiscover` then `perfquery -x`.

A host's own ports (`infiniband` source, sysfs) say what that host sent; only the switches'
counters say how traffic spread over the fabric and where it waited for credits (Beacon
4.4's switch imbalance, the K computer's T_wait). One agent on any host of the fabric runs
(docs/sources.md, "InfiniBand fabric"):

    ibnetdiscover --ports                       (every `rediscover_s`: the cabling)
    perfquery -l -x -G <switch GUID> <p1,p2..>  (every round: each switch's cabled ports)

What lands where (parsing is :mod:`iolens.parse.infiniband`):

- each cabled switch port -> `switch_port` `<switch>:<port>` (its parent: the `switch`):
  `tx_bytes`/`rx_bytes` (PortXmitData/PortRcvData x 4), `tx_packets`/`rx_packets`,
  `port_xmit_wait` (ticks with data but no credit), the error counters in sysfs names
  (`symbol_error`, `link_downed`, `port_xmit_discards`, ...), and gauges `rate_gbps` (the
  link's width x speed) and `peer_host` (1: an HCA is at the other end, 0: a switch);
- each HCA port cabled to a switch -> `ib_port` `<host>:<device>:<port>` (the infiniband
  source's id when the node description is `<host> <device>`) with its switch as parent
  and its `rate_gbps`; its counters when `perfquery` output for its LID is given (replay).

Counters are 64-bit (extended PortCounters); the agent rates them, so a counter reset
(`perfquery -R`, a switch reboot) is read as a restart and never as negative traffic.
Without the tools the source fails with a message naming them, once, and the agent's
other sources go on. A captured tree replays through the same code: `<root>/fabric/
ibnetdiscover.out` (kept from the first folder that has one) and `<root>/fabric/
perfquery/*.out`; `iolens import fabric` takes one `ibnetdiscover.out` beside the folders.
"""

from __future__ import annotations

import logging
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.errors import InputError
from iolens.parse._common import read_text
from iolens.parse.infiniband import (
    DATA_WORD_BYTES,
    FabricPort,
    PerfqueryPort,
    fabric_ports,
    parse_ibnetdiscover,
    parse_perfquery,
    saturated,
    switch_lids,
)

log = logging.getLogger(__name__)

CAPTURE_DIR = "fabric"
TOPOLOGY_FILE = "ibnetdiscover.out"
COUNTERS_DIR = "perfquery"
TIMEOUT_S = 60.0
TOOLS_HINT = "install infiniband-diags (ibnetdiscover, perfquery) or disable [sources.fabric]"

#: perfquery name -> (metric, multiplier); the rest become snake_case names.
RENAMED: dict[str, tuple[str, int]] = {
    "PortXmitData": ("tx_bytes", DATA_WORD_BYTES),
    "PortRcvData": ("rx_bytes", DATA_WORD_BYTES),
    "PortXmitPkts": ("tx_packets", 1),
    "PortRcvPkts": ("rx_packets", 1),
    "PortUnicastXmitPkts": ("unicast_xmit_packets", 1),
    "PortUnicastRcvPkts": ("unicast_rcv_packets", 1),
    "PortMulticastXmitPkts": ("multicast_xmit_packets", 1),
    "PortMulticastRcvPkts": ("multicast_rcv_packets", 1),
    "SymbolErrorCounter": ("symbol_error", 1),
    "LinkErrorRecoveryCounter": ("link_error_recovery", 1),
    "LinkDownedCounter": ("link_downed", 1),
    "VL15Dropped": ("vl15_dropped", 1),
    "QP1Dropped": ("qp1_dropped", 1),
}


def metric_name(counter: str) -> tuple[str, int]:
    """(metric, multiplier) of a perfquery counter: `PortXmitWait` -> `port_xmit_wait`."""
    if counter in RENAMED:
        return RENAMED[counter]
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", counter).lower(), 1


class FabricSource:
    """Every cabled switch port of the fabric, from one host with infiniband-diags."""

    name: ClassVar[str] = "fabric"
    #: Off unless configured: one host per fabric asks every switch.
    DEFAULT_ENABLED: ClassVar[bool] = False
    OPTIONS: ClassVar[tuple[str, ...]] = ("ibnetdiscover", "perfquery", "rediscover_s")
    SAMPLE: ClassVar[str] = (
        "# Ask every InfiniBand switch for its port counters (ibnetdiscover, perfquery -x):\n"
        "# enable on one host per fabric\n"
        "enabled = false\n"
        'ibnetdiscover = "ibnetdiscover"\n'
        'perfquery = "perfquery"\n'
        "# Seconds between re-reading the cabling\n"
        "rediscover_s = 600"
    )

    def __init__(
        self,
        host: str,
        kind: str | None = None,
        ibnetdiscover: str = "ibnetdiscover",
        perfquery: str = "perfquery",
        rediscover_s: float = 600.0,
        topology: Path | None = None,
        counters: str | None = None,
    ) -> None:
        """`topology`/`counters`: for replay, an `ibnetdiscover` output file and the folder,
        relative to each sample, holding its `perfquery` outputs (default: `fabric/...`)."""
        self.host = host
        self.ibnetdiscover = ibnetdiscover
        self.perfquery = perfquery
        try:
            self.rediscover_s = float(rediscover_s)
        except (TypeError, ValueError):
            self.rediscover_s = 0.0
        if not self.rediscover_s > 0:
            raise InputError("sources.fabric.rediscover_s", f"must be > 0, got {rediscover_s!r}")
        self.topology_file = topology
        self.counters_dir = counters
        self.ports: list[FabricPort] = []
        self.switches: dict[int, tuple[str, str]] = {}  # LID -> (name, GUID)
        self._discovered: float | None = None
        self._failed: set[str] = set()  # switches whose perfquery failed (logged once)
        self._discovered_now = False  # cabling read this round: name the HCA ports' switch

    # -- fetching: live through the tools, or from a captured tree -------------------------
    def _run(self, cmd: list[str]) -> str:
        try:
            res = subprocess.run(
                cmd, capture_output=True, text=True, timeout=TIMEOUT_S, check=False
            )
        except FileNotFoundError:
            raise InputError(cmd[0], f"not found: {TOOLS_HINT}") from None
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(" ".join(cmd), f"cannot run: {exc}") from None
        if res.returncode != 0:
            tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
            raise InputError(" ".join(cmd), f"exit {res.returncode}: {tail[0]}")
        return res.stdout

    def _discover(self, text: str, source: str) -> None:
        links = parse_ibnetdiscover(text, source)
        self.ports = fabric_ports(links)
        self.switches = switch_lids(links)
        self._discovered_now = True

    def _live(self) -> list[PerfqueryPort]:
        now = time.monotonic()
        if self._discovered is None or now - self._discovered >= self.rediscover_s:
            try:
                cmd = [self.ibnetdiscover, "--ports"]
                self._discover(self._run(cmd), " ".join(cmd))
                self._discovered = now
            except InputError:
                if not self.ports:
                    raise
                log.warning("ibnetdiscover failed; keeping the cabling found before")
        by_switch: dict[str, list[int]] = {}
        for p in self.ports:
            if p.kind == "switch_port":
                by_switch.setdefault(p.guid, []).append(p.port)
        got: list[PerfqueryPort] = []
        for guid, nums in sorted(by_switch.items()):
            ports = ",".join(str(n) for n in sorted(nums))
            cmd = [self.perfquery, "-l", "-x", "-G", guid, ports]
            try:
                got += parse_perfquery(self._run(cmd), " ".join(cmd))
                self._failed.discard(guid)
            except InputError as exc:  # one unreachable switch must not cost the others
                if guid not in self._failed:
                    log.warning("fabric: %s", exc)
                self._failed.add(guid)
        return got

    def _captured(self, root: Path) -> list[PerfqueryPort] | None:
        base = root / CAPTURE_DIR
        topo = self.topology_file or base / TOPOLOGY_FILE
        counters = root / self.counters_dir if self.counters_dir else base / COUNTERS_DIR
        if not counters.is_dir() or (self.counters_dir is None and not base.is_dir()):
            return None
        if topo.is_file():
            self._discover(read_text(topo), str(topo))
        elif not self.ports:
            raise InputError(str(topo), "no ibnetdiscover --ports output to name the ports")
        got: list[PerfqueryPort] = []
        for path in sorted(counters.glob("*.out")):
            if path.name != TOPOLOGY_FILE:
                got += parse_perfquery(read_text(path), str(path))
        return got

    # -- readings -------------------------------------------------------------------------
    def collect(self, root: Path) -> Iterator[Reading]:
        if root.resolve() == Path("/") and self.counters_dir is None:
            counters = self._live()
        else:
            captured = self._captured(root)
            if captured is None:
                return  # a captured tree without a fabric capture: absent, not an error
            counters = captured
        by_lid = {(p.lid, p.port): p for p in self.ports}
        # HCA ports (a fabric's thousands) only when the cabling was read: their rows carry
        # which switch each is on, and do not change between discoveries.
        fresh, self._discovered_now = self._discovered_now, False
        for p in self.ports:
            if p.kind == "ib_port" and not fresh:
                continue
            if p.rate_gbps is not None:
                yield Reading(
                    p.kind, p.component, "rate_gbps", p.rate_gbps, counter=False, parent=p.switch
                )
            if p.kind == "switch_port":
                yield Reading(
                    p.kind, p.component, "peer_host", float(p.peer_host), False, parent=p.switch
                )
        for block in counters:
            if block.kind != "extended":
                continue  # -E details
            port = by_lid.get((block.lid, block.port))
            if port is not None:
                kind, component, switch = port.kind, port.component, port.switch
            elif block.lid in self.switches:  # a switch port the cabling shows no peer for
                switch = self.switches[block.lid][0]
                kind, component = "switch_port", f"{switch}:{block.port}"
            else:
                continue  # a LID the cabling does not know: no name to give it
            for counter, value in block.counters.items():
                if saturated(value):  # a legacy 32-bit counter stuck at its top
                    continue
                metric, scale = metric_name(counter)
                yield Reading(kind, component, metric, float(value * scale), parent=switch)
