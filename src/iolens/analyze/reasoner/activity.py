"""An activity: one tracer record (a run of `count` like calls) as the reasoner sees it.

SIOX reasons over activities (one per call); iolens's tracer keeps compressed runs, so
an activity here is a record and its per-call figures are the run's mean (`dur_ns /
count`). Workloads whose calls do not merge (random offsets, mixed sizes) give one
activity per call or two; regular runs give fewer, longer activities.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

_EPOCH = dt.datetime(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class Activity:
    node: str
    pid: int
    rank: int | None
    op: str
    path: str | None
    offset: int | None
    size: int
    count: int
    t_start: dt.datetime  # naive UTC, as stored
    t_end: dt.datetime
    dur_ns: int

    @property
    def process(self) -> tuple[str, int]:
        return (self.node, self.pid)

    @property
    def per_call_ns(self) -> float:
        return self.dur_ns / max(self.count, 1)

    @property
    def size_class(self) -> str:
        """Power-of-two size bucket ("4 KiB" holds 4096..8191 bytes); "-" for metadata."""
        return size_class(self.size)

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "pid": self.pid,
            "rank": self.rank,
            "op": self.op,
            "path": self.path,
            "offset": self.offset,
            "size": self.size,
            "count": self.count,
            "t_start": self.t_start,
            "t_end": self.t_end,
            "dur_ns": self.dur_ns,
        }


def size_class(size: int) -> str:
    if size <= 0:
        return "-"
    low = 1 << (size.bit_length() - 1)
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if low >= scale:
            return f"{low // scale} {unit}"
    return f"{low} B"


def from_table(client_io: pa.Table, paths: dict[int, str] | None = None) -> list[Activity]:
    """Activities of `client_io` rows (schema CLIENT_IO), in start order; `paths` names
    the file ids (the `files` table)."""
    paths = paths or {}
    cols = client_io.select(
        ["node", "pid", "rank", "op", "file_id", "offset", "size", "count", "t_start", "t_end"]
        + (["dur_ns"] if "dur_ns" in client_io.column_names else [])
    ).to_pydict()
    n = client_io.num_rows
    durs = cols.get("dur_ns") or [None] * n
    out = []
    for i in range(n):
        t0, t1 = cols["t_start"][i], cols["t_end"][i]
        dur = durs[i]
        if dur is None:  # an older trace without durations: the run's wall span
            dur = int((t1 - t0).total_seconds() * 1e9)
        out.append(
            Activity(
                node=cols["node"][i],
                pid=cols["pid"][i] or 0,
                rank=cols["rank"][i],
                op=cols["op"][i],
                path=paths.get(cols["file_id"][i]) if cols["file_id"][i] is not None else None,
                offset=cols["offset"][i],
                size=cols["size"][i] or 0,
                count=cols["count"][i],
                t_start=t0,
                t_end=t1,
                dur_ns=dur,
            )
        )
    out.sort(key=lambda a: (a.t_start, a.t_end))
    return out
