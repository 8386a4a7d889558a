"""Lustre metadata server: per-MDT, per-job and per-client metadata operations, the MDS queue.

Per MDT (kind `mdt`, component = target name such as `lustrefs-MDT0000`):

- `mdt/<mdt>/md_stats`: every operation summed into `md_ops`, and each one as `md_<op>`
  (`md_open`, `md_getattr`, `md_unlink`, ...); with 2.12+ `[usecs]` counters also
  `service_us`, the mean time per operation. Data-on-MDT traffic (`read_bytes`,
  `write_bytes`, `read`, `write`) is not metadata: its bytes and counts are reported as
  `read_bytes`/`read_ops`/`write_bytes`/`write_ops` when the MDT prints them;
- `mdt/<mdt>/job_stats`: the same per job (`job_id` = the id exactly as Lustre prints it:
  `12345`, or `find.1003` for a process outside any job; `iolens.model.ids` tells them
  apart), with `service_us` when the entries carry `[usecs]` (2.12+);
- capacity gauges (`space_*_bytes`, `files_*`), from the MDT's OSD directory.

Per client of an MDT (kind `mdt_client`, component = `<mdt>:<nid>`, e.g.
`lustrefs-MDT0000:172.20.20.4@o2ib`; split at the first `:`, target names have none):
`mdt/<mdt>/exports/<nid>/stats`, the operations md_stats counts, for that client only,
summed into `md_ops` (the MDT's own `md_<op>` give the mix). These name the node behind a
metadata storm, job or not. Only clients whose counters moved in the interval are
reported (`Reading.sparse`): an MDS keeps an export for every client that mounted the file
system, thousands of them mostly idle, and each costs the agent one counter of state.

Per MDS (kind `mds`, component = host): the PTLRPC services under `mds/MDS/` — `mdt`, the
main metadata service, with the plain names `wait_us` (`req_waittime`), `queue_len`
(`req_qdepth`), `active_threads` (`req_active`), `service_us`, the others prefixed
(`mdt_readpage_wait_us`); see `_lustre.service`. The MDTs a host reports are the ones it
serves (the same agent round, hence the same sample time).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.collect.sources import _lustre
from iolens.parse.lustre_jobstats import JobCounter
from iolens.parse.lustre_stats import StatsCounter

#: Operations every MDT counts (FORMATS.md 1.1). Lustre prints a counter only once it has
#: samples; these are reported as 0 until then so their first increase is rated. Operations
#: of newer versions (`parallel_rename_*`, `migrate`, `punch`) are reported once they appear.
MDT_OPS = (
    "open",
    "close",
    "mknod",
    "link",
    "unlink",
    "mkdir",
    "rmdir",
    "rename",
    "getattr",
    "setattr",
    "getxattr",
    "setxattr",
    "statfs",
    "sync",
    "samedir_rename",
    "crossdir_rename",
)

#: Data-on-MDT counters: traffic, not metadata operations.
DATA_COUNTERS = frozenset({"read_bytes", "write_bytes", "read", "write"})


class LustreMdsSource:
    """Which jobs load the metadata server, with what, and how long requests wait."""

    name: ClassVar[str] = "lustre_mds"

    def __init__(self, host: str, kind: str | None = None) -> None:
        self.host = host
        self.kind = kind or "mds"

    def collect(self, root: Path) -> Iterator[Reading]:
        osds = _lustre.osd_types(root)
        isolated = _lustre.isolated
        for mdt in _lustre.targets(root, "mdt"):
            yield from isolated(lambda mdt=mdt: _md_stats(root, mdt))
            yield from isolated(lambda mdt=mdt: _job_stats(root, mdt))
            yield from isolated(lambda mdt=mdt: clients(root, mdt))
            yield from isolated(lambda mdt=mdt: _lustre.capacity(root, "mdt", mdt, "mdt", osds))
        yield from isolated(lambda: _lustre.services(root, self.kind, self.host, "mds/MDS", "mdt"))


def _md_stats(root: Path, mdt: str) -> Iterator[Reading]:
    st = _lustre.stats(root, "mdt", mdt, "md_stats")
    if st is not None:
        yield from metadata("mdt", mdt, st.by_name(), None, timed=True)


def _job_stats(root: Path, mdt: str) -> Iterator[Reading]:
    for job in _lustre.job_stats(root, "mdt", mdt) or []:
        born = _lustre.born(job)
        yield from metadata("mdt", mdt, job.by_name(), job.job_id, timed=True, fresh=born)


def clients(root: Path, mdt: str) -> Iterator[Reading]:
    """Per-client operations from `exports/<nid>/stats`, reported only when they moved.

    One counter per client (not one per operation): 5,000 exports are 5,000 counters of
    agent state, and the MDT's md_stats already give the operation mix."""
    exports = f"mdt/{mdt}/exports"
    for nid in _lustre.targets(root, exports):
        st = _lustre.stats(root, exports, nid, "stats")
        if st is None:
            continue
        total = sum(c.samples for c in st.counters if c.name not in DATA_COUNTERS)
        yield Reading("mdt_client", f"{mdt}:{nid}", "md_ops", float(total), sparse=True)


def metadata(
    kind: str,
    component: str,
    by: dict[str, StatsCounter] | dict[str, JobCounter],
    job_id: str | None,
    *,
    timed: bool,
    fresh: float | None = None,
) -> Iterator[Reading]:
    """md_ops, md_<op>, Data-on-MDT traffic and (if `timed`) service_us of one MDT or job:
    the mean time per metadata operation, from the `[usecs]` counters of 2.12+ (2.10
    counts `[reqs]` only and gets none)."""
    ops = {name: c for name, c in by.items() if name not in DATA_COUNTERS}
    total = sum(c.samples for c in ops.values())
    yield Reading(kind, component, "md_ops", float(total), True, job_id, fresh=fresh)
    for name in sorted(set(MDT_OPS) | set(ops)):
        c = ops.get(name)
        value = float(c.samples) if c else 0.0
        yield Reading(kind, component, f"md_{name}", value, True, job_id, fresh=fresh)
    for op in ("read", "write"):
        c = by.get(f"{op}_bytes")
        if c is not None:
            yield Reading(
                kind, component, f"{op}_bytes", float(c.sum or 0), True, job_id, fresh=fresh
            )
            yield Reading(kind, component, f"{op}_ops", float(c.samples), True, job_id, fresh=fresh)
    latencies = [c for c in ops.values() if c.unit == "usecs" and c.sum is not None]
    if timed and latencies:
        yield Reading(
            kind,
            component,
            "service_us",
            float(sum(c.sum or 0 for c in latencies)),
            counter=False,
            job_id=job_id,
            per=float(sum(c.samples for c in latencies)),
            fresh=fresh,
        )
