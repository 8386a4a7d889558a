"""Lustre object storage server: per-OST traffic and latency, per-job traffic, the I/O queue.

Per OST (kind `ost`, component = target name such as `lustrefs-OST0000`):

- `obdfilter.<ost>.stats`: `read_bytes`/`write_bytes` (bytes moved) and their sample counts
  (`read_ops`/`write_ops`, bulk RPCs), the other object operations summed into `md_ops`,
  and on 2.12+ `service_us`, the mean time the OST spent on a read or write RPC (the
  `read`/`write` `[usecs]` sums over their samples);
- `obdfilter.<ost>.job_stats`: the same traffic metrics per job (`job_id` set) and, on 2.12+,
  the job's own `service_us` from its `read`/`write` `[usecs]` entries;
- `brw_stats` `pages per bulk r/w`: RPCs per size bucket, `brw_rpc_pages_<n>_read|write`
  (the bucket labelled n counts RPCs of n/2+1 to n pages; Lustre rounds up to a power of
  two): many small RPCs are the classic sign of small or random I/O reaching the disks;
- `brw_stats` `I/O time (1/1000s)`: disk I/Os per time bucket, `brw_io_time_ms_<n>_read|write`
  (bucket n holds I/Os of more than n/2 and at most n ms), and their mean `brw_io_time_us`
  (each bucket counted at the middle of its range): the latency signal of OSTs without
  `[usecs]` (Lustre 2.10). ldiskfs times every disk I/O; osd-zfs times only reads that took
  at least a clock tick (writes go through the DMU untimed; reads served by the ARC take none);
- capacity gauges (`space_*_bytes`, `files_*`).

Per OSS (kind `oss`, component = host): the PTLRPC services under `ost/OSS/` — `ost_io`,
which carries the bulk I/O, with the plain names `wait_us`, `queue_len`, `active_threads`,
`service_us`, the others prefixed (`ost_create_wait_us`); see `_lustre.service`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.collect.sources import _lustre
from iolens.parse.lustre_hist import HistogramFile
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

#: The brw_stats section of RPC sizes, and the prefix of its metrics.
BRW_SECTION = "pages per bulk r/w"
BRW_PREFIX = "brw_rpc_pages_"

#: The brw_stats section of disk I/O times (`I/O time (1/1000s)`; Lustre 1.8 printed the
#: kernel's tick rate, `1/250s`), the prefix of its bucket metrics and its mean.
IO_TIME_SECTION = re.compile(r"^I/O time \(1/(\d+)s\)$")
IO_TIME_PREFIX = "brw_io_time_ms_"
IO_TIME_MEAN = "brw_io_time_us"


class LustreOssSource:
    """Why an OST is slow or busy, and which jobs make it so."""

    name: ClassVar[str] = "lustre_oss"

    def __init__(self, host: str, kind: str | None = None) -> None:
        self.host = host
        self.kind = kind or "oss"

    def collect(self, root: Path) -> Iterator[Reading]:
        osds = _lustre.osd_types(root)
        isolated = _lustre.isolated
        for ost in _lustre.targets(root, "obdfilter"):
            yield from isolated(lambda ost=ost: self._ost_stats(root, ost))
            yield from isolated(lambda ost=ost: self._job_stats(root, ost))
            yield from isolated(lambda ost=ost: self._brw_stats(root, ost, osds))
            yield from isolated(
                lambda ost=ost: _lustre.capacity(root, "ost", ost, "obdfilter", osds)
            )
        yield from isolated(
            lambda: _lustre.services(root, self.kind, self.host, "ost/OSS", "ost_io")
        )

    def _ost_stats(self, root: Path, ost: str) -> Iterator[Reading]:
        st = _lustre.stats(root, "obdfilter", ost, "stats")
        if st is None:
            return
        by = st.by_name()
        yield from traffic("ost", ost, by, None)
        yield from service_time("ost", ost, by, None)

    def _job_stats(self, root: Path, ost: str) -> Iterator[Reading]:
        for job in _lustre.job_stats(root, "obdfilter", ost) or []:
            by, born = job.by_name(), _lustre.born(job)
            yield from traffic("ost", ost, by, job.job_id, born)
            yield from service_time("ost", ost, by, job.job_id, born)

    def _brw_stats(self, root: Path, ost: str, osds: list[str]) -> Iterator[Reading]:
        # 2.10 links obdfilter/<ost>/brw_stats to the OSD's file; 2.12+ has only the OSD's.
        hist = _lustre.histograms(root, [*osds, "obdfilter"], ost, "brw_stats")
        if hist is None:
            return
        section = hist.section(BRW_SECTION)
        if section is not None:
            for bucket in section.buckets:
                for column, count in zip(section.columns, bucket.counts, strict=True):
                    yield Reading("ost", ost, f"{BRW_PREFIX}{bucket.lower}_{column}", float(count))
        yield from io_time(ost, hist)


def io_time(ost: str, hist: HistogramFile) -> Iterator[Reading]:
    """The `I/O time` histogram: a counter per bucket and column, and the mean time per I/O.

    Lustre tallies a value v in the bucket labelled n = the smallest power of two >= v
    (`lprocfs_oh_tally_log2`), so bucket n holds (n/2, n] ticks and bucket 1 holds 0 and 1;
    the mean counts each I/O at the middle of its bucket (0.75 n, 0.5 for bucket 1). Coarse
    (a factor of two per bucket), but a disk twice as slow moves every I/O one bucket up."""
    found = [(h, m) for h in hist.histograms if (m := IO_TIME_SECTION.match(h.title))]
    if not found:
        return
    section, match = found[0]
    tick_ms = 1000 / int(match[1])
    weighted = events = 0.0
    for bucket in section.buckets:
        ms = bucket.lower * tick_ms
        middle_us = 1000 * (0.5 * tick_ms if bucket.lower == 1 else 0.75 * ms)
        for column, count in zip(section.columns, bucket.counts, strict=True):
            yield Reading("ost", ost, f"{IO_TIME_PREFIX}{ms:g}_{column}", float(count))
            weighted += count * middle_us
            events += count
    yield Reading("ost", ost, IO_TIME_MEAN, weighted, counter=False, per=events)


def service_time(
    kind: str,
    component: str,
    by: dict[str, StatsCounter] | dict[str, JobCounter],
    job_id: str | None,
    fresh: float | None = None,
) -> Iterator[Reading]:
    """`service_us` from the `read`/`write` `[usecs]` counters (2.12+), per bulk RPC.

    Lustre (`ofd_preprw_read`/`_write`, 2.12-2.15) times a read from the start of handling
    to its data being read from disk, and a write up to its buffers being ready (grant,
    range lock), before the bulk transfer and the commit: a slow disk shows fully in reads
    and partly in writes. Nothing on versions without `[usecs]` (2.10)."""
    timed = [by[n] for n in ("read", "write") if n in by and by[n].unit == "usecs"]
    if timed:
        yield Reading(
            kind,
            component,
            "service_us",
            float(sum(c.sum or 0 for c in timed)),
            counter=False,
            job_id=job_id,
            per=float(sum(c.samples for c in timed)),
            fresh=fresh,
        )


def traffic(
    kind: str,
    component: str,
    by: dict[str, StatsCounter] | dict[str, JobCounter],
    job_id: str | None,
    fresh: float | None = None,
) -> Iterator[Reading]:
    """read/write bytes and ops, and md_ops, from one stats file or one job's entry
    (`fresh`: when a job entry was born, see `Reading.fresh`).

    Lustre omits counters that have no samples yet, so a missing one is a true zero; it is
    reported as such so that the first real value has a baseline to be rated against."""
    for op in ("read", "write"):
        c = by.get(f"{op}_bytes")
        nbytes = float(c.sum or 0) if c else 0.0
        yield Reading(kind, component, f"{op}_bytes", nbytes, True, job_id, fresh=fresh)
        ops = float(c.samples) if c else 0.0
        yield Reading(kind, component, f"{op}_ops", ops, True, job_id, fresh=fresh)
    md = sum(c.samples for name, c in by.items() if name in OST_MD_OPS)
    yield Reading(kind, component, "md_ops", float(md), True, job_id, fresh=fresh)
