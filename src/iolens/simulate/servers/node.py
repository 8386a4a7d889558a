"""What every server host shows besides Lustre: /proc (the `node` source) and its
InfiniBand ports' sysfs counters (the `infiniband` source).

The numbers follow the host's work in each round: CPU time and load grow with the
requests it serves and the time its disks are busy, memory available shrinks as the page
cache fills, and the HCA counts the bytes Lustre moved in 4-byte words. Management
Ethernet and IPoIB carry only the agent's own traffic: Lustre's RDMA bypasses them, which
is why `/proc/net/dev` on a real server shows next to nothing of its I/O.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from iolens.collect.sources.infiniband import KIND, RENAMED
from iolens.collect.sources.node import CPU_FIELDS
from iolens.parse.infiniband import saturated
from iolens.simulate.servers import Raw, raw

USER_HZ = 100
#: /proc/stat columns after the CPU name, in the kernel's order.
STAT_FIELDS = (*CPU_FIELDS, "guest", "guest_nice")
#: sysfs counter files of an InfiniBand port (mlx5), by name.
IB_COUNTERS = (
    "VL15_dropped",
    "excessive_buffer_overrun_errors",
    "link_downed",
    "link_error_recovery",
    "local_link_integrity_errors",
    "multicast_rcv_packets",
    "multicast_xmit_packets",
    "port_rcv_constraint_errors",
    "port_rcv_data",
    "port_rcv_errors",
    "port_rcv_packets",
    "port_rcv_remote_physical_errors",
    "port_rcv_switch_relay_errors",
    "port_xmit_constraint_errors",
    "port_xmit_data",
    "port_xmit_discards",
    "port_xmit_packets",
    "port_xmit_wait",
    "symbol_error",
    "unicast_rcv_packets",
    "unicast_xmit_packets",
)
IB_MTU = 4096


@dataclass
class Work:
    """What a host did in one round, as its /proc and HCA see it."""

    busy: float = 0.0  # CPU share spent serving (0-1)
    iowait: float = 0.0  # CPU share waiting for disks (0-1)
    threads: float = 0.0  # runnable or disk-waiting threads on average (load average)
    ports: dict[str, tuple[int, int, float]] = field(default_factory=dict)
    # HCA name -> (bytes sent, bytes received, congestion 0-1)


class NodePart:
    """`/proc/loadavg`, `meminfo`, `stat`, `net/dev` and the hostname of one host."""

    def __init__(self, host: str, cores: int, mem_gib: int, rng: np.random.Generator) -> None:
        self.host = host
        self.cores = cores
        self.rng = rng
        self.mem_total_kb = mem_gib * 2**20
        uptime = float(rng.uniform(3, 30)) * 86400
        per_cpu_s = uptime * USER_HZ
        self.jiffies = (
            np.array([0.02, 0.0, 0.04, 0.9, 0.03, 0.001, 0.009, 0.0, 0.0, 0.0]) * per_cpu_s * cores
        )
        self.jiffies = np.floor(self.jiffies)
        self.load = np.array([0.3, 0.3, 0.3])
        self.available = 0.85
        self.net = {
            "lo": np.array([uptime * 9e3, uptime * 90], dtype=float),
            "eth0": np.array([uptime * 2e3, uptime * 25], dtype=float),
            "ib0": np.array([uptime * 1e2, uptime * 1], dtype=float),
        }
        self.net_tx = {k: v * 1.2 for k, v in self.net.items()}
        self.net_tx["lo"] = self.net["lo"].copy()
        self.procs = int(rng.integers(900, 1400))
        self.last_pid = int(rng.integers(20_000, 90_000))

    def advance(self, interval: float, work: Work) -> None:
        total = self.cores * USER_HZ * interval
        busy = min(0.95, 0.01 + work.busy)
        iowait = min(1.0 - busy, work.iowait)
        share = np.array(
            [busy * 0.1, 0.0, busy * 0.8, 0.0, iowait, busy * 0.02, busy * 0.08, 0, 0, 0]
        )
        share[3] = max(0.0, 1.0 - share.sum())
        self.jiffies = self.jiffies + np.floor(share * total)
        running = work.threads + self.cores * busy
        for i, period in enumerate((60.0, 300.0, 900.0)):
            decay = np.exp(-interval / period)
            self.load[i] = self.load[i] * decay + running * (1 - decay)
        target = 0.85 - 0.35 * min(1.0, work.busy + work.iowait)
        self.available += 0.2 * (target - self.available) + float(self.rng.normal(0, 0.002))
        self.available = float(np.clip(self.available, 0.3, 0.95))
        for name, (rx, tx) in (("lo", (900, 9)), ("eth0", (2e3, 25)), ("ib0", (100, 1))):
            bytes_, packets = rx * interval, tx * interval
            self.net[name] += (bytes_, packets)
            self.net_tx[name] += (bytes_ * (1 if name == "lo" else 1.2), packets)
        self.last_pid += int(interval * 3)

    # -- files ----------------------------------------------------------------------------
    def _loads(self) -> tuple[str, str, str]:
        return tuple(f"{v:.2f}" for v in self.load)  # type: ignore[return-value]

    def _meminfo(self) -> list[tuple[str, int]]:
        total = self.mem_total_kb
        avail = int(total * self.available)
        free = int(avail * 0.4)
        cached = avail - free
        return [
            ("MemTotal", total),
            ("MemFree", free),
            ("MemAvailable", avail),
            ("Buffers", int(total * 0.002)),
            ("Cached", cached),
            ("SwapCached", 0),
            ("Active", int(total * 0.1)),
            ("Inactive", int(cached * 0.6)),
            ("SwapTotal", 0),
            ("SwapFree", 0),
            ("Dirty", int(total * 0.0001)),
        ]

    def files(self) -> dict[str, str]:
        l1, l5, l15 = self._loads()
        running = max(1, round(float(self.load[0])))
        stat = [f"cpu  {' '.join(str(int(v)) for v in self.jiffies)}"]
        per_cpu = np.floor(self.jiffies / self.cores).astype(np.int64)
        stat += [f"cpu{i} {' '.join(str(int(v)) for v in per_cpu)}" for i in range(self.cores)]
        stat += [
            f"ctxt {int(self.jiffies.sum() * 40)}",
            f"btime {1_700_000_000}",
            f"processes {self.last_pid}",
            f"procs_running {running}",
            "procs_blocked 0",
        ]
        net = [
            "Inter-|   Receive                                                |  Transmit",
            " face |bytes    packets errs drop fifo frame compressed multicast|bytes    packets "
            "errs drop fifo colls carrier compressed",
        ]
        for name in ("lo", "eth0", "ib0"):
            rb, rp = (int(x) for x in self.net[name])
            tb, tp = (int(x) for x in self.net_tx[name])
            net.append(
                f"{name:>6}: {rb:7d} {rp:7d}    0    0    0     0          0         0 "
                f"{tb:8d} {tp:7d}    0    0    0     0       0          0"
            )
        return {
            "proc/loadavg": f"{l1} {l5} {l15} {running}/{self.procs} {self.last_pid}\n",
            "proc/meminfo": "".join(f"{k + ':':<16}{v:>8} kB\n" for k, v in self._meminfo()),
            "proc/stat": "\n".join(stat) + "\n",
            "proc/net/dev": "\n".join(net) + "\n",
            "proc/sys/kernel/hostname": f"{self.host}\n",
        }

    def readings(self, kind: str) -> Iterator[Raw]:
        """What `NodeSource(host, kind)` reads from `files()`."""
        host = self.host
        for name, value in zip(("load1", "load5", "load15"), self._loads(), strict=True):
            yield raw(kind, host, name, float(value), counter=False)
        wanted = {"MemTotal": "mem_total_bytes", "MemAvailable": "mem_available_bytes"}
        for key, value in self._meminfo():
            if key in wanted:
                yield raw(kind, host, wanted[key], float(value) * 1024, counter=False)
        for name, value in zip(CPU_FIELDS, self.jiffies, strict=False):
            yield raw(kind, host, f"cpu_{name}_jiffies", float(int(value)))
        for name in ("eth0", "ib0"):
            yield raw(kind, host, f"net_{name}_rx_bytes", float(int(self.net[name][0])))
            yield raw(kind, host, f"net_{name}_tx_bytes", float(int(self.net_tx[name][0])))


class IbPart:
    """The host's InfiniBand HCAs, one port each: `mlx5_<n>/ports/1`."""

    RATE = "100 Gb/sec (4X EDR)"

    def __init__(self, host: str, hcas: list[str], rng: np.random.Generator) -> None:
        self.host = host
        uptime_s = float(rng.uniform(3, 30)) * 86400
        self.counters: dict[str, dict[str, int]] = {}
        for hca in hcas:
            words = int(uptime_s * float(rng.uniform(1e7, 1e8)))
            packets = words // 256
            c = dict.fromkeys(IB_COUNTERS, 0)
            c.update(
                port_xmit_data=words,
                port_rcv_data=int(words * 0.9),
                port_xmit_packets=packets,
                port_rcv_packets=int(packets * 0.9),
                unicast_xmit_packets=packets,
                unicast_rcv_packets=int(packets * 0.9),
                multicast_xmit_packets=int(uptime_s / 10),
                multicast_rcv_packets=int(uptime_s / 5),
                port_xmit_wait=int(uptime_s * 1e3),
            )
            self.counters[hca] = c

    def advance(self, interval: float, ports: dict[str, tuple[int, int, float]]) -> None:
        for hca, c in self.counters.items():
            sent, received, congestion = ports.get(hca, (0, 0, 0.0))
            sent += int(2e3 * interval)  # subnet management, LNet pings
            received += int(2e3 * interval)
            tx_packets = sent // IB_MTU + int(interval * 10)
            rx_packets = received // IB_MTU + int(interval * 10)
            c["port_xmit_data"] += sent // 4
            c["port_rcv_data"] += received // 4
            c["port_xmit_packets"] += tx_packets
            c["port_rcv_packets"] += rx_packets
            c["unicast_xmit_packets"] += tx_packets
            c["unicast_rcv_packets"] += rx_packets
            c["multicast_xmit_packets"] += int(interval / 10)
            c["multicast_rcv_packets"] += int(interval / 5)
            c["port_xmit_wait"] += int(interval * 1e3 * (1 + 1e3 * congestion**2))

    def files(self) -> dict[str, str]:
        out = {}
        for hca, c in self.counters.items():
            port = f"sys/class/infiniband/{hca}/ports/1"
            out.update({f"{port}/counters/{k}": f"{v}\n" for k, v in c.items()})
            out[f"{port}/rate"] = f"{self.RATE}\n"
            out[f"{port}/state"] = "4: ACTIVE\n"
            out[f"{port}/phys_state"] = "5: LinkUp\n"
            out[f"{port}/link_layer"] = "InfiniBand\n"
        return out

    def readings(self) -> Iterator[Raw]:
        """What `InfinibandSource` reads from `files()` (ports in name order)."""
        for hca in sorted(self.counters):
            component = f"{self.host}:{hca}:1"
            stuck = 0
            for name, value in sorted(self.counters[hca].items()):
                if saturated(value):  # never here, but the source's rule
                    stuck += 1
                    continue
                metric, scale = RENAMED.get(name, (name.lower(), 1))
                yield raw(KIND, component, metric, float(value * scale))
            yield raw(KIND, component, "saturated_counters", float(stuck), counter=False)
            yield raw(KIND, component, "link_up", 1.0, counter=False)
            yield raw(KIND, component, "rate_gbps", 100.0, counter=False)
