"""A TaihuLight-shaped cluster: compute nodes behind I/O forwarding nodes, Lustre OSS/OSTs, one MDS.

Ratios follow Beacon section 2: 512 compute nodes per forwarding node (static mapping),
3 OSTs per OSS, 256 compute nodes per leaf switch (a supernode), a single metadata server.
The forwarding nodes are LNet routers: the compute fabric (`o2ib1`) reaches the storage
fabric (`o2ib`) through them, so a server sees each compute node by its `@o2ib1` NID and
the login node, which sits on the storage fabric, by its `@o2ib` NID.

`site_toml` is the site topology file such a site would write (`docs/topology.md`); the
simulation loads it with the code of `iolens site topology`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Capacities:
    """Service capacities of each component; the defaults are Beacon's published figures."""

    forwarder_bw: float = 2.5e9  # bytes/s per forwarding node (Beacon section 2)
    forwarder_iops: float = 60_000.0  # data requests/s through a forwarder's thread pool
    forwarder_md_ops: float = 150_000.0  # metadata requests/s (served with priority)
    forwarder_threads: int = 16  # LWFS server thread pool size (Beacon section 4.1)
    forwarder_cache: float = 32 * 2**30  # Lustre client page cache on a forwarder
    readahead_per_file: float = 40 * 2**20  # Lustre default read-ahead window per file
    ost_bw: float = 0.6e9  # bytes/s per OST
    ost_iops: float = 30_000.0
    mds_ops: float = 40_000.0  # metadata ops/s at the MDS
    rank_bw: float = 0.4e9  # what one process can drive
    node_bw: float = 1.5e9  # what one compute node's link can drive
    rank_iops: float = 20_000.0
    rank_md_ops: float = 1_500.0


@dataclass(frozen=True)
class Topology:
    compute: list[str]
    forwarders: list[str]
    oss: list[str]
    osts: list[str]
    ost_oss: np.ndarray  # OST index -> OSS index
    switches: list[str]
    mdt: str  # the metadata target (md_stats, job_stats)
    mds: str  # the metadata server host (its service queue, /proc)
    login: str
    fwd_of_node: np.ndarray  # compute index -> forwarder index
    switch_of_node: np.ndarray  # compute index -> switch index
    nodes_per_forwarder: int
    caps: Capacities

    @classmethod
    def build(
        cls,
        nodes: int,
        *,
        nodes_per_forwarder: int = 512,
        osts_per_oss: int = 3,
        nodes_per_switch: int = 256,
        caps: Capacities | None = None,
    ) -> Topology:
        n_fwd = max(1, -(-nodes // nodes_per_forwarder))
        n_oss = max(2, 2 * n_fwd)
        n_ost = n_oss * osts_per_oss
        n_sw = max(1, -(-nodes // nodes_per_switch))
        idx = np.arange(nodes)
        return cls(
            compute=[f"cn{i:05d}" for i in range(nodes)],
            forwarders=[f"fwd{i + 1:03d}" for i in range(n_fwd)],
            oss=[f"oss{i + 1:02d}" for i in range(n_oss)],
            osts=[f"lustre-OST{i:04x}" for i in range(n_ost)],
            ost_oss=np.arange(n_ost) // osts_per_oss,
            switches=[f"sw{i + 1:03d}" for i in range(n_sw)],
            mdt="lustre-MDT0000",
            mds="mds01",
            login="login01",
            fwd_of_node=np.minimum(idx // nodes_per_forwarder, n_fwd - 1),
            switch_of_node=idx // nodes_per_switch,
            nodes_per_forwarder=nodes_per_forwarder,
            caps=caps or Capacities(),
        )

    def nid(self, host: str) -> str:
        """The LNet NID servers know `host` by: compute nodes on the routed compute fabric,
        everything else on the storage fabric."""
        if host.startswith("cn"):
            i = int(host[2:])
            return f"10.1.{i // 250}.{i % 250 + 1}@o2ib1"
        servers = [self.login, self.mds, *self.oss, *self.forwarders]
        return f"10.0.{servers.index(host) // 250}.{servers.index(host) % 250 + 1}@o2ib"

    def site_toml(self) -> str:
        """The site topology file a site with this cluster would write (`docs/topology.md`):
        forwarders and the nodes behind them, servers and targets with their peaks, leaf
        switches and their nodes, the login node, and every host's LNet NID."""
        c = self.caps

        def q(values: list[str]) -> str:
            return "[" + ", ".join(f'"{v}"' for v in values) + "]"

        def nodes_where(mask: np.ndarray) -> str:
            idx = np.flatnonzero(mask)
            return f'"cn[{idx[0]:05d}-{idx[-1]:05d}]"' if len(idx) else "[]"

        out = ['[lustre]\nfsname = "lustre"\n']
        for f, name in enumerate(self.forwarders):
            out.append(
                f'[[forwarders]]\nname = "{name}"\nnodes = {nodes_where(self.fwd_of_node == f)}\n'
                f"peak_bw = {c.forwarder_bw:g}\npeak_ops = {c.forwarder_iops:g}\n"
                f"aliases = {q([self.nid(name)])}\n"
            )
        for i, name in enumerate(self.oss):
            targets = [t for t, o in zip(self.osts, self.ost_oss, strict=True) if o == i]
            out.append(
                f'[[oss]]\nname = "{name}"\ntargets = {q(targets)}\n'
                f"target_peak_bw = {c.ost_bw:g}\ntarget_peak_ops = {c.ost_iops:g}\n"
                f"aliases = {q([self.nid(name)])}\n"
            )
        out.append(
            f'[[mds]]\nname = "{self.mds}"\ntargets = {q([self.mdt])}\n'
            f"peak_ops = {c.mds_ops:g}\naliases = {q([self.nid(self.mds)])}\n"
        )
        for s_i, name in enumerate(self.switches):
            behind = nodes_where(self.switch_of_node == s_i)
            out.append(f'[[switches]]\nname = "{name}"\nnodes = {behind}\n')
        out.append(f'[login]\nnodes = "{self.login}"\n')
        out.append(
            f"[[aliases]]\nhosts = {q([*self.compute, self.login])}\n"
            f"aliases = {q([self.nid(h) for h in (*self.compute, self.login)])}\n"
        )
        return "\n".join(out)
