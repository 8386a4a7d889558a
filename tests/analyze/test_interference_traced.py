"""Interference on a server without jobstats (a MooseFS chunkserver), from the jobs' own
traces through the real ingest path: a victim writing to the server's disk and reading
back from its cache, alone and then beside a culprit.

The victim's loss in a minute is the share of its calls' time there that it would not
have spent alone: 1 - (time alone) / (time taken), summed over its reads and writes.
Found in the MooseFS lab (docs/accuracy.md): judging a minute by the one row that slowed
most (a process, or the read-back) doubled the estimate."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from iolens.analyze import compare
from iolens.analyze.jobs import interference
from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.schema import CLIENT_IO, FILES, JOBS, METRICS, SERVER_SAMPLES
from iolens.store import open_store

CS = "192.0.2.2:19423"
T0 = datetime(2026, 3, 1, 12, 0, 0)
MIB = 1 << 20
ALONE_MIN, BESIDE_MIN = 4, 2
# per minute: (calls, seconds per call); the victim keeps about one call in flight
V_WRITE_ALONE, V_READ_ALONE = (120, 0.5), (600, 0.01)
V_WRITE_BESIDE, V_READ_BESIDE = (80, 0.75), (600, 0.04)
C_WRITE = (480, 0.5)  # the culprit: four processes' worth of calls in flight


def _call(job: str, pid: int, fid: int, op: str, minute: int, calls: int, each: float) -> dict:
    return {"job_id": job, "node": "c1" if job == "v" else "c3", "rank": 0, "pid": pid,
            "layer": "posix", "op": op, "file_id": fid, "offset": 0, "size": MIB,
            "stride": MIB, "count": calls,
            "t_start": T0 + timedelta(minutes=minute, seconds=0.5),
            "t_end": T0 + timedelta(minutes=minute, seconds=59.5),
            "dur_ns": int(calls * each * 1e9)}  # fmt: skip


def _store(path: Path, split_processes: bool):
    io = []
    for m in range(ALONE_MIN + BESIDE_MIN):
        beside = m >= ALONE_MIN
        (wn, wt), (rn, rt) = (
            (V_WRITE_BESIDE, V_READ_BESIDE) if beside else (V_WRITE_ALONE, V_READ_ALONE)
        )
        # a rank's writes and reads: in one process, or the reads in another (a trace has
        # a row per process per target, as periodic flushes and ranks give)
        io.append(_call("v", 1, 1, "write", m, wn, wt))
        io.append(_call("v", 2 if split_processes else 1, 1, "read", m, rn, rt))
        if beside:
            io.append(_call("c", 7, 2, "write", m, *C_WRITE))
    totals = []
    for m in range(ALONE_MIN + BESIDE_MIN):
        moved = sum(r["count"] * r["size"] for r in io if r["t_start"].minute - T0.minute == m)
        total = {f.name: None for f in SERVER_SAMPLES}
        total |= {"ts": T0 + timedelta(minutes=m + 1), "interval_s": 60.0, "kind": "ost",
                  "component_id": CS, "write_bytes": moved, "write_ops": moved // MIB,
                  "service_us": 900.0}  # fmt: skip
        totals.append(total)
    files = [{"file_id": 1, "path": "/mfs/v", "stripe_size": None, "osts": [CS]},
             {"file_id": 2, "path": "/mfs/c", "stripe_size": None, "osts": [CS]}]  # fmt: skip
    store = open_store(str(path), create=True)
    declared = {"ts": T0, "interval_s": 10.0, "kind": "ost", "component_id": CS,
                "metric": "jobstats", "value": 0.0}  # fmt: skip
    load(store, Batch("mfs", server_samples=pa.Table.from_pylist(totals, SERVER_SAMPLES),
                      metrics=pa.Table.from_pylist([declared], METRICS)))  # fmt: skip
    jobs = [{"job_id": "v", "user": "u", "start": T0,
             "end": T0 + timedelta(minutes=ALONE_MIN + BESIDE_MIN), "source": "slurm"},
            {"job_id": "c", "user": "w", "start": T0 + timedelta(minutes=ALONE_MIN),
             "end": T0 + timedelta(minutes=ALONE_MIN + BESIDE_MIN), "source": "slurm"}]  # fmt: skip
    for pid in sorted({r["pid"] for r in io}):  # one batch per process, as the agent ships
        mine = pa.Table.from_pylist([r for r in io if r["pid"] == pid], CLIENT_IO)
        load(store, Batch("trace", client_io=mine, files=pa.Table.from_pylist(files, FILES),
                          jobs=pa.Table.from_pylist(jobs, JOBS)))  # fmt: skip
    return store


def _expected_loss() -> float:
    alone = V_WRITE_BESIDE[0] * V_WRITE_ALONE[1] + V_READ_BESIDE[0] * V_READ_ALONE[1]
    taken = V_WRITE_BESIDE[0] * V_WRITE_BESIDE[1] + V_READ_BESIDE[0] * V_READ_BESIDE[1]
    return (1 - alone / taken) * 60 * BESIDE_MIN  # 0.45 of each minute beside the culprit


@pytest.mark.parametrize("split_processes", [False, True])
def test_reads_and_writes_are_judged_by_their_own_cost(tmp_path, split_processes):
    with _store(tmp_path / "s.duckdb", split_processes) as store:
        rows = store.query(
            "SELECT read_ops, write_ops FROM server_samples WHERE job_id = 'v' "
            "AND source = 'trace' AND ts = ?",
            [T0 + timedelta(minutes=ALONE_MIN + 1)],
        ).to_pylist()
        diag = interference.diagnose(store)
        bw = compare._ost_mean(store, "v").value
    # a row per direction: a mixed one would be judged as its larger (the reads, at cache
    # cost) and its writes' slowdown drowned
    assert sorted((r["read_ops"] or 0, r["write_ops"] or 0) for r in rows) == [(0, 80), (600, 0)]
    assert diag.delays[("v", "c")] == pytest.approx(_expected_loss(), rel=0.05)
    # the job's mean rate on the chunkserver counts each minute once, whatever its rows
    moved = ALONE_MIN * (V_WRITE_ALONE[0] + V_READ_ALONE[0]) + BESIDE_MIN * (
        V_WRITE_BESIDE[0] + V_READ_BESIDE[0]
    )
    assert bw == pytest.approx(moved * MIB / ((ALONE_MIN + BESIDE_MIN) * 60), rel=0.01)
    # the culprit was never alone: it is charged nothing it could be measured against
    assert diag.delays.get(("c", "v"), 0.0) < diag.delays[("v", "c")] / 2
