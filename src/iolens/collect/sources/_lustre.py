"""What the three Lustre sources share: where a parameter's file lives, and quiet reads.

Lustre moved its files between versions: up to 2.10 everything is under `/proc/fs/lustre`;
from 2.12 tunables and small gauges are in `/sys/fs/lustre` and the big statistics
(service `stats`, `brw_stats`, client `llite` stats) in debugfs, `/sys/kernel/debug/lustre`.
`lctl get_param` hides this; an agent reading files must not, so every lookup tries the three
bases in :data:`BASES` order and takes the first file that exists. Parsing is left to
:mod:`iolens.parse`; this module only finds text and turns the shared shapes (service queue
stats, capacity gauges) into readings.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from iolens.collect.base import Reading
from iolens.errors import InputError
from iolens.parse import lustre_hist, lustre_jobstats, lustre_stats
from iolens.parse._common import is_digits, parse_int

#: Where a `<type>.<target>.<param>` can live, in the order they are tried.
BASES = ("proc/fs/lustre", "sys/fs/lustre", "sys/kernel/debug/lustre")

#: Service queue counters, each a per-request sample whose mean over the interval is wanted.
SERVICE_MEANS = {
    "req_waittime": "wait_us",  # usecs a request sat in the queue before a thread took it
    "req_qdepth": "queue_len",  # requests already queued when this one arrived
    "req_active": "active_threads",  # requests being handled at that moment (busy threads)
    "req_timeout": "timeout_s",  # adaptive timeout in force: grows when the server is slow
    "reqbuf_avail": "reqbuf_avail",  # free receive buffers: near 0 means requests are dropped
}

#: Opcodes left out of `service_us`: keep-alives that would drown the mean on a quiet server.
UNTIMED_OPCODES = frozenset({"obd_ping"})

#: Capacity parameter -> (metric, factor to the metric's unit).
CAPACITY = {
    "kbytestotal": ("space_total_bytes", 1024),
    "kbytesfree": ("space_free_bytes", 1024),
    "kbytesavail": ("space_avail_bytes", 1024),
    "filestotal": ("files_total", 1),
    "filesfree": ("files_free", 1),
}


def read_quiet(path: Path | str) -> str | None:
    """The file's text, or None when it does not exist (a target can vanish mid-round).

    Trailing NULs are dropped: sysfs files copied by size come padded to a 4 KiB page
    (seen in the LLNL LMT 2.15 captures), and the parsers rightly reject them."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read().rstrip("\x00")
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def targets(root: Path, obd_type: str) -> list[str]:
    """Names of the directories under `<base>/<obd_type>/` in any base, sorted."""
    names: set[str] = set()
    for base in BASES:
        try:
            names.update(p.name for p in (root / base / obd_type).iterdir() if p.is_dir())
        except (FileNotFoundError, NotADirectoryError):
            continue
    return sorted(names)


def osd_types(root: Path) -> list[str]:
    """The OSD back-end directories present (`osd-ldiskfs`, `osd-zfs`), sorted."""
    return [t for t in targets(root, ".") if t.startswith("osd-")]


#: Where each parameter was found last: (root, obd_type, target, param) -> (index in BASES,
#: or -1 for nowhere; when). An agent reads the same ~100 files every round; trying the
#: three bases each time costs failed opens, a tenth of a round on a Lustre server. A file
#: found is read there directly next time (and looked for again if gone); "nowhere" is
#: believed for NOWHERE_TTL_S seconds, so a parameter that appears is read within that.
_WHERE: dict[tuple[str, str, str, str], tuple[int, float]] = {}
NOWHERE_TTL_S = 60.0
_WHERE_MAX = 1 << 16  # replaying many captured trees must not grow it without bound


def find(root: Path, obd_type: str, target: str, param: str) -> tuple[str, str] | None:
    """(text, path) of the first `<base>/<obd_type>/<target>/<param>` that exists."""
    key = (str(root), obd_type, target, param)
    now = time.monotonic()
    known = _WHERE.get(key)
    if known is not None:
        index, when = known
        if index < 0 and now - when < NOWHERE_TTL_S:
            return None
        if index >= 0:
            path = os.path.join(key[0], BASES[index], obd_type, target, param)
            text = read_quiet(path)
            if text is not None:
                return text, path
    if len(_WHERE) >= _WHERE_MAX:
        _WHERE.clear()
    for index, base in enumerate(BASES):
        path = os.path.join(key[0], base, obd_type, target, param)
        text = read_quiet(path)
        if text is not None:
            _WHERE[key] = (index, now)
            return text, path
    _WHERE[key] = (-1, now)
    return None


def stats(root: Path, obd_type: str, target: str, param: str) -> lustre_stats.LustreStats | None:
    found = find(root, obd_type, target, param)
    return lustre_stats.parse_stats(found[0], found[1]) if found else None


def job_stats(root: Path, obd_type: str, target: str) -> list[lustre_jobstats.JobStats] | None:
    found = find(root, obd_type, target, "job_stats")
    return lustre_jobstats.parse_job_stats(found[0], found[1]) if found else None


def histograms(
    root: Path, obd_types: list[str], target: str, param: str
) -> lustre_hist.HistogramFile | None:
    """The first `param` histogram file found under any of `obd_types`, in that order."""
    for obd_type in obd_types:
        found = find(root, obd_type, target, param)
        if found:
            return lustre_hist.parse_histograms(found[0], found[1])
    return None


def born(job: lustre_jobstats.JobStats) -> float:
    """When a job_stats entry's counters started from zero (`Reading.fresh`): its 2.14+
    epoch, else -inf (an entry is created at the job's first request, so one that was
    not there at the previous round was born since)."""
    epoch = job.epoch
    return float("-inf") if epoch is None else epoch


def integer(root: Path, obd_type: str, target: str, param: str) -> int | None:
    """A one-number parameter file (`kbytesfree`, `threads_started`); None when absent."""
    found = find(root, obd_type, target, param)
    if found is None:
        return None
    text, path = found
    token = text.strip()
    if not is_digits(token):
        raise InputError(path, f"{param}: expected a non-negative integer, got {token[:40]!r}", 1)
    return parse_int(token, path, 1, param)  # a u64: 5,000 digits made int() raise


def capacity(
    root: Path, kind: str, target: str, obd_type: str, osds: list[str]
) -> Iterator[Reading]:
    """Space and inode gauges of a target: `<obd_type>/<target>/` first (obdfilter, mdt), then
    the target's directory under each OSD type in `osds`, where MDTs keep them."""
    where = [obd_type, *osds]
    for param, (metric, factor) in CAPACITY.items():
        for t in where:
            value = integer(root, t, target, param)
            if value is not None:
                yield Reading(kind, target, metric, float(value * factor), counter=False)
                break


def service(
    root: Path, kind: str, component: str, svc_dir: str, svc: str, prefix: str
) -> Iterator[Reading]:
    """One PTLRPC service (`ost/OSS/ost_io`, `mds/MDS/mdt`): queue means, handling time,
    request count and thread gauges, with metric names prefixed by `prefix`.

    Each mean is (cumulative sum, cumulative samples) so the agent reports the mean per
    request over the interval. Lustre prints only counters that have samples, so a service
    that exists but has been idle reports zeros: the next round then has a baseline."""
    st = stats(root, svc_dir, svc, "stats")
    if st is not None:
        by = st.by_name()
        for counter, metric in SERVICE_MEANS.items():
            c = by.get(counter)
            total, events = (c.sum or 0, c.samples) if c else (0, 0)
            yield Reading(
                kind, component, prefix + metric, float(total), counter=False, per=float(events)
            )
        timed = [
            c
            for c in by.values()
            if c.unit == "usecs"
            and c.sum is not None
            and c.name not in SERVICE_MEANS
            and c.name not in UNTIMED_OPCODES
        ]
        yield Reading(
            kind,
            component,
            prefix + "service_us",
            float(sum(c.sum or 0 for c in timed)),
            counter=False,
            per=float(sum(c.samples for c in timed)),
        )
        waits = by.get("req_waittime")
        yield Reading(kind, component, prefix + "requests", float(waits.samples if waits else 0))
    for param in ("threads_started", "threads_max"):
        value = integer(root, svc_dir, svc, param)
        if value is not None:
            yield Reading(kind, component, prefix + param, float(value), counter=False)


def services(root: Path, kind: str, component: str, svc_dir: str, main: str) -> Iterator[Reading]:
    """Every service under `svc_dir`: `main` with plain metric names (they feed the wide
    `server_samples` table), the others prefixed with their own name (`ost_create_wait_us`)."""
    for svc in targets(root, svc_dir):
        yield from service(root, kind, component, svc_dir, svc, "" if svc == main else svc + "_")


log = logging.getLogger("iolens.collect")
_reported: set[str] = set()


def isolated(part: Callable[[], Iterator[Reading]]) -> list[Reading]:
    """One file's readings, or none when the file is malformed: a bad line in one target's
    file costs that file, never the server's other targets (issue 19). Each distinct
    error is logged once, naming the file and line."""
    try:
        return list(part())
    except InputError as exc:
        message = str(exc)
        if message not in _reported:
            if len(_reported) >= 1000:  # a file bad in a new way each round: stay bounded
                _reported.clear()
            _reported.add(message)
            log.error("skipped a malformed file: %s", message)
        return []
