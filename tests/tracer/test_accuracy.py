"""Decoded byte and op counts equal what each workload counted itself, exactly."""

from __future__ import annotations

import pytest

from tests.tracer.conftest import expected, needs_cc, run, summarised, traced

pytestmark = needs_cc

MODES = ["nn", "threads", "fork", "fork_exit", "n1", "small", "stdio", "meta", "compat"]


@pytest.mark.parametrize("mode", MODES)
def test_counts_are_exact(mode, tracer_lib, workload, tmp_path):
    n = {"small": 100_000, "meta": 200}.get(mode, 4)
    r = run(workload, mode, tmp_path, n=n, lib=tracer_lib)
    assert r.rc == 0, r.stderr
    traces = r.traces()
    want = expected(r)
    assert traced(traces, r.base) == want
    assert summarised(traces, r.base) == want
    # one file per process, each with the pid the process reported
    assert sorted(t.pid for t in traces) == sorted(c["pid"] for c in r.counts)
    for t in traces:
        assert not t.partial and t.dropped_records == 0
        assert t.job_id == "test-job"


def test_small_writes_compress_to_one_record(tracer_lib, workload, tmp_path):
    r = run(workload, "small", tmp_path, n=100_000, lib=tracer_lib)
    (t,) = r.traces()
    writes = [x for x in t.client_io.to_pylist() if x["op"] == "write" and x["size"] == 1]
    assert len(writes) == 1 and writes[0]["count"] == 100_000
    assert writes[0]["stride"] == 1 and writes[0]["offset"] == 0


def test_n1_strided_is_one_record_per_process(tracer_lib, workload, tmp_path):
    nprocs, bs = 4, 4096
    r = run(workload, "n1", tmp_path, n=nprocs, lib=tracer_lib)
    children = [t for t in r.traces() if t.forked]
    assert len(children) == nprocs
    offsets = set()
    for t in children:
        (w,) = [x for x in t.client_io.to_pylist() if x["op"] == "write" and x["size"] == bs]
        assert w["count"] == 200 and w["size"] == bs and w["stride"] == nprocs * bs
        offsets.add(w["offset"])
    assert offsets == {k * bs for k in range(nprocs)}


def test_metadata_merges_per_directory(tracer_lib, workload, tmp_path):
    r = run(workload, "meta", tmp_path, n=200, lib=tracer_lib)
    (t,) = r.traces()
    paths = dict(
        zip(t.files.column("file_id").to_pylist(), t.files.column("path").to_pylist(), strict=True)
    )
    stats = [x for x in t.client_io.to_pylist() if x["op"] == "stat"]
    assert len(stats) == 1 and stats[0]["count"] == 200
    assert paths[stats[0]["file_id"]] == str(r.base / "mdir")
    assert t.client_io.num_rows < 20  # 200 x (open, close, stat, unlink) + a few


def test_budget_overflow_is_counted_not_silent(tracer_lib, workload, tmp_path):
    """1 MiB budget, no mid-run spill: records drop, summaries stay exact, `partial` set."""
    n = 50_000
    r = run(
        workload,
        "scatter",
        tmp_path,
        n=n,
        lib=tracer_lib,
        env={"IOLENS_BUFFER_MB": "1", "IOLENS_SPILL": "0"},
    )
    assert r.rc == 0
    (t,) = r.traces()
    assert t.partial and t.dropped_records > 0
    want = expected(r)
    assert summarised([t], r.base) == want
    got_ops, _, got_wb = traced([t], r.base)
    assert got_ops["write"] + t.dropped_calls >= n  # every call is in a record or counted
    assert got_wb < want[2]


def test_budget_overflow_spills_to_the_spool(tracer_lib, workload, tmp_path):
    """1 MiB budget with spill (default): nothing is lost."""
    r = run(workload, "scatter", tmp_path, n=50_000, lib=tracer_lib, env={"IOLENS_BUFFER_MB": "1"})
    (t,) = r.traces()
    assert not t.partial and t.dropped_records == 0
    assert traced([t], r.base) == expected(r)
    assert t.client_io.num_rows > 16_384  # more than fits in memory at once
