"""Lustre object storage server: per-OST traffic, per-job traffic, bulk sizes, the I/O queue.

Per OST (kind `ost`, component = target name such as `lustrefs-OST0000`):

- `obdfilter.<ost>.stats`: `read_bytes`/`write_bytes` (bytes moved) and their sample counts
  (`read_ops`/`write_ops`, bulk RPCs), the other object operations summed into `md_ops`,
  and on 2.12+ `service_us`, the mean time the OST spent on a read or write RPC;
- `obdfilter.<ost>.job_stats`: the same traffic metrics per job (`job_id` set);
- `brw_stats` `pages per bulk r/w`: RPCs per size bucket, `brw_rpc_pages_<n>_read|write`
  (the bucket labelled n counts RPCs of n/2+1 to n pages; Lustre rounds up to a power of
  two): many small RPCs are the classic sign of small or random I/O reaching the disks;
- capacity gauges (`space_*_bytes`, `files_*`).

Per OSS (kind `oss`, component = host): the PTLRPC services under `ost/OSS/` — `ost_io`,
which carries the bulk I/O, with the plain names `wait_us`, `queue_len`, `active_threads`,
`service_us`, the others prefixed (`ost_create_wait_us`); see `_lustre.service`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.collect.sources import _lustre
from iolens.parse.lustre_jobstats import JobCounter
from iolens.parse.lustre_stats import StatsCounter

#: Object operations that count as `md_ops` on an OST. Left out on purpose: the data path
#: (`read_bytes`, `write_bytes`, `read`, `write`, `preprw`, `commitrw`) and connection
#: management (`connect`, `reconnect`, `disconnect`, `ping`).
OST_MD_OPS = frozenset(
    {
        "create",
        "destroy",
        "setattr",
        "getattr",
        "punch",
        "statfs",
        "get_info",
        "set_info",
        "set_info_async",
        "sync",
        "quotactl",
        "prealloc",
    }
)

#: The brw_stats section exported, and the prefix of its metrics.
BRW_SECTION = "pages per bulk r/w"
BRW_PREFIX = "brw_rpc_pages_"


class LustreOssSource:
    """Why an OST is slow or busy, and which jobs make it so."""

    name: ClassVar[str] = "lustre_oss"

    def __init__(self, host: str, kind: str | None = None) -> None:
        self.host = host
        self.kind = kind or "oss"

    def collect(self, root: Path) -> Iterator[Reading]:
        osds = _lustre.osd_types(root)
        for ost in _lustre.targets(root, "obdfilter"):
            yield from self._ost_stats(root, ost)
            yield from self._job_stats(root, ost)
            yield from self._brw_stats(root, ost, osds)
            yield from _lustre.capacity(root, "ost", ost, "obdfilter", osds)
        yield from _lustre.services(root, self.kind, self.host, "ost/OSS", "ost_io")

    def _ost_stats(self, root: Path, ost: str) -> Iterator[Reading]:
        st = _lustre.stats(root, "obdfilter", ost, "stats")
        if st is None:
            return
        by = st.by_name()
        yield from traffic("ost", ost, by, None)
        timed = [by[n] for n in ("read", "write") if n in by and by[n].unit == "usecs"]
        if timed:
            yield Reading(
                "ost",
                ost,
                "service_us",
                float(sum(c.sum or 0 for c in timed)),
                counter=False,
                per=float(sum(c.samples for c in timed)),
            )

    def _job_stats(self, root: Path, ost: str) -> Iterator[Reading]:
        for job in _lustre.job_stats(root, "obdfilter", ost) or []:
            yield from traffic("ost", ost, job.by_name(), job.job_id)

    def _brw_stats(self, root: Path, ost: str, osds: list[str]) -> Iterator[Reading]:
        # 2.10 links obdfilter/<ost>/brw_stats to the OSD's file; 2.12+ has only the OSD's.
        hist = _lustre.histograms(root, [*osds, "obdfilter"], ost, "brw_stats")
        section = hist.section(BRW_SECTION) if hist else None
        if section is None:
            return
        for bucket in section.buckets:
            for column, count in zip(section.columns, bucket.counts, strict=True):
                yield Reading("ost", ost, f"{BRW_PREFIX}{bucket.lower}_{column}", float(count))


def traffic(
    kind: str,
    component: str,
    by: dict[str, StatsCounter] | dict[str, JobCounter],
    job_id: str | None,
) -> Iterator[Reading]:
    """read/write bytes and ops, and md_ops, from one stats file or one job's entry.

    Lustre omits counters that have no samples yet, so a missing one is a true zero; it is
    reported as such so that the first real value has a baseline to be rated against."""
    for op in ("read", "write"):
        c = by.get(f"{op}_bytes")
        yield Reading(kind, component, f"{op}_bytes", float(c.sum or 0) if c else 0.0, True, job_id)
        yield Reading(kind, component, f"{op}_ops", float(c.samples) if c else 0.0, True, job_id)
    md = sum(c.samples for name, c in by.items() if name in OST_MD_OPS)
    yield Reading(kind, component, "md_ops", float(md), True, job_id)
