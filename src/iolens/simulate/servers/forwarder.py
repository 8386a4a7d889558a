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
from dataclasses import replace
from typing import ClassVar, Protocol

import numpy as np

from iolens.collect.base import Reading, Source
from iolens.collect.sources.iofwd import IofwdSource, client_readings
from iolens.collect.sources.iofwd import readings as iofwd_readings
from iolens.collect.sources.lnet_router import COUNTERS, LnetRouterSource
from iolens.parse import iofwd
from iolens.parse.iofwd import QUEUE, ForwarderStats, Tally
from iolens.simulate.engine import N1_FORWARDER_CLOG
from iolens.simulate.realism import service_time_us
from iolens.simulate.servers import Block, Raw, lustre_text, raw
from iolens.simulate.servers.activity import Activity, iter_rounds
from iolens.simulate.servers.model import MAX_BACKLOG, ServiceModel, queue
from iolens.simulate.servers.node import IbPart, NodePart, Work
from iolens.simulate.topology import Capacities

FORWARDER_BW = Capacities().forwarder_bw
RPC_BYTES = 1 << 20  # the daemon's requests to the file system
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

    def readings(self, kind: str, host: str) -> Iterator[Raw | Block]: ...


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


#: The daemon's thread pool and per-thread bandwidth (Beacon: 16 LWFS threads, 2.5 GB/s).
DAEMON_THREADS = 16
DAEMON_BASE_US = 150.0  # per request: receive, parse, look up the file, reply
#: Client operations a daemon times, as its files print them (every one from the start).
DAEMON_MD_OPS = ("open", "close", "getattr", "unlink")
#: A client's file goes once it has been idle this long (as Lustre's job_cleanup_interval).
CLIENT_IDLE_S = 600.0
DAEMON_SERVICE = "lwfs"


class _Counts:
    """One stats file's cumulative tallies: client-facing bytes and per-op service times."""

    def __init__(self, start: float) -> None:
        self.start = start
        self.last = start
        self.t: dict[str, Tally] = {}
        self.version = 0  # bumped by every change: readings of one version are equal

    def add(self, name: str, count: int, total: int, low: int, high: int) -> None:
        if count > 0:
            self.t[name] = self.t.get(name, Tally()) + Tally(count, total, low, high)
            self.version += 1

    def stats(self, now: float, service: bool) -> ForwarderStats:
        ops = {op: self.t.get(op, Tally()) for op in ("read", "write", *DAEMON_MD_OPS)}
        extra: dict[str, Tally | None] = {}
        if service:
            extra = {n: self.t.get(n, Tally()) for n in SERVICE_TALLIES}
        return ForwarderStats(
            snapshot_time=now,
            start_time=self.start,
            read_bytes=self.t.get("read_bytes", Tally()),
            write_bytes=self.t.get("write_bytes", Tally()),
            ops=ops,
            **extra,  # type: ignore[arg-type]
        )


def _raw(r: Reading) -> Raw:
    return (
        r.kind,
        r.component,
        r.metric,
        r.value,
        r.counter,
        r.job_id,
        r.per,
        r.bits,
        r.sparse,
        r.fresh,
    )


SERVICE_TALLIES = ("backend_read_bytes", "backend_write_bytes", *QUEUE)


def _as_printed(stats: ForwarderStats) -> ForwarderStats:
    """`stats` with its times as a file prints them (nanoseconds)."""
    start = None if stats.start_time is None else float(f"{stats.start_time:.9f}")
    return replace(stats, snapshot_time=float(f"{stats.snapshot_time:.9f}"), start_time=start)


class ForwardingDaemon:
    """A forwarding daemon in iolens' generic format (`docs/forwarder-format.md`): what
    Beacon's LWFS servers know. Per request a thread serves it in
    `service_time_us(size, ...)` at the daemon's per-thread bandwidth, stretched by load,
    noise and a fail-slow fault; an N-1 request holds its thread `N1_FORWARDER_CLOG` times
    longer (it waits on a shared file at the back end, Beacon 4.1); requests queue in a
    16-thread pool. Per client node, the same counters for its own requests; a client's
    file goes after `CLIENT_IDLE_S` idle and comes back from zero."""

    source: ClassVar[type[Source]] = IofwdSource

    def __init__(
        self, index: int, activity: Activity, model: ServiceModel, rng: np.random.Generator
    ) -> None:
        self.f = index
        self.a = activity
        self.model = model
        self.rng = rng
        self.bytes_per_us = FORWARDER_BW / DAEMON_THREADS / 1e6
        mine = activity.clients.fwd == index
        self.rows = {k: rows[mine[rows]] for k, rows in iter_rounds(activity.clients)}
        self.md_rows = dict(iter_rounds(activity.mdt))
        self.total = _Counts(-1.0)
        self.clients: dict[str, _Counts] = {}
        self._blocks: dict[str, tuple[int, Block]] = {}  # per client: its version's readings

    def reset(self) -> None:
        """Restarted: every file from zero (the next round sets the start)."""
        self.total = _Counts(-1.0)
        self.clients = {}
        self._blocks = {}

    def advance(self, k: int, now: float) -> float:
        a, f, m = self.a, self.f, self.model.forwarders
        interval = a.rounds.interval
        self._started(now)
        util, factor = float(m.util[k, f]), float(m.factor[k, f])
        requests, busy_us = 0, 0.0
        c = a.clients
        for i in self.rows.get(k, np.zeros(0, np.int64)):
            n, size = int(c.requests[i]), int(c.size[i])
            if n <= 0:
                continue
            op = "write" if c.write[i] else "read"
            svc = (
                float(
                    service_time_us(
                        size,
                        float(c.write[i]),
                        util,
                        base_us=DAEMON_BASE_US,
                        bytes_per_us=self.bytes_per_us,
                        write_cost=1.0,
                    )
                )
                * factor
                * (N1_FORWARDER_CLOG if c.n1[i] else 1.0)
            )
            total_us = round(n * svc)
            lo, hi = int(svc * 0.5), int(svc * 2.0) + 1
            client = self._client(str(c.node[i]), now, interval)
            for counts in (client, self.total):
                counts.add(f"{op}_bytes", n, n * size, size, size)
                counts.add(op, n, total_us, lo, hi)
            requests += n
            busy_us += n * svc
        for i in self.md_rows.get(k, np.zeros(0, np.int64)):
            node = str(a.mdt.where[i])
            op = str(a.mdt.op[i])
            if op not in DAEMON_MD_OPS or not self._behind(node):
                continue
            n = int(a.mdt.count[i])
            svc = self.model.md_us(k, op) + DAEMON_BASE_US * factor
            client = self._client(node, now, interval)
            for counts in (client, self.total):
                counts.add(op, n, round(n * svc), int(svc * 0.5), int(svc * 2) + 1)
            requests += n
            busy_us += n * svc
        if requests:
            mean = busy_us / requests
            q = queue(requests, mean, interval, DAEMON_THREADS, util, float(m.offered[k, f]))
            self.total.add("req_waittime", requests, round(requests * q.wait_us), 0, 0)
            self.total.add("req_qdepth", requests, round(requests * q.depth), 0, 0)
            self.total.add("req_active", requests, round(requests * q.active), 0, 0)
        for name, j in (("backend_read_bytes", 0), ("backend_write_bytes", 1)):
            nbytes = int(a.router_bytes[k, f, j])
            n = -(-nbytes // RPC_BYTES)
            self.total.add(name, n, nbytes, min(nbytes, RPC_BYTES), min(nbytes, RPC_BYTES))
        for name in [n for n, cl in self.clients.items() if now - cl.last > CLIENT_IDLE_S]:
            del self.clients[name]
        return util

    def _started(self, now: float) -> None:
        """A daemon (re)started in the round before its first files."""
        if self.total.start < 0:
            self.total = _Counts(now - self.a.rounds.interval)

    def _behind(self, node: str) -> bool:
        return self.a.fwd_of.get(node) == self.f

    def _client(self, node: str, now: float, interval: float) -> _Counts:
        c = self.clients.get(node)
        if c is None:  # its first request, somewhere inside the round
            c = self.clients[node] = _Counts(now - interval / 2)
        c.last = now
        return c

    def files(self, now: float) -> dict[str, str]:
        self._started(now)
        self.total.last = now
        return iofwd.render_tree(
            DAEMON_SERVICE,
            self.total.stats(now, service=True),
            {n: c.stats(now, service=False) for n, c in sorted(self.clients.items())},
            threads_max=DAEMON_THREADS,
        )

    def readings(self, kind: str, host: str) -> Iterator[Raw | Block]:
        """What `IofwdSource(host)` reads from `files()` (the same records, the start times
        as the files print them)."""
        now = self.total.last
        totals = [self.total.stats(now, service=True)]
        gauges = {"threads_max": float(DAEMON_THREADS)}
        yield from map(_raw, iofwd_readings(host, totals, {}, gauges))
        blocks = {}
        for name, c in sorted(self.clients.items()):
            held = self._blocks.get(name)
            if held is None or held[0] != c.version:
                stats = [_as_printed(c.stats(now, service=False))]
                held = (c.version, Block([_raw(r) for r in client_readings(host, name, stats)]))
            blocks[name] = held
            yield held[1]
        self._blocks = blocks  # clients gone idle for good drop out with their files


#: Forwarder exports by name (`SimConfig.forwarder_export`).
EXPORTS: dict[str, type[LnetRouter] | type[ForwardingDaemon]] = {
    "lnet": LnetRouter,
    "iofwd": ForwardingDaemon,
}


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

    def readings(self) -> Iterator[Raw | Block]:
        """What `node`, `infiniband` and the export's source read, in the agent's order."""
        yield from self.node.readings(self.role)
        yield from self.ib.readings()
        yield from self.export.readings(self.role, self.name)
