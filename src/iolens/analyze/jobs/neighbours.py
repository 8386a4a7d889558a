"""The neighbours of a job: who shared its forwarders and OSTs, and how they behaved.

When a run is slower than its history, Beacon (Appendix B) examines the jobs that shared
its forwarding nodes for interference-prone features: a high metadata rate, high
bandwidth, high IOPS, or the N-1 mode. This works from the bursts the interference
analysis already built, so it costs no query.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from iolens.analyze.jobs.usage import Burst

HIGH_MD_RATE = 300.0  # metadata ops/s (the IOL005 threshold, Beacon 4.1)
HIGH_IOPS = 10_000.0  # small requests/s at the burst's peak
SMALL_REQUEST = 64 * 1024
HIGH_BW = 0.5e9  # bytes/s at the burst's peak: a fifth of a forwarder


def traits(b: Burst) -> list[str]:
    """Interference-prone features of one burst, at its peak (neighbours throttle it too)."""
    peak = b.peak_rps
    out = []
    if b.n1:
        out.append("n1")
    if b.md_ops / max(1, b.duration) >= HIGH_MD_RATE:
        out.append("high_md")
    if b.kind != "meta" and b.request_size < SMALL_REQUEST and peak >= HIGH_IOPS:
        out.append("high_iops")
    if b.kind != "meta" and peak * b.request_size >= HIGH_BW:
        out.append("high_bw")
    return out


@dataclass
class Neighbour:
    job_id: str
    shared: set[str] = field(default_factory=set)  # forwarders and OSTs used by both
    features: set[str] = field(default_factory=set)
    overlap_s: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "job_id": self.job_id,
            "shared": sorted(self.shared),
            "features": sorted(self.features),
            "overlap_s": self.overlap_s,
        }


def neighbours(
    bursts: dict[str, list[Burst]], job_id: str, windows: list[tuple[float, float]]
) -> list[Neighbour]:
    """Jobs whose bursts overlapped `windows` (epoch s) on a component the job used then."""
    mine = [
        b for b in bursts.get(job_id, []) if any(b.end > lo and b.start < hi for lo, hi in windows)
    ]
    used = {c for b in mine for c in (*b.fwd_work, *b.ost_work)}
    found: dict[str, Neighbour] = {}
    for other, bs in bursts.items():
        if other == job_id:
            continue
        for b in bs:
            shared = used & {*b.fwd_work, *b.ost_work}
            overlap = sum(
                max(0, min(b.end, hi, m.end) - max(b.start, lo, m.start))
                for lo, hi in windows
                for m in mine
            )
            if not shared or overlap <= 0:
                continue
            n = found.setdefault(other, Neighbour(other))
            n.shared |= shared
            n.features |= set(traits(b))
            n.overlap_s += overlap
    return sorted(found.values(), key=lambda n: (-len(n.features), -n.overlap_s, n.job_id))
