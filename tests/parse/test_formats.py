"""Table-driven unit tests of the quirks each parser must handle (FORMATS.md)."""

from __future__ import annotations

import pytest

from iolens.parse import lustre_hist, lustre_jobstats, lustre_stats, rates, slurm

SNAP = "snapshot_time             1510782606.789180921 secs.nsecs\n"


@pytest.mark.parametrize(
    ("line", "name", "samples", "unit", "values"),
    [
        ("punch 57 samples [reqs]", "punch", 57, "reqs", (None, None, None, None)),
        (
            "req_waittime 4 samples [usec] 4 6360 135 6955",
            "req_waittime",
            4,
            "usecs",
            (4, 6360, 135, 6955),
        ),
        ("open 136 samples [regs]", "open", 136, "reqs", (None, None, None, None)),
        ("req_timeout 4 samples [sec] 1 31 95 171", "req_timeout", 4, "secs", (1, 31, 95, 171)),
        (
            "write_bytes 51198558 samples [bytes] 4096 1048576 47288584560640 12593290949599166464",
            "write_bytes",
            51198558,
            "bytes",
            (4096, 1048576, 47288584560640, 12593290949599166464),
        ),
        ("grant_rate 17 samples [locks/s] 0 0 0 0", "grant_rate", 17, "locks/s", (0, 0, 0, 0)),
    ],
)
def test_stats_lines(
    line: str, name: str, samples: int, unit: str, values: tuple[int | None, ...]
) -> None:
    (c,) = lustre_stats.parse_stats(SNAP + line + "\n").counters
    assert (c.name, c.samples, c.unit, (c.min, c.max, c.sum, c.sumsq)) == (
        name,
        samples,
        unit,
        values,
    )


def test_stats_duplicates_kept_and_merged() -> None:
    s = lustre_stats.parse_stats(SNAP + "statfs 3 samples [reqs]\nstatfs 4 samples [reqs]\n")
    assert [c.samples for c in s.counters] == [3, 4]
    merged = s.get("statfs")
    assert merged is not None and merged.samples == 7


def test_stats_epoch_from_elapsed_time() -> None:
    s = lustre_stats.parse_stats("snapshot_time 100.5 secs.nsecs\nelapsed_time 40.25 secs.nsecs\n")
    assert s.epoch == pytest.approx(60.25)


@pytest.mark.parametrize(
    ("line", "reliable"),
    [
        ("read 4 samples [usecs] 1 10 20 200", True),
        ("read_bytes 4 samples [bytes] 1 10 20 200", False),  # byte sumsq wraps in practice
        ("read 100 samples [usecs] 1 1000 100000 5", False),  # provably wrapped
        ("read 4 samples [usecs] 1 10 20", False),
    ],
)
def test_sumsq_reliability(line: str, reliable: bool) -> None:
    (c,) = lustre_stats.parse_stats(line + "\n").counters
    assert c.sumsq_reliable is reliable


@pytest.mark.parametrize(
    ("raw", "job_id"),
    [
        ("24", "24"),
        ('"SLURM_JOB10:0:es18kxe-co-client"', "SLURM_JOB10:0:es18kxe-co-client"),
        ("vim.0", "vim.0"),
        ('"a \\"b\\" c"', 'a "b" c'),
        ("'it''s'", "it's"),
        ("job with spaces#1", "job with spaces#1"),
    ],
)
def test_job_ids(raw: str, job_id: str) -> None:
    text = f"job_stats:\n- job_id:          {raw}\n  snapshot_time:   1510782606\n"
    (job,) = lustre_jobstats.parse_job_stats(text)
    assert job.job_id == job_id


def test_jobstats_new_format_with_hist() -> None:
    text = (
        "job_stats:\n- job_id: x\n  snapshot_time: 10.5 secs.nsecs\n"
        "  start_time: 2.0 secs.nsecs\n  elapsed_time: 8.5 secs.nsecs\n"
        "  write_bytes: { samples: 6, unit: bytes, min: 27, max: 26759, sum: 69957, "
        "sumsq: 1599861835, hist: { 32: 2, 4K: 1, 16K: 1, 32K: 2 } }\n"
        "  read_bytes: { samples: 0, unit: bytes, min: 0, max: 0, sum: 0, sumsq: 0, hist: {  } }\n"
    )
    (job,) = lustre_jobstats.parse_job_stats(text)
    wb = job.by_name()["write_bytes"]
    assert (wb.samples, wb.sum, wb.hist[1]) == (6, 69957, ("4K", 1))
    assert job.by_name()["read_bytes"].hist == ()
    assert job.epoch == 2.0


@pytest.mark.parametrize(("label", "value"), [("1", 1), ("1K", 1024), ("4M", 4 << 20), ("32", 32)])
def test_bucket_values(label: str, value: int) -> None:
    assert lustre_hist.bucket_value(label) == value


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ("hero[4515-4516]", ["hero4515", "hero4516"]),
        ("node[01-03,07]", ["node01", "node02", "node03", "node07"]),
        ("a1,b[8-10]", ["a1", "b8", "b9", "b10"]),
        ("r[1-2]n[1-2]", ["r1n1", "r1n2", "r2n1", "r2n2"]),
        ("None assigned", []),
        ("", []),
    ],
)
def test_hostlist(expr: str, names: list[str]) -> None:
    assert slurm.expand_hostlist(expr) == names


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("00:03:09", 189),
        ("1-04:33:44", 102824),
        ("03:00.532", 180.532),
        ("UNLIMITED", None),
        ("", None),
    ],
)
def test_durations(text: str, seconds: float | None) -> None:
    assert slurm.parse_duration(text) == (pytest.approx(seconds) if seconds else None)


@pytest.mark.parametrize(
    ("job_id", "parts"),
    [
        ("123", ("123", None, None, None)),
        ("123.batch", ("123", None, None, "batch")),
        ("123_4", ("123", "4", None, None)),
        ("123_4.0", ("123", "4", None, "0")),
        ("123_[1-5]", ("123", "[1-5]", None, None)),
        ("123+1.extern", ("123", None, 1, "extern")),
    ],
)
def test_job_id_parts(job_id: str, parts: tuple[object, ...]) -> None:
    p = slurm.parse_job_id(job_id)
    assert (p.job, p.array_task, p.het_offset, p.step) == parts


def test_sacct_header_and_unknown_values() -> None:
    text = "JobID|User|Start|End|Elapsed|NodeList\n7|bob|Unknown|None|00:00:00|n[1-2]\n"
    (row,) = slurm.parse_sacct(text)
    assert (row.start, row.end, row.nodes, row.user) == (None, None, ("n1", "n2"), "bob")


@pytest.mark.parametrize(
    ("before", "after", "delta", "reset", "wrapped"),
    [
        (10, 25, 15, False, False),
        (1000, 7, 7, True, False),  # restart: count since restart, never negative
        (2**64 - 5, 10, 15, False, True),  # u64 wrap
        (2**63 + 1, 2**62 + 1, 2**62 + 1, True, False),  # decrease into upper range: restart
    ],
)
def test_counter_delta(before: int, after: int, delta: int, reset: bool, wrapped: bool) -> None:
    assert rates.counter_delta(before, after) == (delta, reset, wrapped)


def test_rates_skip_new_counters_and_honour_epoch() -> None:
    out = rates.rates({"a": 10, "b": 5}, {"a": 30, "c": 1}, 2.0)
    assert set(out) == {"a"} and out["a"].rate == 10.0
    assert rates.rates({"a": 10}, {"a": 30}, 2.0, restarted=True)["a"].delta == 30
    with pytest.raises(ValueError):
        rates.rates({}, {}, 0)
