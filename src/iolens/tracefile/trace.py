"""`decode(path) -> TraceFile`: one process's trace, ready for the store."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import pwd
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from iolens.errors import InputError
from iolens.tracefile import format as fmt
from iolens.tracefile.layout import Layout
from iolens.tracefile.reader import RawTrace, read
from iolens.tracefile.tables import Clock, client_io_table, files_table, summaries_table

#: Spool files end with this; `*.iolens.partial` files are still being written (or their
#: process was killed) and are not decoded by decode_dir.
SUFFIX = ".iolens"


def _utc(ns: int) -> dt.datetime:
    """Naive UTC datetime (the store's timestamp[us] convention), microsecond precision."""
    return dt.datetime(1970, 1, 1) + dt.timedelta(microseconds=ns // 1000)


@dataclass(frozen=True)
class TraceFile:
    """One traced process (one file): identity, completeness, and three Arrow tables."""

    path: Path
    job_id: str
    host: str
    pid: int
    ppid: int
    rank: int | None
    exe: str
    user: str
    uid: int
    start: dt.datetime  # UTC
    end: dt.datetime  # UTC
    #: True when records were dropped (memory budget, spool errors), files folded into
    #: "<other>", or calls missed: client_io is then incomplete; `summaries` still counts
    #: every recorded call (dropped ones included).
    partial: bool
    dropped_records: int
    dropped_calls: int
    dropped_files: int
    #: calls made by signal handlers while the tracer was busy in the same thread
    missed_calls: int
    spool_errors: int
    calls: int  # calls recorded (the uncompressed trace would have this many records)
    flags: int
    segment: int
    files: pa.Table  # iolens.model.schema.FILES
    client_io: pa.Table  # iolens.model.schema.CLIENT_IO
    summaries: pa.Table  # iolens.tracefile.tables.SUMMARIES
    #: MPI-IO hints passed at open: path -> {key: value} (the last open of each file)
    hints: dict[str, dict[str, str]] = field(default_factory=dict)
    #: Lustre layouts of the files opened on Lustre, by path (format version 3)
    layouts: dict[str, Layout] = field(default_factory=dict)
    #: layouts the tracer read but could not keep (undecodable, or no room)
    layouts_lost: int = 0
    version: int = fmt.FORMAT_VERSION  # the file's format version
    #: a periodic flush, not the process's last file: records since the previous file,
    #: cumulative summaries; the last file a process left being interim means it was
    #: killed before its final flush (version 4)
    interim: bool = False
    #: k for interim file k; in a final file, the number of interim files before it
    interval: int = 0

    @property
    def records(self) -> int:
        return self.client_io.num_rows

    @property
    def exec_written(self) -> bool:
        """Written just before exec() replaced the program."""
        return bool(self.flags & fmt.F_EXEC)

    @property
    def forked(self) -> bool:
        return bool(self.flags & fmt.F_FORKED)


def _user(name: str, uid: int) -> str:
    if name:
        return name
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def decode(path: str | os.PathLike[str], data: bytes | None = None) -> TraceFile:
    """Decode one tracer file (`data`: its bytes, if not to be read from `path`); raises
    iolens.errors.InputError naming the file if it is corrupt or truncated.

    The reader validates what it knows to check; anything else a hostile or damaged file
    can still trip on (numpy, Arrow, datetime ranges) is turned into the same InputError,
    so a spool's bad file costs only itself."""
    p = Path(path)
    try:
        return _decode(p, read(p, data))
    except (ArithmeticError, IndexError, KeyError, ValueError, TypeError, pa.ArrowException) as e:
        raise InputError(display(p), f"corrupt trace: {type(e).__name__}: {e}") from None


def display(p: str | os.PathLike[str]) -> str:
    """A file name fit for a message or the store whatever its bytes (`\\xNN` escapes)."""
    return os.fsencode(p).decode("utf-8", "backslashreplace")


def _decode(p: Path, raw: RawTrace) -> TraceFile:
    h = raw.header
    rank = int(h["rank"])
    rank_or_none = rank if rank >= 0 else None
    job_id = raw.job_id or f"unknown-{raw.host}"
    clock = Clock(raw)
    used = np.union1d(raw.records["file"], raw.summaries["file"][raw.summaries["ops"].sum(1) > 0])
    files, ids = files_table(raw, used[used != fmt.FILE_NONE])
    return TraceFile(
        path=p,
        job_id=job_id,
        host=raw.host,
        pid=int(h["pid"]),
        ppid=int(h["ppid"]),
        rank=rank_or_none,
        exe=raw.exe,
        user=_user(raw.user, int(h["uid"])),
        uid=int(h["uid"]),
        start=_utc(int(h["start_wall_ns"])),
        end=_utc(int(h["end_wall_ns"])),
        partial=bool(int(h["flags"]) & fmt.F_PARTIAL),
        dropped_records=int(h["dropped_records"]),
        dropped_calls=int(h["dropped_calls"]),
        dropped_files=int(h["dropped_files"]),
        missed_calls=int(h["missed_calls"]),
        spool_errors=int(h["spool_errors"]),
        calls=int(h["calls"]),
        flags=int(h["flags"]),
        segment=int(h["segment"]),
        files=files,
        client_io=client_io_table(raw, ids, job_id, rank_or_none, clock),
        summaries=summaries_table(raw, ids, job_id, rank_or_none, clock),
        hints={raw.paths[i]: _pairs(text) for i, text in raw.hints.items() if i in raw.paths},
        layouts={raw.paths[i]: lay for i, lay in raw.layouts.items() if i in raw.paths},
        layouts_lost=int(h["layouts_lost"]) if raw.version >= 3 else 0,
        version=raw.version,
        interim=bool(int(h["flags"]) & fmt.F_INTERIM),
        interval=int(h["interval"]) if raw.version >= 4 else 0,
    )


def _pairs(text: str) -> dict[str, str]:
    """`key=value` lines -> dict (a value may itself contain `=`)."""
    out = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            out[key] = value
    return out


def decode_bytes(data: bytes, name: str) -> TraceFile:
    """A tracer file an agent shipped as written (`name`: its file name on the node)."""
    return decode(Path(name), data)


def process_of(t: TraceFile) -> tuple[str, int, dt.datetime, int]:
    """What the files of one process segment share: host, pid, start, segment."""
    return (t.host, t.pid, t.start, t.segment)


def merge(files: Iterable[TraceFile]) -> TraceFile:
    """One process segment's files (its interim files and its final one) as one trace:
    records concatenated (they are disjoint), everything else from the last file, whose
    summaries and counters are cumulative. If that last file is interim the process was
    killed before its final flush: the result stays `interim` and is `partial`."""
    ordered = sorted(files, key=lambda t: (not t.interim, t.interval))
    last = ordered[-1]
    if last.interim and not last.partial:
        last = dataclasses.replace(last, partial=True)
    if len(ordered) == 1:
        return last
    known = pa.concat_tables([t.files for t in reversed(ordered)])
    _, first = np.unique(known.column("file_id").to_numpy(), return_index=True)
    return dataclasses.replace(
        last,
        client_io=pa.concat_tables([t.client_io for t in ordered]),
        files=known.take(pa.array(np.sort(first))),
        hints={k: v for t in ordered for k, v in t.hints.items()},
        layouts={k: v for t in ordered for k, v in t.layouts.items()},
    )


def decode_dir(spool_dir: str | os.PathLike[str]) -> Iterator[TraceFile]:
    """Decode the complete `*.iolens` files under `spool_dir`: one trace per process
    segment (its interim files merged, `merge`), in the order of their first file name."""
    groups: dict[tuple[str, int, dt.datetime, int], list[TraceFile]] = {}
    for p in sorted(Path(spool_dir).rglob(f"*{SUFFIX}")):
        if p.is_file():
            t = decode(p)
            groups.setdefault(process_of(t), []).append(t)
    for files in groups.values():
        yield merge(files)
