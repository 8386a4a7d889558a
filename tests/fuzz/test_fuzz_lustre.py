"""Lustre stats, job_stats, brw/rpc_stats histograms and `lctl get_param` dumps, fuzzed.

Each parser is called as a collector calls it (through the file reader), on mutated real
captures and random bytes: a result or an InputError naming the file, never anything else."""

from __future__ import annotations

from pathlib import Path

from hypothesis import example, given

from iolens.parse import lctl, lustre_hist, lustre_jobstats, lustre_stats
from tests.fuzz.harness import fuzz, only_input_errors, scratch
from tests.fuzz.mutate import inputs
from tests.fuzz.seeds import cases, seeds, shared

STATS = seeds(
    cases("lustre_stats"),
    shared(
        "lustre-telegraf-lustre2/*_stats.txt", "lustre-procfs-llnl-lmt/*/proc/fs/lustre/*/*/stats"
    ),
)
JOBSTATS = seeds(
    cases("job_stats"),
    shared("lustre-datadog-integrations-core/oss_jobstats.txt"),
    shared("lustre-procfs-hpe-lustre_exporter/**/job_stats"),
)
HIST = seeds(
    cases("brw_stats"),
    cases("rpc_stats"),
    shared("lustre-lctl-whamcloud-lustrefs-exporter/lustre-collector-fixtures/brw_stats*.txt"),
)
LCTL = seeds(
    cases("lctl"),
    shared("lustre-lctl-whamcloud-lustrefs-exporter/testcmds-stdout/lctl_get_param_*.txt"),
    shared("lustre-lctl-whamcloud-lustrefs-exporter/lustre-collector-fixtures/*.txt"),
)

_DIR = scratch("lustre")


def _file(name: str, data: bytes) -> Path:
    path = _DIR / name
    path.write_bytes(data)
    return path


@given(inputs(STATS))
@example(b"snapshot_time 1.0 secs.nsecs\nread_bytes \xc2\xb2 samples [bytes] 1 2 3\n")
@example(b"read_bytes 1 samples [bytes] 1 2 " + b"7" * 5000 + b"\n")
@example(b"r" * 5000 + b" x samples [bytes]\n")
@fuzz(300)
def test_stats(data: bytes) -> None:
    path = _file("stats", data)
    st = only_input_errors(lambda: lustre_stats.parse_file(path), str(path))
    if st is not None:
        for c in st.by_name().values():  # what every collector does next
            assert c.samples >= 0 and (c.sum is None or float(c.sum) >= 0)


@given(inputs(JOBSTATS))
@example(b"job_stats:\n- job_id: 1\n  read_bytes: { samples: \xd9\xa3, unit: bytes }\n")
@example(b"job_stats:\n- job_id: x\n  write_bytes: { samples: 1, hist: { 4K: 1, 8K } }\n")
@example(b"job_stats:\n- job_id: x\n  " + b"w" * 5000 + b": { samples: x }\n")
@fuzz(300)
def test_job_stats(data: bytes) -> None:
    path = _file("job_stats", data)
    jobs = only_input_errors(lambda: lustre_jobstats.parse_file(path), str(path))
    for job in jobs or []:
        assert job.job_id and all(float(c.samples) >= 0 for c in job.counters)


@given(inputs(HIST))
@example(
    b"snapshot_time: 1.0 (secs.nsecs)\nread write\npages rpcs % cum % | rpcs % cum %\n1: 1 2 3\n"
)
@example(b"read_RPCs_in_flight: " + b"9" * 5000 + b"\n")
@example(b"pages rpcs % cum % | rpcs % cum %\n" + b"1" * 5000 + b"K: 1 2 3 | 1 2 3\n")
@fuzz(300)
def test_histograms(data: bytes) -> None:
    path = _file("brw_stats", data)
    hist = only_input_errors(lambda: lustre_hist.parse_file(path), str(path))
    for h in hist.histograms if hist else ():
        for col in h.columns:
            h.column(col)


@given(inputs(LCTL))
@example(b"obdfilter.x.stats=\nsnapshot_time 1.0 secs.nsecs\npunch \xc2\xb2 samples [reqs]\n")
@fuzz(300)
def test_lctl_get_param(data: bytes) -> None:
    path = _file("lctl.txt", data)
    entries = only_input_errors(lambda: lctl.parse_file(path), str(path))
    for entry in entries or []:
        only_input_errors(lambda e=entry: lctl.parse_value(e, str(path)), str(path))
