"""Lustre client (compute or forwarding node): what this node asks of the file system.

- `llite.<fs>-<sb>.stats` (VFS level, everything the node's processes did): `read_bytes`,
  `write_bytes`, `read_ops`, `write_ops` and `md_ops` (the operations in
  :data:`CLIENT_MD_OPS`), summed over the node's Lustre mounts, as kind = the agent's role
  (`compute`, or `forwarder` on an I/O forwarding node) and component = host. A mount that
  goes away while the agent runs makes the sum drop, which the agent reads as a restart:
  one interval then over-reports by the remaining mounts' totals;
- `osc.<fs>-OSTxxxx-osc-<sb>` (one per OST) and `mdc.<fs>-MDTxxxx-mdc-<sb>` (one per MDT),
  kind `osc`/`mdc`, component = `<host>:<osc or mdc name>` (the name alone is only unique
  within a node): from `stats`, `rpcs` sent and `wait_us`, the mean RPC round trip
  (`req_waittime`: send to reply, server queueing and service included); osc bytes and ops;
  mdc `md_ops` from its `md_stats`; from `rpc_stats`, the in-flight and pending-page gauges.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.collect.sources import _lustre

#: llite operations that are metadata requests. Left out on purpose: data (`read`, `write`,
#: `*_bytes`, `fsync`, `fallocate`), purely local work that rarely reaches a server
#: (`inode_permission`, `getxattr_hits`, `alloc_inode`, `seek`, `mmap`, `page_fault`,
#: `page_mkwrite`, `ioctl`, `flock`) and derived statistics (`opencount`, `openclosetime`).
CLIENT_MD_OPS = frozenset(
    {
        "open",
        "close",
        "readdir",
        "setattr",
        "truncate",
        "getattr",
        "create",
        "link",
        "unlink",
        "symlink",
        "mkdir",
        "rmdir",
        "mknod",
        "rename",
        "statfs",
        "setxattr",
        "getxattr",
        "listxattr",
        "removexattr",
    }
)

#: The role names that mean "no role given" and so a plain compute client.
UNSET_ROLES = frozenset({"node"})


class LustreClientSource:
    """The client side of every I/O path: what the node asked for, and how long RPCs took."""

    name: ClassVar[str] = "lustre_client"
    #: The runner passes the agent's role, which becomes the kind of the llite readings.
    takes_role: ClassVar[bool] = True

    def __init__(self, host: str, kind: str | None = None) -> None:
        self.host = host
        self.kind = "compute" if kind is None or kind in UNSET_ROLES else kind

    def collect(self, root: Path) -> Iterator[Reading]:
        yield from self._llite(root)
        for osc in _lustre.targets(root, "osc"):
            yield from self._import(root, "osc", osc)
        for mdc in _lustre.targets(root, "mdc"):
            yield from self._import(root, "mdc", mdc)

    def _llite(self, root: Path) -> Iterator[Reading]:
        mounts = [
            st
            for mount in _lustre.targets(root, "llite")
            if (st := _lustre.stats(root, "llite", mount, "stats")) is not None
        ]
        if not mounts:
            return
        totals = dict.fromkeys(("read_bytes", "read_ops", "write_bytes", "write_ops", "md_ops"), 0)
        for st in mounts:
            by = st.by_name()
            for op in ("read", "write"):
                c = by.get(f"{op}_bytes")
                if c is not None:
                    totals[f"{op}_bytes"] += c.sum or 0
                    totals[f"{op}_ops"] += c.samples
            totals["md_ops"] += sum(c.samples for n, c in by.items() if n in CLIENT_MD_OPS)
        for metric, value in totals.items():
            yield Reading(self.kind, self.host, metric, float(value))

    def _import(self, root: Path, obd_type: str, target: str) -> Iterator[Reading]:
        component = f"{self.host}:{target}"
        st = _lustre.stats(root, obd_type, target, "stats")
        if st is not None:
            by = st.by_name()
            waits = by.get("req_waittime")
            yield Reading(obd_type, component, "rpcs", float(waits.samples if waits else 0))
            yield Reading(
                obd_type,
                component,
                "wait_us",
                float(waits.sum or 0) if waits else 0.0,
                counter=False,
                per=float(waits.samples) if waits else 0.0,
            )
            if obd_type == "osc":
                for op in ("read", "write"):
                    c = by.get(f"{op}_bytes")
                    nbytes, nops = (c.sum or 0, c.samples) if c else (0, 0)
                    yield Reading(obd_type, component, f"{op}_bytes", float(nbytes))
                    yield Reading(obd_type, component, f"{op}_ops", float(nops))
        md = _lustre.stats(root, obd_type, target, "md_stats")
        if md is not None:
            yield Reading(obd_type, component, "md_ops", float(sum(c.samples for c in md.counters)))
        hist = _lustre.histograms(root, [obd_type], target, "rpc_stats")
        for key, value in hist.gauges if hist else ():
            metric = "_".join(key.lower().split())
            yield Reading(obd_type, component, metric, float(value), counter=False)
