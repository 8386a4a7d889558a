"""Malformed input raises InputError naming the source and the line, for every parser."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from iolens.errors import InputError
from iolens.parse import infiniband, lctl, lustre_hist, lustre_jobstats, lustre_stats, slurm

SNAP = "snapshot_time             1510782606.789180921 secs.nsecs\n"
JOB = "job_stats:\n- job_id:          24\n  snapshot_time:   1510782606\n"
BRW = (
    "snapshot_time:         1510782606.797216394 (secs.nsecs)\n\n"
    "                           read      |     write\n"
    "pages per bulk r/w     rpcs  % cum % |  rpcs        % cum %\n"
)
F = ["JobID", "User", "Start", "Elapsed", "NodeList"]

CASES: list[tuple[str, Callable[[str, str], Any], str, int, str]] = [
    # (id, parser, text, bad line, words the message must contain)
    (
        "stats-garbage",
        lustre_stats.parse_stats,
        SNAP + "read_bytes 5 samples [bytes] 1 2 3\nthis is not a counter\n",
        3,
        "not a stats line",
    ),
    ("stats-count", lustre_stats.parse_stats, SNAP + "punch x samples [reqs]\n", 2, "integer"),
    (
        "stats-two-numbers",
        lustre_stats.parse_stats,
        SNAP + "punch 5 samples [reqs] 1 2\n",
        2,
        "0, 3 or 4",
    ),
    ("stats-time", lustre_stats.parse_stats, "snapshot_time abc secs.nsecs\n", 1, "seconds"),
    (
        "jobstats-op",
        lustre_jobstats.parse_job_stats,
        JOB + "  read: { samples: x, unit: reqs }\n",
        4,
        "integer",
    ),
    (
        "jobstats-nosamples",
        lustre_jobstats.parse_job_stats,
        JOB + "  read: { unit: reqs }\n",
        4,
        "samples",
    ),
    ("jobstats-orphan", lustre_jobstats.parse_job_stats, "  read: { samples: 1 }\n", 1, "job_id"),
    (
        "jobstats-hist",
        lustre_jobstats.parse_job_stats,
        JOB + "  write_bytes: { samples: 1, unit: bytes, hist: { 4K } }\n",
        4,
        "hist",
    ),
    ("brw-columns", lustre_hist.parse_histograms, BRW + "1:\t\t 13  56  56\n", 5, "column"),
    ("brw-garbage", lustre_hist.parse_histograms, BRW + "what is this\n", 5, "histogram"),
    ("lctl-orphan", lctl.parse_get_param, "some value\nmemused=1\n", 1, "before any"),
    (
        "perfquery",
        infiniband.parse_perfquery,
        "# Port extended counters: Lid 1 port 1\nPortXmitData:.....x12\n",
        2,
        "integer",
    ),
    ("perfquery-orphan", infiniband.parse_perfquery, "PortXmitData:.....12\n", 1, "perfquery"),
    (
        "ibnetdiscover",
        infiniband.parse_ibnetdiscover,
        "CA 1 1 0x1 4x EDR 'h1'\nrubbish\n",
        2,
        "ibnetdiscover",
    ),
    (
        "sacct-fields",
        lambda t, s: slurm.parse_sacct(t, s, fields=F),
        "1|u|Unknown|00:01\n",
        1,
        "fields",
    ),
    (
        "sacct-time",
        lambda t, s: slurm.parse_sacct(t, s, fields=F),
        "1|u|Unknown|00:01|n1\n2|u|yesterday|00:01|n1\n",
        2,
        "Start",
    ),
    (
        "sacct-elapsed",
        lambda t, s: slurm.parse_sacct(t, s, fields=F),
        "1|u|None|1:2:3:4|n1\n",
        1,
        "Elapsed",
    ),
    (
        "sacct-hostlist",
        lambda t, s: slurm.parse_sacct(t, s, fields=F),
        "1|u|None|00:01|n[3-1]\n",
        1,
        "range",
    ),
    (
        "sacct-jobid",
        lambda t, s: slurm.parse_sacct(t, s, fields=F),
        "abc|u|None|00:01|n1\n",
        1,
        "job id",
    ),
    ("sacct-header", slurm.parse_sacct, "User|State\nbob|RUNNING\n", 1, "JobID"),
]


@pytest.mark.parametrize(
    ("parser", "text", "line", "words"), [pytest.param(*c[1:], id=c[0]) for c in CASES]
)
def test_error_names_source_and_line(
    parser: Callable[[str, str], Any], text: str, line: int, words: str
) -> None:
    with pytest.raises(InputError) as info:
        parser(text, "capture/x.txt")
    err = info.value
    assert err.source == "capture/x.txt"
    assert err.line == line
    assert str(err).startswith(f"capture/x.txt:{line}: ")
    assert words.lower() in str(err).lower()


def test_lctl_sub_parser_reports_line_in_whole_output() -> None:
    text = "memused=1\nobdfilter.fs-OST0000.stats=\n" + SNAP + "punch x samples [reqs]\n"
    (stats_entry,) = [e for e in lctl.parse_get_param(text, "dump.txt") if e.path.name == "stats"]
    with pytest.raises(InputError) as info:
        lctl.parse_value(stats_entry, "dump.txt")
    assert (info.value.source, info.value.line) == ("dump.txt", 4)


def test_parse_file_names_the_path(tmp_path: Path) -> None:
    bad = tmp_path / "stats"
    bad.write_text(SNAP + "oops\n")
    with pytest.raises(InputError, match=rf"^{bad}:2: "):
        lustre_stats.parse_file(bad)


def test_sysfs_counter_names_the_file() -> None:
    with pytest.raises(InputError) as info:
        infiniband.parse_sysfs_port("mlx5_0", 1, {"port_xmit_data": "lots\n"}, source="p/1")
    assert info.value.source == "p/1/counters/port_xmit_data"
    assert info.value.line == 1
