"""A simulated I/O forwarding node: what it exposes, and the one place to add another kind.

For Lustre the forwarding nodes are LNet routers, and what a router exposes is LNet's
global counters (`/sys/kernel/debug/lnet/stats`, read by the `lnet_router` source):
messages and bytes routed, its own traffic, drops, errors, and `msgs_alloc`, the messages
in flight (its queue). No latency, no per-job or per-client split, no read/write split:
that is all a real router can tell.

A forwarder of another kind (a forwarding daemon in the generic format of
`docs/forwarder-format.md`, with latencies and per-client counters) is an `Export` like
`LnetRouter`: its files, the readings its source takes from them, and the real source
class. `EXPORTS` names them; `SimConfig.forwarder_export` picks one.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import ClassVar, Protocol

import numpy as np

from iolens.collect.base import Source
from iolens.collect.sources.lnet_router import COUNTERS, LnetRouterSource
from iolens.simulate.servers import Raw, lustre_text, raw
from iolens.simulate.servers.activity import Activity
from iolens.simulate.servers.model import MAX_BACKLOG, ServiceModel
from iolens.simulate.servers.node import IbPart, NodePart, Work

U32 = 1 << 32
HEADER_BYTES = 256  # LNet and PtlRPC headers, bulk descriptors: per message
ROUTER_BUFFERS = 512  # messages a router holds before clients back off (its credits)


class Export(Protocol):
    """What one forwarding node exposes about its forwarding, and who reads it."""

    source: ClassVar[type[Source]]

    def advance(self, k: int, now: float) -> float:
        """Add round k; return the node's utilisation (0-1) for its /proc."""
        ...

    def files(self, now: float) -> dict[str, str]: ...

    def readings(self, kind: str, host: str) -> Iterator[Raw]: ...


class LnetRouter:
    """LNet's counters on a router (`lnet_counters`: message counts are 32-bit and wrap,
    byte counts 64-bit)."""

    source: ClassVar[type[Source]] = LnetRouterSource

    def __init__(
        self,
        index: int,
        activity: Activity,
        model: ServiceModel,
        rng: np.random.Generator,
    ) -> None:
        self.f = index
        self.a = activity
        self.model = model
        self.rng = rng
        uptime = float(rng.uniform(2, 20)) * 86400
        routed = uptime * float(rng.uniform(2e3, 2e4))
        self.c = {
            "msgs_alloc": 0,
            "msgs_max": int(rng.integers(200, 600)),
            "errors": 0,
            "send_count": int(uptime),
            "recv_count": int(uptime),
            "route_count": int(routed),
            "drop_count": int(uptime / 3600),
            "send_length": int(uptime) * 64,
            "recv_length": int(uptime) * 64,
            "route_length": int(routed * 300_000),
            "drop_length": int(uptime / 3600) * 4096,
        }

    def reset(self) -> None:
        """LNet reloaded with Lustre: every counter from zero."""
        self.c = dict.fromkeys(self.c, 0)

    def advance(self, k: int, now: float) -> float:
        a, f, c = self.a, self.f, self.c
        interval = a.rounds.interval
        data = int(a.router_rpcs[k, f])
        msgs = 3 * data + 2 * int(a.router_md[k, f]) + 2 * int(a.router_pings[k, f])
        c["route_count"] += msgs
        c["route_length"] += int(a.router_bytes[k, f].sum()) + msgs * HEADER_BYTES
        own = int(interval)  # the router's own pings to its peers
        c["send_count"] += own
        c["recv_count"] += own
        c["send_length"] += own * 64
        c["recv_length"] += own * 64
        latency_us = self.model.router_us(k, f)
        state = self.model.forwarders
        offered, util = float(state.offered[k, f]), float(state.util[k, f])
        saturated = util > 0.95
        backlog = ROUTER_BUFFERS * min(MAX_BACKLOG, max(0.0, offered - 1.0)) * saturated
        in_flight = msgs / interval * latency_us / 1e6 + backlog
        c["msgs_alloc"] = int(self.rng.poisson(in_flight))
        c["msgs_max"] = max(c["msgs_max"], c["msgs_alloc"])
        return float(self.model.forwarders.util[k, f])

    def _values(self) -> dict[str, int]:
        """As printed: message counts modulo 2^32."""
        return {k: v % U32 if not k.endswith("_length") else v for k, v in self.c.items()}

    def files(self, now: float) -> dict[str, str]:
        v = self._values()
        order = (
            "msgs_alloc",
            "msgs_max",
            "errors",
            "send_count",
            "recv_count",
            "route_count",
            "drop_count",
            "send_length",
            "recv_length",
            "route_length",
            "drop_length",
        )
        return {"sys/kernel/debug/lnet/stats": lustre_text.lnet_stats_file([v[k] for k in order])}

    def readings(self, kind: str, host: str) -> Iterator[Raw]:
        """What `LnetRouterSource(host, kind)` reads from `files()`."""
        v = self._values()
        for field, metric in COUNTERS.items():
            bits = 64 if field.endswith("_length") else 32
            yield raw(kind, host, metric, float(v[field]), bits=bits)
        for metric, field in (
            ("msgs_alloc", "msgs_alloc"),
            ("queue_len", "msgs_alloc"),
            ("msgs_max", "msgs_max"),
        ):
            yield raw(kind, host, metric, float(v[field]), counter=False)


#: Forwarder exports by name (`SimConfig.forwarder_export`).
EXPORTS: dict[str, type[LnetRouter]] = {"lnet": LnetRouter}


class ForwarderHost:
    """A forwarding node: its export (LNet counters, or another format), /proc and two HCAs
    (`mlx5_0` on the storage fabric, `mlx5_1` on the compute fabric)."""

    role = "forwarder"

    def __init__(
        self,
        name: str,
        index: int,
        activity: Activity,
        model: ServiceModel,
        rng: np.random.Generator,
        export: str = "lnet",
    ) -> None:
        self.name = name
        self.f = index
        self.a = activity
        self.export = EXPORTS[export](index, activity, model, rng)
        self.node = NodePart(name, cores=16, mem_gib=128, rng=rng)
        self.ib = IbPart(name, ["mlx5_0", "mlx5_1"], rng)
        self.interval = activity.rounds.interval

    @property
    def sources(self) -> list[type[Source]]:
        return [self.export.source]

    def boot(self, now: float, rng: np.random.Generator) -> None:
        """Counters are already as a router up for days has them."""

    def reset(self, now: float) -> None:
        self.export.reset()

    def advance(self, k: int, now: float) -> None:
        util = self.export.advance(k, now)
        read, write = (int(x) for x in self.a.router_bytes[k, self.f])
        self.node.advance(self.interval, Work(busy=0.02 + 0.4 * util, threads=4 * util))
        self.ib.advance(
            self.interval,
            {"mlx5_0": (write, read, util), "mlx5_1": (read, write, util)},
        )

    def files(self, now: float) -> dict[str, str]:
        return {**self.export.files(now), **self.node.files(), **self.ib.files()}

    def readings(self) -> Iterator[Raw]:
        """What `node`, `infiniband` and the export's source read, in the agent's order."""
        yield from self.node.readings(self.role)
        yield from self.ib.readings()
        yield from self.export.readings(self.role, self.name)
