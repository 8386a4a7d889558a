"""A TaihuLight-shaped cluster: compute nodes behind I/O forwarding nodes, Lustre OSS/OSTs, one MDS.

Ratios follow Beacon section 2: 512 compute nodes per forwarding node (static mapping),
3 OSTs per OSS, 256 compute nodes per leaf switch (a supernode), a single metadata server.
The forwarding nodes are LNet routers: the compute fabric (`o2ib1`) reaches the storage
fabric (`o2ib`) through them, so a server sees each compute node by its `@o2ib1` NID and
the login node, which sits on the storage fabric, by its `@o2ib` NID.

`components_table` and `forwarding_table` are what a site's topology file will say (the
simulator hands them to the store directly until it writes such a file).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from iolens.model.schema import COMPONENTS, FORWARDING


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

    def components_table(self) -> pa.Table:
        c = self.caps
        rows: list[tuple[str, str, str | None, float | None, float | None]] = []
        rows += [
            (n, "compute", self.switches[self.switch_of_node[i]], c.node_bw, None)
            for i, n in enumerate(self.compute)
        ]
        rows += [(f, "forwarder", None, c.forwarder_bw, c.forwarder_iops) for f in self.forwarders]
        rows += [
            (o, "oss", None, c.ost_bw * np.sum(self.ost_oss == i), None)
            for i, o in enumerate(self.oss)
        ]
        rows += [
            (t, "ost", self.oss[self.ost_oss[i]], c.ost_bw, c.ost_iops)
            for i, t in enumerate(self.osts)
        ]
        rows += [(s, "switch", None, None, None) for s in self.switches]
        rows += [
            (self.mdt, "mdt", self.mds, None, c.mds_ops),
            (self.mds, "mds", None, None, c.mds_ops),
            (self.login, "login", None, None, None),
        ]
        cols = list(zip(*rows, strict=True))
        return pa.table(dict(zip(COMPONENTS.names, cols, strict=True)), schema=COMPONENTS)

    def nid(self, host: str) -> str:
        """The LNet NID servers know `host` by: compute nodes on the routed compute fabric,
        everything else on the storage fabric."""
        if host.startswith("cn"):
            i = int(host[2:])
            return f"10.1.{i // 250}.{i % 250 + 1}@o2ib1"
        servers = [self.login, self.mds, *self.oss, *self.forwarders]
        return f"10.0.{servers.index(host) // 250}.{servers.index(host) % 250 + 1}@o2ib"

    def forwarding_table(self) -> pa.Table:
        return pa.table(
            {
                "compute_node": self.compute,
                "forwarder": [self.forwarders[i] for i in self.fwd_of_node],
            },
            schema=FORWARDING,
        )
