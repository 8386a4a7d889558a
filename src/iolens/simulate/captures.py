"""Write time series into real Lustre captures: advance their counters, keep every other byte.

A real capture is one snapshot; a replay needs many. These functions take the text of a
real file (`stats`, `md_stats`, `exports/*/stats`, service `stats`, `job_stats`,
`brw_stats`) and return the same file as the server would print it some time later, after
given increments: counter lines are rewritten in Lustre's own layout, headers get the new
`snapshot_time` (and `elapsed_time` where the version prints it), and every other line is
kept verbatim. Faults are written into real formats this way (a fail-slow OST is an OST
whose `[usecs]` sums grow faster; a storm is an MDT whose `getattr` grows without any job
accounting for it), and tests replay them with `iolens import lustre`.

Layouts follow Lustre's `lprocfs_stats_seq_show` (`%-25s %llu samples [%s] %llu %llu %llu
%llu`), `lprocfs_jobstats_seq_show` (2.10: `{ samples: %11llu, unit: %5s }`; 2.14:
`min`/`max`/`sum`/`sumsq`, `hist`) and the brw_stats histograms (`%s:\t\t%10lu %3u %3u   |
%4lu %3u %3u`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "Delta",
    "advance_histograms",
    "advance_job_stats",
    "advance_stats",
    "cleared_stats",
    "hist_label",
]


@dataclass(frozen=True)
class Delta:
    """What happened to one counter since the previous snapshot.

    `samples` events whose values sum to `total` (bytes, microseconds; None for a pure event
    counter), the smallest `low` and largest `high` of them, and the sum of their squares.
    `unit` is used only when the counter has no line yet (Lustre prints a counter once it
    has samples)."""

    samples: int
    total: int | None = None
    low: int | None = None
    high: int | None = None
    squares: int | None = None
    unit: str = "reqs"


_STATS_LINE = re.compile(
    r"^(?P<name>\S+)(?P<gap>\s+)(?P<count>\d+) samples \[(?P<unit>[^\]]*)\](?P<rest>.*)$"
)
_TIME_LINE = re.compile(
    r"^(?P<key>snapshot_time|start_time|elapsed_time)(?P<sep>:?\s+)(?P<v>\S+)(?P<tail>.*)$"
)


def _secs(t: float, like: str) -> str:
    """A time in the precision the file already uses (`secs.nsecs`, `secs.usecs`, integer)."""
    if "." not in like:
        return str(int(t))
    return f"{t:.{len(like.split('.', 1)[1])}f}"


def _times(line: str, now: float, start: float | None) -> str | None:
    """The header line with `now` (snapshot) or `now - start` (elapsed); None if not one."""
    m = _TIME_LINE.match(line)
    if not m:
        return None
    key, value = m["key"], m["v"]
    if key == "snapshot_time":
        value = _secs(now, value)
    elif key == "elapsed_time" and start is not None:
        value = _secs(now - start, value)
    return f"{key}{m['sep']}{value}{m['tail']}"


def _start(text: str) -> float | None:
    m = re.search(r"^start_time:?\s+(\S+)", text, re.M)
    return float(m[1]) if m else None


def _merge(old: list[int], d: Delta) -> list[int]:
    """min max sum [sumsq] after adding `d` to them."""
    out = list(old)
    if d.samples <= 0:
        return out
    if len(out) >= 3:
        lo = d.low if d.low is not None else out[0]
        hi = d.high if d.high is not None else out[1]
        fresh = out[2] == 0 and out[0] == 0
        out[0] = lo if fresh else min(out[0], lo)
        out[1] = max(out[1], hi)
        out[2] += d.total or 0
    if len(out) >= 4:
        out[3] += d.squares if d.squares is not None else 0
    return out


def _stats_line(name: str, count: int, unit: str, values: list[int]) -> str:
    tail = "".join(f" {v}" for v in values)
    return f"{name:<25} {count} samples [{unit}]{tail}"


def _new_values(d: Delta) -> list[int]:
    if d.total is None:
        return []
    lo = d.low if d.low is not None else d.total // max(d.samples, 1)
    hi = d.high if d.high is not None else d.total // max(d.samples, 1)
    sq = d.squares if d.squares is not None else hi * d.total
    return [lo, hi, d.total, sq]


def advance_stats(text: str, deltas: Mapping[str, Delta], now: float) -> str:
    """A `stats`-format file after `deltas` (by counter name), stamped `now`.

    With duplicate names (2.10 obdfilter prints `statfs` twice) the first line takes the
    increment. Counters without a line get one at the end, as Lustre adds a line once a
    counter has samples."""
    start = _start(text)
    done: set[str] = set()
    lines = []
    for line in text.splitlines():
        timed = _times(line, now, start)
        if timed is not None:
            lines.append(timed)
            continue
        m = _STATS_LINE.match(line)
        if m is None or m["name"] in done or m["name"] not in deltas:
            lines.append(line)
            continue
        d = deltas[m["name"]]
        done.add(m["name"])
        values = [int(v) for v in m["rest"].split()]
        values = _merge(values, d) if values else []
        count = int(m["count"]) + d.samples
        lines.append(_stats_line(m["name"], count, m["unit"], values))
    for name, d in deltas.items():
        if name not in done and d.samples > 0:
            lines.append(_stats_line(name, d.samples, d.unit, _new_values(d)))
    return "\n".join(lines) + "\n"


def cleared_stats(text: str, now: float) -> str:
    """The file right after a reset (restart, `stats=clear`): headers only, a new epoch."""
    lines = []
    for line in text.splitlines():
        m = _TIME_LINE.match(line)
        if m is None:
            continue
        value = m["v"]
        if m["key"] in ("snapshot_time", "start_time"):
            value = _secs(now, value)
        else:
            value = _secs(0.0, value)
        lines.append(f"{m['key']}{m['sep']}{value}{m['tail']}")
    return "\n".join(lines) + "\n"


# -- job_stats ------------------------------------------------------------------------------

_ENTRY = re.compile(r"^- job_id:(?P<gap>\s+)(?P<id>.*)$")
_JOB_TIME = re.compile(
    r"^(?P<lead>\s+)(?P<key>snapshot_time|start_time|elapsed_time):(?P<gap>\s+)(?P<v>\S+)(?P<tail>.*)$"
)
_JOB_OP = re.compile(r"^(?P<lead>\s+)(?P<op>[A-Za-z0-9_]+):(?P<gap>\s+)\{(?P<body>.*)\}\s*$")
_FIELD = re.compile(r"(?P<key>samples|min|max|sum|sumsq):(?P<sp>\s*)(?P<v>\d+)")
_NEEDS_QUOTES = re.compile(r"[:#\"' {}\[\],&*?|<>=!%@`]")


def _quoted(job_id: str, like: str) -> str:
    if like.startswith('"') or _NEEDS_QUOTES.search(job_id):
        return f'"{job_id}"'
    return job_id


def _op_body(body: str, d: Delta) -> str:
    """One `{ samples: ..., unit: ..., min: ..., ... }` body with `d` added, widths kept."""
    fields = {m["key"]: int(m["v"]) for m in _FIELD.finditer(body)}
    if d.samples > 0:
        fields["samples"] = fields.get("samples", 0) + d.samples
        if "sum" in fields:
            fresh = fields["sum"] == 0
            lo = d.low if d.low is not None else (d.total or 0) // d.samples
            hi = d.high if d.high is not None else (d.total or 0) // d.samples
            fields["min"] = lo if fresh else min(fields.get("min", lo), lo)
            fields["max"] = max(fields.get("max", hi), hi)
            fields["sum"] += d.total or 0
            if "sumsq" in fields:
                fields["sumsq"] += d.squares if d.squares is not None else hi * (d.total or 0)

    def put(m: re.Match[str]) -> str:
        value = str(fields[m["key"]])
        width = len(m["sp"]) + len(m["v"])
        return f"{m['key']}:{value.rjust(width) if width > len(value) else ' ' + value}"

    return _FIELD.sub(put, body)


def _blank_body(like: str) -> str:
    """A zeroed counter body in the style of `like` (same fields, empty hist)."""
    zeroed = _FIELD.sub(lambda m: f"{m['key']}:{'0'.rjust(len(m['sp']) + len(m['v']))}", like)
    return re.sub(r"hist:\s*\{[^}]*\}", "hist: {  }", zeroed)


def advance_job_stats(
    text: str,
    deltas: Mapping[str, Mapping[str, Delta]],
    now: float,
    *,
    drop: frozenset[str] = frozenset(),
) -> str:
    """`job_stats` after `deltas` (job id -> counter name -> Delta), stamped `now`.

    Jobs already listed keep their lines with new numbers; new jobs are appended in the
    style of the file's first entry, all counters zero before the increment (the file must
    hold at least one entry to copy the style from). Jobs in `drop` are removed, as Lustre
    does after `job_cleanup_interval`."""
    head: list[str] = []
    entries: list[tuple[str, list[str]]] = []
    for line in text.splitlines():
        m = _ENTRY.match(line)
        if m:
            entries.append((m["id"].strip().strip('"'), [line]))
        elif entries:
            entries[-1][1].append(line)
        else:
            head.append(line)
    if not entries:
        raise ValueError("job_stats has no entry to copy the layout from")
    template = entries[0][1]
    seen = {job for job, _ in entries}
    for job in deltas:
        if job not in seen:
            entries.append((job, _new_entry(template, job, now)))
    out = list(head)
    for job, lines in entries:
        if job in drop:
            continue
        ops = deltas.get(job, {})
        done: set[str] = set()
        start = None
        for line in lines:
            t = _JOB_TIME.match(line)
            if t and t["key"] == "start_time":
                start = float(t["v"])
        for line in lines:
            t = _JOB_TIME.match(line)
            if t:
                v = t["v"]
                if t["key"] == "snapshot_time" and ops:
                    v = _secs(now, v)
                elif t["key"] == "elapsed_time" and ops and start is not None:
                    v = _secs(now - start, v)
                out.append(f"{t['lead']}{t['key']}:{t['gap']}{v}{t['tail']}")
                continue
            o = _JOB_OP.match(line)
            if o and o["op"] in ops:
                done.add(o["op"])
                body = _op_body(o["body"], ops[o["op"]])
                out.append(f"{o['lead']}{o['op']}:{o['gap']}{{{body}}}")
                continue
            out.append(line)
        missing = [op for op in ops if op not in done and ops[op].samples > 0]
        if missing:
            like = next((_JOB_OP.match(x) for x in lines if _JOB_OP.match(x)), None)
            for op in missing:
                body = _blank_body(like["body"]) if like else " samples: 0, unit: reqs "
                body = re.sub(r"unit:\s*\w+", f"unit: {ops[op].unit}", body)
                lead = like["lead"] if like else "  "
                out.append(f"{lead}{op}:{' ' * max(1, 16 - len(op))}{{{_op_body(body, ops[op])}}}")
    return "\n".join(out) + "\n"


def _new_entry(template: list[str], job: str, now: float) -> list[str]:
    first = _ENTRY.match(template[0])
    assert first is not None
    lines = [f"- job_id:{first['gap']}{_quoted(job, first['id'])}"]
    for line in template[1:]:
        t = _JOB_TIME.match(line)
        if t:
            v = _secs(0.0 if t["key"] == "elapsed_time" else now, t["v"])
            lines.append(f"{t['lead']}{t['key']}:{t['gap']}{v}{t['tail']}")
            continue
        o = _JOB_OP.match(line)
        if o:
            lines.append(f"{o['lead']}{o['op']}:{o['gap']}{{{_blank_body(o['body'])}}}")
            continue
        lines.append(line)
    return lines


# -- brw_stats histograms ---------------------------------------------------------------------

_SUFFIXES = ((1 << 40, "T"), (1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K"))
_BUCKET = re.compile(r"^(?P<label>\d+[KMGT]?):\s+(?P<rest>.*)$")
_SECTION = re.compile(r"^(?P<title>\S.*?)\s+(?P<unit>\S+)\s+%\s+cum\s+%")


def hist_label(value: int) -> str:
    """Lustre's bucket label for a power of two: 512, 1K, 4M."""
    for size, suffix in _SUFFIXES:
        if value >= size and value % size == 0:
            return f"{value // size}{suffix}"
    return str(value)


def _label_value(label: str) -> int:
    m = re.fullmatch(r"(\d+)([KMGT]?)", label)
    assert m is not None
    return int(m[1]) * dict((s, v) for v, s in _SUFFIXES).get(m[2], 1)


def _pct(n: int, total: int) -> int:
    return n * 100 // total if total else 0


def _bucket_lines(counts: dict[int, list[int]]) -> list[str]:
    """Rows from the first to the last non-empty bucket, as Lustre prints them."""
    used = sorted(v for v, c in counts.items() if any(c))
    if not used:
        return []
    lo, hi = used[0], used[-1]
    # Lustre prints every bucket between the ends: powers of two in log2 sections, every
    # integer in linear ones (`discontiguous pages` 0, 1, 2 ..., `disk I/Os in flight`).
    linear = any(v & (v - 1) for v in counts) or 0 in counts
    v = lo
    while v < hi:
        counts.setdefault(v, [0, 0])
        v = v + 1 if linear else v * 2
    values = [v for v in sorted(counts) if lo <= v <= hi]
    totals = [sum(counts[v][i] for v in values) for i in (0, 1)]
    cum = [0, 0]
    rows = []
    for v in values:
        r, w = counts[v]
        cum[0] += r
        cum[1] += w
        rows.append(
            f"{hist_label(v)}:\t\t{r:10d} {_pct(r, totals[0]):3d} {_pct(cum[0], totals[0]):3d}   | "
            f"{w:4d} {_pct(w, totals[1]):3d} {_pct(cum[1], totals[1]):3d}"
        )
    return rows


def advance_histograms(
    text: str, deltas: Mapping[str, Mapping[int, tuple[int, int]]], now: float
) -> str:
    """brw_stats after adding (read, write) counts per bucket lower bound, per section title
    (`I/O time (1/1000s)`, `pages per bulk r/w`, ...); percentages recomputed."""
    start = _start(text)
    out: list[str] = []
    title: str | None = None
    counts: dict[int, list[int]] = {}

    def flush() -> None:
        if title is not None:
            for value, (r, w) in deltas.get(title, {}).items():
                c = counts.setdefault(value, [0, 0])
                c[0] += r
                c[1] += w
            out.extend(_bucket_lines(counts))

    for line in text.splitlines():
        timed = _times(line, now, start)
        if timed is not None:
            out.append(timed)
            continue
        s = _SECTION.match(line)
        b = _BUCKET.match(line)
        if s:
            title, counts = s["title"], {}
            out.append(line)
        elif b and title is not None:
            nums = [int(x) for x in b["rest"].replace("|", " ").split()]
            counts[_label_value(b["label"])] = [nums[0], nums[3] if len(nums) > 3 else 0]
        else:
            if title is not None and not line.strip():
                flush()
                title = None
            out.append(line)
    flush()
    return "\n".join(out) + "\n"
