"""Slurm accounting: `sacct --parsable2` / `--parsable` output and hostlist expressions.

Rows are `|`-separated (or `--delimiter=`); `--parsable` adds a trailing delimiter; the header
line is present unless `--noheader`, in which case the caller passes the `--format` field names
(FORMATS.md 4.1). Per row this keeps every field as text in `fields` and decodes the ones the
store needs: job id parts (steps `123.batch`, arrays `123_4`, het jobs `123+0`), times (local
time as sacct prints it; `Unknown`/`None` -> None), elapsed (`[D-]HH:MM:SS`, `MM:SS.mmm`) and the
node list, hostlist-expanded (`hero[4515-4516]` -> two names) so it joins with per-node data.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TypeVar

from iolens.errors import InputError
from iolens.parse._common import DEFAULT_SOURCE, is_digits, read_text, shown

__all__ = [
    "JobIdParts",
    "SacctRecord",
    "expand_hostlist",
    "hostlist_size",
    "parse_duration",
    "parse_file",
    "parse_job_id",
    "parse_sacct",
    "parse_time",
]

_T = TypeVar("_T")
_NO_TIME = {"", "Unknown", "None", "N/A"}
_NO_DURATION = {"", "UNLIMITED", "Partition_Limit", "INVALID", "NONE", "None"}
_NO_NODES = {"", "None assigned", "(null)", "None"}
_DURATION = re.compile(r"^(?:(?P<d>\d+)-)?(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+)(?:\.(?P<f>\d+))?$")
_JOBID = re.compile(
    r"^(?P<base>\d+)(?:_(?P<task>\d+|\[[^\]]*\]))?(?:\+(?P<het>\d+))?(?:\.(?P<step>[^.]+))?$"
)


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm hostlist: `node[01-03,07],gpu5` -> node01 node02 node03 node07 gpu5.
    Zero padding is kept, several bracket groups multiply (`r[1-2]n[1-2]`), and the
    placeholders sacct prints for no nodes (`None assigned`, empty) give []."""
    expr = expr.strip()
    if expr in _NO_NODES:
        return []
    parts = _split_top(expr)
    total = sum(_count(part, expr) for part in parts)
    if total > MAX_HOSTS:
        raise ValueError(
            f"hostlist {shown(expr)} names {total:,} hosts, more than any cluster "
            f"({MAX_HOSTS:,}): not expanded"
        )
    names: list[str] = []
    for part in parts:
        names.extend(_expand_one(part, expr))
    return names


def hostlist_size(expr: str) -> int:
    """How many names `expr` expands to, without expanding it (ValueError when malformed)."""
    expr = expr.strip()
    if expr in _NO_NODES:
        return 0
    return sum(_count(part, expr) for part in _split_top(expr))


#: The most hosts one hostlist may name: ten times the largest machines' node counts, so a
#: mistyped or hostile `n[1-999999999]` costs an error, not minutes and gigabytes.
MAX_HOSTS = 2_000_000
#: The most names the distinct node lists of one sacct file may expand to (~1 GB): without
#: it, a file of many rows just under MAX_HOSTS each would still take every gigabyte.
MAX_FILE_HOSTS = 20_000_000


def _count(part: str, expr: str) -> int:
    """How many names `part` expands to, without expanding it."""
    n = 1
    for group in re.findall(r"\[([^\]]*)\]", part):
        size = 0
        for rng in group.split(","):
            lo, sep, hi = rng.strip().partition("-")
            if not is_digits(lo) or (sep and not is_digits(hi)):
                raise ValueError(f"bad range {shown(rng)} in hostlist {shown(expr)}")
            if len(lo) > 18 or len(hi) > 18:  # no cluster numbers its nodes past 10^18
                raise ValueError(f"range {shown(rng)} in hostlist {shown(expr)} is too large")
            if sep and int(hi) < int(lo):
                # refused here, not only when expanding: a negative size would cancel a huge
                # range's (`[1-100000000,200000000-1]`) and the cap would let it through
                raise ValueError(f"descending range {shown(rng)} in hostlist {shown(expr)}")
            size += int(hi) - int(lo) + 1 if sep else 1
        n *= max(size, 0)
        if n > MAX_HOSTS:
            return n
    return n


def _split_top(expr: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in expr:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"unbalanced ']' in hostlist {shown(expr)}")
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    if depth != 0:
        raise ValueError(f"unbalanced '[' in hostlist {shown(expr)}")
    parts.append("".join(cur))
    return [p for p in parts if p]


def _expand_one(part: str, expr: str) -> list[str]:
    """Every name of one comma-free part: the product of its bracket groups' values, joined
    with the text around them (one join per name: recursing per group re-scanned each
    partial name, and 2 M names took seconds)."""
    pieces = _GROUP.split(part)  # text, group, text, group, ..., text
    choices = [[p] if i % 2 == 0 else _group_values(p, expr) for i, p in enumerate(pieces)]
    return ["".join(name) for name in itertools.product(*choices)]


_GROUP = re.compile(r"\[([^\]]*)\]")


def _group_values(group: str, expr: str) -> list[str]:
    """`01-03,07` -> 01 02 03 07: zero padding kept when the low end has it (or both ends
    have the same width)."""
    values: list[str] = []
    for rng in group.split(","):
        lo, sep, hi = rng.strip().partition("-")
        if not is_digits(lo) or (sep and not is_digits(hi)):
            raise ValueError(f"bad range {shown(rng)} in hostlist {shown(expr)}")
        if not sep:
            values.append(lo)
            continue
        if int(hi) < int(lo):
            raise ValueError(f"descending range {shown(rng)} in hostlist {shown(expr)}")
        width = len(lo) if lo.startswith("0") or len(lo) == len(hi) else 0
        values += [str(i).zfill(width) for i in range(int(lo), int(hi) + 1)]
    return values


def parse_duration(text: str) -> float | None:
    """Seconds from `[D-]HH:MM:SS`, `MM:SS.mmm` (TotalCPU) or `MM:SS`; None for
    `UNLIMITED`/`Partition_Limit`/empty. Raises ValueError when malformed."""
    t = text.strip()
    if t in _NO_DURATION:
        return None
    m = _DURATION.match(t)
    if not m:
        raise ValueError(f"bad duration {shown(text)}")
    secs = int(m["d"] or 0) * 86400 + int(m["h"] or 0) * 3600 + int(m["m"]) * 60 + int(m["s"])
    return secs + (float("0." + m["f"]) if m["f"] else 0.0)


def parse_time(text: str) -> datetime | None:
    """An ISO-8601 sacct time (site-local, naive); None for `Unknown`/`None`/empty."""
    t = text.strip()
    if t in _NO_TIME:
        return None
    try:
        return datetime.fromisoformat(t)
    except ValueError as exc:
        raise ValueError(f"bad time {shown(text)}") from exc


@dataclass(frozen=True, slots=True)
class JobIdParts:
    """`123_4+0.batch` -> job `123`, array task `4`, het offset `0`, step `batch`."""

    job: str
    array_task: str | None
    het_offset: int | None
    step: str | None


def parse_job_id(text: str) -> JobIdParts:
    """Split a sacct JobID; raises ValueError when it is not one."""
    m = _JOBID.match(text.strip())
    if not m:
        raise ValueError(f"bad job id {shown(text)}")
    return JobIdParts(m["base"], m["task"], int(m["het"]) if m["het"] else None, m["step"])


@dataclass(frozen=True, slots=True)
class SacctRecord:
    """One sacct row. `fields` holds every column by its `--format` name as printed (case
    kept); the typed attributes are None when the column was not requested or is empty."""

    job_id: str
    id_parts: JobIdParts
    user: str | None
    name: str | None
    partition: str | None
    state: str | None
    exit_code: str | None
    nnodes: int | None
    ncpus: int | None
    submit: datetime | None
    start: datetime | None
    end: datetime | None
    elapsed_s: float | None
    nodes: tuple[str, ...]
    fields: Mapping[str, str]
    line: int

    @property
    def is_step(self) -> bool:
        """True for step rows (`.batch`, `.extern`, `.0`), which share the job's allocation."""
        return self.id_parts.step is not None


def parse_sacct(
    text: str,
    source: str = DEFAULT_SOURCE,
    *,
    fields: Sequence[str] | None = None,
    delimiter: str = "|",
) -> list[SacctRecord]:
    """Parse sacct parsable output. Without `fields` the first non-empty line is the header.
    A `JobID` (or `JobIDRaw`) column is required."""
    lines = list(enumerate(text.splitlines(), start=1))
    rows = [(n, ln) for n, ln in lines if ln.strip()]
    if fields is None:
        if not rows:
            return []
        hn, header = rows.pop(0)
        names = _cells(header, None, delimiter)
        if not any(n.lower() in ("jobid", "jobidraw") for n in names):
            raise InputError(source, "header has no JobID column (pass fields= for --noheader)", hn)
    else:
        names = list(fields)
    lower = {n.lower(): i for i, n in enumerate(names)}
    if "jobid" not in lower and "jobidraw" not in lower:
        raise InputError(source, "fields have no JobID column")
    nodes = _NodeLists(source)
    return [
        _record(names, lower, _cells(ln, len(names), delimiter, source, n), source, n, nodes)
        for n, ln in rows
    ]


class _NodeLists:
    """Each distinct NodeList of a file expanded once (a job's steps repeat its list, and
    share the tuple), within MAX_FILE_HOSTS names per file (issue 19)."""

    def __init__(self, source: str) -> None:
        self.source = source
        self.seen: dict[str, tuple[str, ...]] = {}
        self.names = 0

    def __call__(self, expr: str, lineno: int) -> tuple[str, ...]:
        got = self.seen.get(expr)
        if got is None:
            size = hostlist_size(expr)
            if self.names + size > MAX_FILE_HOSTS:
                raise InputError(
                    self.source,
                    f"node lists name more than {MAX_FILE_HOSTS:,} hosts in one file: "
                    "import it in parts (sacct --starttime/--endtime)",
                    lineno,
                )
            got = self.seen[expr] = tuple(expand_hostlist(expr))
            self.names += len(got)
        return got


def parse_file(
    path: str | Path, *, fields: Sequence[str] | None = None, delimiter: str = "|"
) -> list[SacctRecord]:
    """Read and parse saved sacct output; errors name `path`."""
    return parse_sacct(read_text(path), str(path), fields=fields, delimiter=delimiter)


def _cells(
    line: str, want: int | None, delimiter: str, source: str = DEFAULT_SOURCE, lineno: int = 0
) -> list[str]:
    cells = line.rstrip("\r\n").split(delimiter)
    if want is None:
        if cells and cells[-1] == "":  # --parsable header
            cells.pop()
        return [c.strip() for c in cells]
    if len(cells) == want + 1 and cells[-1] == "":  # --parsable: trailing delimiter
        cells.pop()
    if len(cells) != want:
        raise InputError(source, f"expected {want} fields, got {len(cells)}", lineno)
    return cells


def _record(
    names: list[str],
    lower: dict[str, int],
    cells: list[str],
    source: str,
    lineno: int,
    node_lists: _NodeLists,
) -> SacctRecord:
    def get(key: str) -> str | None:
        i = lower.get(key)
        if i is None:
            return None
        return cells[i] if cells[i] != "" else None

    def conv(key: str, fn: Callable[[str], _T]) -> _T | None:
        raw = get(key)
        if raw is None:
            return None
        try:
            return fn(raw)
        except ValueError as exc:
            raise InputError(source, f"{names[lower[key]]}: {exc}", lineno) from exc

    job_id = get("jobid") or get("jobidraw")
    if job_id is None:
        raise InputError(source, "empty JobID", lineno)
    try:
        parts = parse_job_id(job_id)
        nodes = node_lists(get("nodelist") or "", lineno)
    except ValueError as exc:
        raise InputError(source, str(exc), lineno) from exc
    return SacctRecord(
        job_id=job_id,
        id_parts=parts,
        user=get("user"),
        name=get("jobname"),
        partition=get("partition"),
        state=get("state"),
        exit_code=get("exitcode"),
        nnodes=conv("nnodes", int),
        ncpus=conv("ncpus", int),
        submit=conv("submit", parse_time),
        start=conv("start", parse_time),
        end=conv("end", parse_time),
        elapsed_s=conv("elapsed", parse_duration),
        nodes=nodes,
        fields=dict(zip(names, cells, strict=True)),
        line=lineno,
    )
