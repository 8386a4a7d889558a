"""What the zoom-in rules recommend, computed: stripe counts, snippets, estimated gains."""

from __future__ import annotations

from typing import Any

from iolens.analyze.darshan.zoomin import thresholds as th
from iolens.model.darshan import DarshanJob
from iolens.model.mounts import MountTable, lfs_dir


def stripe_count_for(size: float, ost_total: int | None = None, at_least: int = 1) -> int:
    """Stripe count for a file of `size` bytes (NERSC's size classes), within the system."""
    k = next(c for bound, c in th.STRIPE_BY_SIZE if size <= bound)
    k = max(k, at_least)
    return min(k, ost_total) if ost_total else k


def setstripe(job: DarshanJob, path: str, count: int, stripe_size: int = th.STRIPE_SIZE) -> str:
    """`lfs setstripe` on the directory of a file with a LUSTRE layout (new files there
    inherit it); `DIR` instead of a mount point, whose layout is the file system's default."""
    d = lfs_dir(MountTable(job.mounts), path, lustre_record=True) or "DIR"
    return f"lfs setstripe -c {count} -S {stripe_size // 2**20}M {d}"


def amdahl(total: float, part: float, speedup: float) -> float:
    """Whole-job speed-up when `part` of `total` seconds gets `speedup` times faster."""
    if total <= 0 or part <= 0 or speedup <= 1:
        return 1.0
    part = min(part, total)
    return total / (total - part + part / speedup)


def gain(factor: float, basis: str, metric: str = "bandwidth") -> dict[str, Any]:
    return {"metric": metric, "factor": round(factor, 2), "basis": basis}


def mb(n: float) -> str:
    """Bytes for people: 1.2 GB, 340 MB (decimal units, as the paper and LMT use)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if abs(n) >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n:.0f} B"
