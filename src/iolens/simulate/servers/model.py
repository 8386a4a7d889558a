"""How long servers take, agent round by agent round: load, noise, faults and queues.

Per component and round: its utilisation (the share of what it can do now that the
engine had it do, 0-1), the fail-slow factor of an injected fault (how many times slower
the component serves each request; the engine divides its capacity by the same factor, so
a slow component is also busier), and a noise factor from `Realism.service_noise`
(log-normal, AR(1) between rounds: the fitted per-sample noise). A request's service time
is then `realism.service_time_us(size, write share, utilisation) x noise x slowdown`.

Queueing in a service's thread pool follows from the same numbers: busy threads by
Little's law (requests per second x service time), waiting by the Sakasegawa
approximation of an M/M/c queue, and, when the offered load exceeds what the component
can serve, a backlog: clients keep a bounded number of RPCs in flight, so the queue grows
with the overload up to `MAX_BACKLOG` thread pools, and each request waits for the queue
ahead of it to drain (Little's law again).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from iolens.simulate.engine import EngineResult
from iolens.simulate.realism import Realism, service_time_us
from iolens.simulate.servers.activity import Rounds

#: Spread (log-normal sigma) of single requests around an interval's mean service time:
#: what makes min, max, sumsq and the I/O-time histogram. Not fitted: an assumption.
REQUEST_SPREAD = 0.5
#: Base cost of each metadata operation at the MDT, microseconds (Lustre 2.14 md_stats
#: means: getattr 12-48 us, close 23 us, open 100-1500 us with creates).
MD_BASE_US = {
    "getattr": 20.0,
    "getxattr": 20.0,
    "close": 25.0,
    "open": 150.0,
    "unlink": 120.0,
    "statfs": 5.0,
}
#: Object operations on an OST, microseconds.
OST_OP_US = {"destroy": 150.0, "statfs": 4.0}
#: An LNet router's forwarding time per message (microseconds) when idle.
ROUTER_BASE_US = 20.0
#: Time from a request's arrival to a free thread taking it on an idle service (real
#: idle servers: 20-60 us mean `req_waittime`).
DISPATCH_US = 25.0
#: Overload beyond which the queue stops growing, in thread pools (or router buffers):
#: clients have only so many RPCs in flight (`max_rpcs_in_flight`, peer credits).
MAX_BACKLOG = 2.0


def per_round(values: np.ndarray, rounds: Rounds, fill: float) -> np.ndarray:
    """Mean of per-second rows over each round's seconds; `fill` where the engine stopped."""
    seconds = int(np.ceil((rounds.count - 1) * rounds.interval))
    v = np.full((seconds, *values.shape[1:]), fill, float)
    n = min(seconds, len(values))
    v[:n] = values[:n]
    rnd = rounds.of_second(np.arange(seconds))
    out = np.full((rounds.count, *values.shape[1:]), fill, float)
    counts = np.bincount(rnd, minlength=rounds.count).astype(float)
    sums = np.zeros((rounds.count, *values.shape[1:]))
    np.add.at(sums, rnd, v)
    has = counts > 0
    out[has] = sums[has] / counts[has].reshape(-1, *[1] * (values.ndim - 1))
    return out


@dataclass(frozen=True)
class ComponentState:
    """[round, component] utilisation (0-1), slowdown (>= 1) and noise factor."""

    util: np.ndarray
    slow: np.ndarray
    noise: np.ndarray
    offered: np.ndarray  # what was asked of it over what it can serve now (may be > 1)
    factor: np.ndarray  # noise x slowdown: what multiplies every service time


@dataclass(frozen=True)
class ServiceModel:
    """Per-round state of every OST, forwarder and the MDS."""

    realism: Realism
    osts: ComponentState
    forwarders: ComponentState
    mds: ComponentState

    @classmethod
    def build(
        cls, result: EngineResult, rounds: Rounds, realism: Realism, rng: np.random.Generator
    ) -> ServiceModel:
        def state(busy: np.ndarray, load: np.ndarray, cap: np.ndarray) -> ComponentState:
            slow = per_round(1.0 / cap, rounds, 1.0)
            noise = realism.service_noise(rng, load.shape[1], rounds.count)
            return ComponentState(
                util=np.clip(per_round(busy, rounds, 0.0), 0.0, 1.0),
                slow=slow,
                noise=noise,
                offered=per_round(load, rounds, 0.0),
                factor=noise * slow,
            )

        mds_load = result.mds_load[:, None]
        return cls(
            realism,
            state(result.ost_busy, result.ost_load, result.ost_cap),
            state(result.fwd_busy, result.fwd_load, result.fwd_cap),
            state(result.mds_busy[:, None], mds_load, np.ones_like(mds_load)),
        )

    def ost_rpc_us(
        self, k: np.ndarray, ost: np.ndarray, rpc_bytes: np.ndarray, write: np.ndarray
    ) -> np.ndarray:
        """Mean time per bulk RPC of each (round, OST, size, direction), microseconds.

        An OST thread handles an RPC synchronously with its disk I/O, so when the OST is
        asked for more than it can serve the RPC waits for the disk inside its handling
        time: it stretches by the overload (clients are closed loops, so by Little's law
        latency grows as throughput is shared)."""
        s = self.osts
        base = service_time_us(rpc_bytes, write.astype(float), s.util[k, ost])
        return base * s.factor[k, ost] * np.maximum(1.0, s.offered[k, ost])

    def md_us(self, k: int, op: str) -> float:
        s = self.mds
        base = service_time_us(0.0, 0.0, s.util[k, 0], base_us=MD_BASE_US.get(op, 50.0))
        return float(base * s.factor[k, 0])

    def router_us(self, k: int, f: int) -> float:
        s = self.forwarders
        return float(ROUTER_BASE_US * (1.0 + s.util[k, f] ** 2) * s.factor[k, f])


@dataclass(frozen=True)
class Queue:
    """What a service's request queue looked like over one round (per-request means)."""

    wait_us: float  # req_waittime
    depth: float  # req_qdepth: requests already queued when one arrived
    active: float  # req_active: requests being handled when one arrived (itself included)
    threads: int  # threads started


def queue(
    requests: int, service_us: float, interval: float, threads: int, util: float, offered: float
) -> Queue:
    """The thread pool of a PTLRPC service (`threads` started) over one round, serving
    `requests` of `service_us` each while the engine found it `util` busy (0-1) and asked
    `offered` times what it can serve."""
    if requests <= 0:
        return Queue(0.0, 0.0, 1.0, threads)
    rate = requests / interval
    busy = rate * service_us / 1e6  # Little: requests in service at once
    c = max(threads, 1)
    rho = min(max(util, busy / c), 0.95)
    wait = DISPATCH_US + service_us * rho ** (np.sqrt(2 * (c + 1)) - 1) / (c * (1 - rho))
    if util > 0.95:  # saturated: what clients ask beyond it waits, thread pools of it
        backlog = c * min(MAX_BACKLOG, max(0.0, offered - 1.0))
        wait += backlog / rate * 1e6
    return Queue(float(wait), float(rate * wait / 1e6), float(1.0 + min(busy, c)), c)


def adaptive_timeout(request_us: float) -> int:
    """The adaptive timeout (`req_timeout`, whole seconds, at least 1) a service advertises
    when a request takes `request_us` to queue and serve: Lustre's AT keeps a margin over
    the slowest service it has seen; here four times this round's."""
    return max(1, int(np.ceil(request_us * 4 / 1e6)))
