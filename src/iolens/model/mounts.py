"""Which file system a path is on, from a Darshan log's mount table, and where `lfs` applies.

Darshan records the node's mounts (`/etc/mtab`) in every log, skipping tmpfs, proc, sysfs
and other pseudo file systems (darshan-core.c `darshan_get_exe_and_mounts`); it resolves
a path to the longest mount point that prefixes it (`darshan_fs_info_from_path`, which
sorts mount points longest first). The same rule here gives every record's file system
type: `/dev/shm` falls to `/dev` (devtmpfs) or `/`, a conda tree to its NFS mount.

`lfs setstripe` and friends only work on Lustre, and on a file system's root directory
they would change the default layout of every new file of the whole file system. So a
path gets `lfs` advice only when it is known to be on Lustre (its mount's type, or a
LUSTRE-module record for the file: mount points are matched literally and a symbolic link
such as `/grand` -> `/lus/grand` hides the mount) and the directory named is not a mount
point (`DIR` stands in for it then). A path no mount covers, or a log without a mount
table, is on an unknown file system: no `lfs` advice without a LUSTRE record. The rules
that give striping advice (DP08, DP15/DP16, DP18/DP19, DP21/DP22, DD02, Z02, Z06, Z08) keep
their other advice without it; the traced-job rules and `iolens advise` go by the target
names instead (`is_lustre_target`: Lustre OSTs, not MooseFS chunkservers).
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable

LUSTRE = "lustre"
#: Lustre's OST names (`lustre-OST000a`, Darshan's `OST000a`); MooseFS chunkservers, which
#: iolens also keeps as OSTs, are IP:PORT.
_LUSTRE_OST = re.compile(r"(^|-)OST[0-9a-f]{4,}$")


class MountTable:
    """A log's (mount point, fs type) pairs; `lookup` resolves paths by longest prefix."""

    def __init__(self, mounts: Iterable[tuple[str, str]]) -> None:
        seen: dict[str, str] = {}
        for point, kind in mounts:
            point = _norm(point)
            seen.setdefault(point, kind)  # Darshan lists each mount once; first one wins
        self._by_length = sorted(seen.items(), key=lambda m: -len(m[0]))
        self.points = frozenset(seen)

    def __bool__(self) -> bool:
        return bool(self._by_length)

    def lookup(self, path: str) -> tuple[str, str] | None:
        """(mount point, fs type) holding `path`, None for a relative or unknown path."""
        if not path.startswith("/"):
            return None
        path = _norm(path)
        for point, kind in self._by_length:
            if point == "/" or path == point or path.startswith(point + "/"):
                return point, kind
        return None

    def fs_type(self, path: str) -> str | None:
        found = self.lookup(path)
        return found[1] if found is not None else None

    def is_mount_point(self, directory: str) -> bool:
        return _norm(directory) in self.points


def _norm(path: str) -> str:
    """`//a/b/` -> `/a/b` (Darshan keeps paths as opened, with doubled slashes)."""
    p = posixpath.normpath(path) if path else path
    return "/" + p.lstrip("/") if p.startswith("/") else p


def is_lustre(fs_type: str | None) -> bool:
    return fs_type == LUSTRE


def is_lustre_target(name: str) -> bool:
    """Is this storage target a Lustre OST (so `lfs` can place stripes on it)?"""
    return bool(_LUSTRE_OST.search(name))


def lfs_dir(table: MountTable, path: str, lustre_record: bool = False) -> str | None:
    """The directory of `path` for `lfs setstripe`, "DIR" when that directory is a mount
    point (never a file system's root), None when `path` is not known to be on Lustre."""
    if not (lustre_record or is_lustre(table.fs_type(path))):
        return None
    d = _norm(posixpath.dirname(path) or "")
    if not d.startswith("/") or d == "/" or table.is_mount_point(d):
        return "DIR"
    return d


__all__ = ["LUSTRE", "MountTable", "is_lustre", "is_lustre_target", "lfs_dir"]
