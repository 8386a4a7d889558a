"""What the servers did, agent round by agent round: the engine's seconds summed per round.

The engine knows, second by second, how many requests of each job's I/O phase completed.
The servers count them the way Lustre does: bulk RPCs and bytes per OST and job (a
request larger than an RPC becomes several), metadata operations per MDT, job and client
node, traffic routed through each LNet router. Everything here is an exact integer, summed
over the seconds each agent round covers, so no byte is invented or lost before the
counters are rendered.

Besides the jobs, the login node does what login nodes do: users copy files (`cp.1002`)
and list directories (`ls.1001`), tagged in job_stats by process name and uid because they
run outside any job, and the injected metadata storm (`find.1003`, or untagged when the
site's jobstats leave login nodes out). These small transfers do not go through the
engine: they are far below any server's capacity.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

import numpy as np

from iolens.simulate.engine import MD_OPS_PER_FILE, THRASH_AMPLIFICATION, EngineResult, PhaseRun
from iolens.simulate.topology import Topology

PAGE = 4096  # bytes; brw_stats counts RPCs by pages
RPC_MAX = 1 << 20  # Lustre's default max_pages_per_rpc (256 pages): 1 MiB bulk RPCs
CLIENT_PING_S = 25.0  # every client pings every target about every obd_timeout / 4 seconds
#: What a meta phase (mdtest-like) does to each file it creates, as the MDT counts it.
META_OPS = ("open", "getattr", "close", "unlink")
assert len(META_OPS) == MD_OPS_PER_FILE


@dataclass(frozen=True)
class Rounds:
    """Agent rounds: round k is taken `k * interval` seconds after the start and covers the
    engine seconds s with (k - 1) * interval <= s < k * interval; round 0 is the baseline."""

    interval: float
    count: int

    @classmethod
    def covering(cls, seconds: int, interval: float) -> Rounds:
        if interval < 1:
            raise ValueError(f"agent interval must be at least 1 s, got {interval}")
        return cls(interval, int(np.ceil(seconds / interval)) + 1)

    def of_second(self, second: np.ndarray) -> np.ndarray:
        """The round that reports what happened during each engine second."""
        return np.ceil((np.asarray(second) + 1) / self.interval).astype(np.int64)


@dataclass
class OstTraffic:
    """Bulk RPCs, one row per (job, OST, round, direction, RPC size, shared file)."""

    job: np.ndarray  # job_stats id: a Slurm job id, or procname.uid outside any job
    ost: np.ndarray  # OST index
    rnd: np.ndarray
    write: np.ndarray  # bool
    rpc_bytes: np.ndarray  # bytes per RPC of this row's requests
    rpcs: np.ndarray
    nbytes: np.ndarray
    n1: np.ndarray  # bool: N-1 writes/reads to one shared file (extent-lock contention)


@dataclass
class OpCounts:
    """Operations, one row per (job id or None, target or client, round, op)."""

    job: np.ndarray  # job_stats id, or None when the client's jobstats are off
    where: np.ndarray  # OST index (object ops) or client host (metadata ops)
    rnd: np.ndarray
    op: np.ndarray
    count: np.ndarray


@dataclass
class ClientTraffic:
    """Data requests of each compute node through its forwarder, per round (COO rows)."""

    node: np.ndarray  # compute node name
    job: np.ndarray  # its job (Slurm id)
    fwd: np.ndarray  # forwarder index
    rnd: np.ndarray
    write: np.ndarray  # bool
    size: np.ndarray  # bytes per request, as the processes asked
    requests: np.ndarray
    n1: np.ndarray  # bool: requests to one file shared by the job (slow at the backend)


@dataclass
class Activity:
    """Everything the servers saw, per agent round."""

    rounds: Rounds
    ost: OstTraffic
    ost_ops: OpCounts  # object operations on OSTs: destroy (unlink), statfs
    mdt: OpCounts  # metadata operations at the MDT, by client host
    router_bytes: np.ndarray  # [round, forwarder, read|write] bytes routed (OST side)
    router_rpcs: np.ndarray  # [round, forwarder] data RPCs routed
    router_md: np.ndarray  # [round, forwarder] metadata RPCs routed
    pings: np.ndarray  # [round] client pings reaching the MDS
    router_pings: np.ndarray  # [round, forwarder] client pings routed to every target
    clients: ClientTraffic  # what each compute node asked of its forwarder (client side)
    fwd_of: dict[str, int]  # compute node -> its forwarder


def rank_progress(p: PhaseRun) -> np.ndarray:
    """Units each rank completed in each second of the phase: [rank, second], exact integers."""
    done = np.asarray(p.done)
    cum = np.cumsum(done) / p.units
    cum[-1] = 1.0
    per_rank = np.floor(p.spec.count[:, None] * cum[None, :] + 1e-9).astype(np.int64)
    per_rank[:, -1] = p.spec.count
    return np.diff(per_rank, axis=1, prepend=0)


def ost_split(p: PhaseRun, units: np.ndarray, n_ost: int) -> np.ndarray:
    """Per OST and second, each rank's units (requests, RPCs, files) dealt round-robin over
    its file's stripes from the stripe of its first offset, as consecutive stripe-sized
    requests land: whole numbers, each on exactly one OST."""
    out = np.zeros((n_ost, units.shape[1]), np.int64)
    stripes = [p.ost_of_file[int(f)] for f in p.spec.file_idx]
    widths = np.array([len(x) for x in stripes])
    stripe_size = np.array([p.job.files[int(f)].stripe_size for f in p.spec.file_idx])
    first = (p.spec.offset0 // stripe_size) % widths
    done = np.cumsum(units, axis=1)
    for k in np.unique(widths):
        rows = np.nonzero(widths == k)[0]
        for j in range(k):
            shift = ((j - first[rows]) % k)[:, None]
            landed = np.maximum(0, done[rows] - shift + k - 1) // k
            ost = np.array([stripes[r][j] for r in rows])
            np.add.at(out, ost, np.diff(landed, axis=1, prepend=0))
    return out


def rpc_size(request: int, stripe_size: int) -> int:
    """Bytes per bulk RPC of `request`-byte requests: the client cuts a request at stripe
    boundaries and at `RPC_MAX` (and does not merge small ones here)."""
    return min(request, stripe_size, RPC_MAX)


class _Rows:
    """Column lists that become one of the COO tables above."""

    def __init__(self, *names: str) -> None:
        self.cols: dict[str, list[np.ndarray]] = {n: [] for n in names}

    def add(self, **cols: np.ndarray | object) -> None:
        n = max(len(v) for v in cols.values() if isinstance(v, np.ndarray))
        for k, v in cols.items():
            self.cols[k].append(v if isinstance(v, np.ndarray) else np.full(n, v, dtype=object))

    def arrays(self) -> dict[str, np.ndarray]:
        return {k: np.concatenate(v) if v else np.zeros(0) for k, v in self.cols.items()}


class ActivityBuilder:
    """Sums the engine's per-second progress into per-round server activity."""

    def __init__(self, topo: Topology, result: EngineResult, rounds: Rounds) -> None:
        self.topo = topo
        self.result = result
        self.rounds = rounds
        n_fwd = len(topo.forwarders)
        self.ost = _Rows("job", "ost", "rnd", "write", "rpc_bytes", "rpcs", "nbytes", "n1")
        self.ost_ops = _Rows("job", "where", "rnd", "op", "count")
        self.mdt = _Rows("job", "where", "rnd", "op", "count")
        self.router_bytes = np.zeros((rounds.count, n_fwd, 2), np.int64)
        self.router_rpcs = np.zeros((rounds.count, n_fwd), np.int64)
        self.router_md = np.zeros((rounds.count, n_fwd), np.int64)
        self.clients = _Rows("node", "job", "fwd", "rnd", "write", "size", "requests", "n1")

    def build(
        self,
        storm_id: str | None,
        login_rng: np.random.Generator,
    ) -> Activity:
        for run in self.result.jobs:
            for p in run.phases:
                self._phase(run.first_node, p)
        self._storm(storm_id)
        self._login(login_rng)
        ost, ost_ops, mdt = self.ost.arrays(), self.ost_ops.arrays(), self.mdt.arrays()
        return Activity(
            self.rounds,
            OstTraffic(**{k: ost[k] for k in OstTraffic.__dataclass_fields__}),
            OpCounts(**ost_ops),
            OpCounts(**mdt),
            self.router_bytes,
            self.router_rpcs,
            self.router_md,
            *self._pings(),
            ClientTraffic(**self.clients.arrays()),
            dict(zip(self.topo.compute, self.topo.fwd_of_node.tolist(), strict=True)),
        )

    # -- jobs -----------------------------------------------------------------------------
    def _round_cuts(self, start: int, d: int) -> tuple[np.ndarray, np.ndarray]:
        """Where each round's seconds begin in a phase of `d` seconds, and those rounds."""
        rnd = self.rounds.of_second(start + np.arange(d))
        cuts = np.r_[0, np.flatnonzero(np.diff(rnd)) + 1]
        return cuts, rnd[cuts]

    def _phase(self, first_node: int, p: PhaseRun) -> None:
        R = rank_progress(p)
        cuts, rnds = self._round_cuts(p.start, R.shape[1])
        self._bulk(first_node, p, R, cuts, rnds)
        self._metadata(first_node, p, R, cuts, rnds)

    def _bulk(
        self, first_node: int, p: PhaseRun, R: np.ndarray, cuts: np.ndarray, rnds: np.ndarray
    ) -> None:
        """The phase's requests as bulk RPCs on its OSTs, and through its forwarders."""
        s, topo = p.spec, self.topo
        write = s.kind in ("write", "meta")  # a meta phase writes 4 KiB into each new file
        stripe_size = min(p.job.files[int(f)].stripe_size for f in np.unique(s.file_idx))
        per_request = -(-s.size // rpc_size(s.size, stripe_size))
        assert s.size % per_request == 0, "requests split into equal RPCs"
        rpc = s.size // per_request
        rpcs = ost_split(p, R * per_request, len(topo.osts))
        nbytes = rpcs * rpc
        fwd = topo.fwd_of_node[first_node + s.ranks // p.job.ppn]
        routed = np.zeros((len(topo.forwarders), R.shape[1]), np.int64)
        np.add.at(routed, fwd, R * s.size)
        routed_rpcs = np.zeros_like(routed)
        np.add.at(routed_rpcs, fwd, R * per_request)
        amp = np.asarray(p.amp, bool)
        if amp.any():  # read-ahead thrashing: the backend reads each byte 3.5x
            num, den = THRASH_AMPLIFICATION
            for a in (nbytes, rpcs, routed, routed_rpcs):
                a[:, amp] = a[:, amp] * num // den
        b, r = np.add.reduceat(nbytes, cuts, axis=1), np.add.reduceat(rpcs, cuts, axis=1)
        ost, k = np.nonzero(r)
        n = len(ost)
        self.ost.add(
            job=p.job.job_id,
            ost=ost,
            rnd=rnds[k],
            write=np.full(n, write),
            rpc_bytes=np.full(n, rpc, np.int64),
            rpcs=r[ost, k],
            nbytes=b[ost, k],
            n1=np.full(n, bool(p.n1)),
        )
        self.router_bytes[rnds, :, int(write)] += np.add.reduceat(routed, cuts, axis=1).T
        self.router_rpcs[rnds] += np.add.reduceat(routed_rpcs, cuts, axis=1).T
        # the client side: each node's requests as its processes made them (never amplified)
        nodes, node_idx = np.unique(first_node + s.ranks // p.job.ppn, return_inverse=True)
        per_node = np.zeros((len(nodes), R.shape[1]), np.int64)
        np.add.at(per_node, node_idx, R)
        agg = np.add.reduceat(per_node, cuts, axis=1)
        i, k = np.nonzero(agg)
        n = len(i)
        self.clients.add(
            node=np.array([topo.compute[x] for x in nodes[i]], dtype=object),
            job=p.job.job_id,
            fwd=topo.fwd_of_node[nodes[i]],
            rnd=rnds[k],
            write=np.full(n, write),
            size=np.full(n, s.size, np.int64),
            requests=agg[i, k],
            n1=np.full(n, bool(p.n1)),
        )

    def _metadata(
        self, first_node: int, p: PhaseRun, R: np.ndarray, cuts: np.ndarray, rnds: np.ndarray
    ) -> None:
        """The phase's metadata operations per client node: per file create, stat, close and
        unlink in a meta phase (the unlink also destroys the file's object on its OST), else
        each rank's open before and close after its part."""
        s, topo, job = p.spec, self.topo, p.job.job_id
        if s.kind == "meta":
            per_op = dict.fromkeys(META_OPS, R)
            destroyed = np.add.reduceat(ost_split(p, R, len(topo.osts)), cuts, axis=1)
            o, k = np.nonzero(destroyed)
            self.ost_ops.add(job=job, where=o, rnd=rnds[k], op="destroy", count=destroyed[o, k])
        else:
            active = R > 0
            ranks = np.arange(len(s.ranks))
            opens, closes = np.zeros_like(R), np.zeros_like(R)
            opens[ranks, active.argmax(axis=1)] = 1
            closes[ranks, R.shape[1] - 1 - active[:, ::-1].argmax(axis=1)] = 1
            per_op = {"open": opens, "close": closes}
        nodes, node_idx = np.unique(first_node + s.ranks // p.job.ppn, return_inverse=True)
        names = np.array([topo.compute[x] for x in nodes], dtype=object)
        routed = np.zeros((len(topo.forwarders), len(rnds)), np.int64)
        for op, per_rank in per_op.items():
            per_node = np.zeros((len(nodes), R.shape[1]), np.int64)
            np.add.at(per_node, node_idx, per_rank)
            agg = np.add.reduceat(per_node, cuts, axis=1)
            i, k = np.nonzero(agg)
            self.mdt.add(job=job, where=names[i], rnd=rnds[k], op=op, count=agg[i, k])
            np.add.at(routed, (topo.fwd_of_node[nodes[i]], k), agg[i, k])
        self.router_md[rnds] += routed.T

    # -- the login node ---------------------------------------------------------------------
    def _storm(self, storm_id: str | None) -> None:
        """The storm's served operations, whole numbers per second, as `getattr`s (a
        `find` or `ls -l` over a large tree stats every entry)."""
        served = self.result.storm_ops
        if not served.any():
            return
        whole = np.diff(np.floor(np.cumsum(served) + 1e-9).astype(np.int64), prepend=0)
        rnd = self.rounds.of_second(np.arange(len(whole)))
        per_round = np.bincount(rnd, whole, minlength=self.rounds.count).astype(np.int64)
        k = np.flatnonzero(per_round)
        self.mdt.add(job=storm_id, where=self.topo.login, rnd=k, op="getattr", count=per_round[k])

    def _login(self, rng: np.random.Generator) -> None:
        """Users on the login node: interactive metadata (`ls.1001`: a few operations a
        second) and the odd file copy (`cp.1002`: 1-8 GiB at ~200 MB/s to one OST)."""
        topo, rounds = self.topo, self.rounds
        seconds = int(np.ceil((rounds.count - 1) * rounds.interval))
        ops = rng.poisson(2.0, seconds)
        rnd = rounds.of_second(np.arange(seconds))
        for op, share in (("getattr", 0.6), ("open", 0.2), ("close", 0.2)):
            n = np.bincount(rnd, np.floor(ops * share + 0.5), minlength=rounds.count)
            k = np.flatnonzero(n)
            self.mdt.add(job="ls.1001", where=topo.login, rnd=k, op=op, count=n[k].astype(np.int64))
        t = float(rng.uniform(300, 1200))
        while t < seconds:
            size = int(rng.integers(1, 9)) * 2**30
            ost = int(rng.integers(len(topo.osts)))
            write = bool(rng.random() < 0.5)
            span = np.arange(int(t), min(seconds, int(t + size / 200e6) + 1))
            per_s = np.diff(np.linspace(0, size // RPC_MAX, len(span) + 1).astype(np.int64))
            k = rounds.of_second(span)
            per_round = np.bincount(k, per_s, minlength=rounds.count).astype(np.int64)
            kk = np.flatnonzero(per_round)
            n = len(kk)
            self.ost.add(
                job="cp.1002",
                ost=np.full(n, ost),
                rnd=kk,
                write=np.full(n, write),
                rpc_bytes=np.full(n, RPC_MAX, np.int64),
                rpcs=per_round[kk],
                nbytes=per_round[kk] * RPC_MAX,
                n1=np.zeros(n, bool),
            )
            for op, at in (("open", span[0]), ("close", span[-1])):
                self.mdt.add(
                    job="cp.1002",
                    where=topo.login,
                    rnd=rounds.of_second(np.array([at])),
                    op=op,
                    count=np.ones(1, np.int64),
                )
            t += float(rng.exponential(1800.0)) + size / 200e6

    def _pings(self) -> tuple[np.ndarray, np.ndarray]:
        """Client keep-alive pings: every client pings every target each `CLIENT_PING_S`."""
        rounds, topo = self.rounds, self.topo
        clients = len(topo.compute) + 1
        per_round = np.full(rounds.count, clients * rounds.interval / CLIENT_PING_S)
        per_round[0] = 0
        pings = np.floor(np.cumsum(per_round) + 1e-9).astype(np.int64)
        behind = np.bincount(topo.fwd_of_node, minlength=len(topo.forwarders))
        targets = len(topo.osts) + 1
        routed = np.outer(per_round, behind * targets / clients)
        routed = np.floor(np.cumsum(routed, axis=0) + 1e-9).astype(np.int64)
        return np.diff(pings, prepend=0), np.diff(routed, axis=0, prepend=0)


def iter_rounds(table: OstTraffic | OpCounts) -> Iterator[tuple[int, np.ndarray]]:
    """(round, row indices) of a COO table, in round order."""
    if len(table.rnd) == 0:
        return
    order = np.argsort(table.rnd, kind="stable")
    rnd = table.rnd[order]
    cuts = np.r_[0, np.flatnonzero(np.diff(rnd)) + 1, len(rnd)]
    for a, b in pairwise(cuts):
        yield int(rnd[a]), order[a:b]
