"""The text of Lustre 2.15 server files, from counter values: pure formatting.

Layouts are Lustre's own (the same ones `simulate/captures.py` rewrites in real
captures): `lprocfs_stats_seq_show` for every `stats` file (`%-25s %llu samples [%s] %llu
%llu %llu %llu`, with the `snapshot_time`/`start_time`/`elapsed_time` header of 2.14+),
`lprocfs_jobstats_seq_show` in its 2.14+ form (every operation of every job, `[usecs]`
latencies, a size histogram on the byte counters), the brw_stats histograms
(`%s:\t\t%10lu %3u %3u   | %4lu %3u %3u`), and LNet's one-line `stats`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from iolens.simulate.servers.counters import Histogram, Stat

_SUFFIXES = ((1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K"))

#: Operations in a 2.14+ OST job_stats entry, in Lustre's order.
OST_JOB_OPS = (
    "read_bytes",
    "write_bytes",
    "read",
    "write",
    "getattr",
    "setattr",
    "punch",
    "sync",
    "destroy",
    "create",
    "statfs",
    "get_info",
    "set_info",
    "quotactl",
    "prealloc",
)

#: Operations in a 2.14+ MDT job_stats entry (and md_stats order), in Lustre's order.
MDT_JOB_OPS = (
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
    "parallel_rename_file",
    "parallel_rename_dir",
    "crossdir_rename",
    "read",
    "write",
    "read_bytes",
    "write_bytes",
    "punch",
    "migrate",
)


def label(value: int) -> str:
    """Lustre's label of a power of two: 512, 1K, 4M."""
    for size, suffix in _SUFFIXES:
        if value >= size and value % size == 0:
            return f"{value // size}{suffix}"
    return str(value)


def header(now: float, start: float, colon: bool = False) -> list[str]:
    """The 2.14+ time lines: when read, when the counters started, and the difference."""
    keys = ("snapshot_time", "start_time", "elapsed_time")
    values = (now, start, now - start)
    width = 26 if colon else 0
    return [
        f"{k + ':':<{width}}{v:.9f} secs.nsecs" if colon else f"{k:<25} {v:.9f} secs.nsecs"
        for k, v in zip(keys, values, strict=True)
    ]


def stats_file(now: float, start: float, counters: Iterable[tuple[str, Stat]]) -> str:
    """A `stats`-format file; counters without samples are not printed (as in Lustre)."""
    lines = header(now, start)
    for name, s in counters:
        if s.samples:
            lo, hi, total, squares = s.values()
            lines.append(f"{name:<25} {s.samples} samples [{s.unit}] {lo} {hi} {total} {squares}")
    return "\n".join(lines) + "\n"


def _job_op(name: str, s: Stat | None, unit: str, hist: Mapping[int, int] | None) -> str:
    samples, lo, hi, total, squares = (s.samples, *s.values()) if s else (0, 0, 0, 0, 0)
    body = (
        f"samples: {samples:11d}, unit: {unit:>5}, min: {lo:8d}, max: {hi:8d}, "
        f"sum: {total:16d}, sumsq: {squares:18d}"
    )
    if hist is not None:
        items = ", ".join(f"{label(b)}: {n}" for b, n in sorted(hist.items()) if n)
        body += f", hist: {{ {items} }}" if items else ", hist: {  }"
    return f"  {name + ':':<16} {{ {body} }}"


def job_stats_file(
    jobs: Iterable[tuple[str, float, float, Mapping[str, Stat], Mapping[str, Mapping[int, int]]]],
    ops: Sequence[str],
) -> str:
    """A 2.14+ `job_stats` file: per job (id, snapshot time, start time, counters by op,
    size histograms of the byte counters), every op in `ops` order, zero or not."""
    lines = ["job_stats:"]
    for job_id, snap, start, counters, hists in jobs:
        quoted = f'"{job_id}"' if any(c in job_id for c in ":#\"' {}[],&*?|<>=!%@`") else job_id
        lines.append(f"- job_id:          {quoted}")
        lines.append(f"  snapshot_time:   {snap:.9f} secs.nsecs")
        lines.append(f"  start_time:      {start:.9f} secs.nsecs")
        lines.append(f"  elapsed_time:    {snap - start:.9f} secs.nsecs")
        for op in ops:
            unit = "bytes" if op.endswith("_bytes") else "usecs"
            hist = hists.get(op, {}) if op.endswith("_bytes") else None
            lines.append(_job_op(op, counters.get(op), unit, hist))
    return "\n".join(lines) + "\n"


def _pct(n: int, total: int) -> int:
    return n * 100 // total if total else 0


def histogram_section(title: str, unit: str, h: Histogram) -> list[str]:
    """One brw_stats section: from the first to the last non-empty bucket, every power of
    two in between, percentages and cumulative percentages per column."""
    lines = [
        "",
        "                           read      |     write",
        f"{title:<23}{unit:<6}% cum % |  {unit:<12}% cum %",
    ]
    used = sorted(b for b, c in h.buckets.items() if c[0] or c[1])
    if not used:
        return lines
    totals = [sum(c[i] for c in h.buckets.values()) for i in (0, 1)]
    cum = [0, 0]
    b = used[0]
    while b <= used[-1]:
        r, w = h.buckets.get(b, (0, 0))
        cum[0] += r
        cum[1] += w
        lines.append(
            f"{label(b)}:\t\t{r:10d} {_pct(r, totals[0]):3d} {_pct(cum[0], totals[0]):3d}   | "
            f"{w:4d} {_pct(w, totals[1]):3d} {_pct(cum[1], totals[1]):3d}"
        )
        b *= 2
    return lines


def brw_stats_file(now: float, start: float, sections: Iterable[tuple[str, str, Histogram]]) -> str:
    lines = header(now, start, colon=True)
    for title, unit, h in sections:
        lines += histogram_section(title, unit, h)
    return "\n".join(lines) + "\n"


def lnet_stats_file(values: Sequence[int]) -> str:
    """`msgs_alloc msgs_max errors send_count recv_count route_count drop_count
    send_length recv_length route_length drop_length`."""
    return " ".join(str(int(v)) for v in values) + "\n"
