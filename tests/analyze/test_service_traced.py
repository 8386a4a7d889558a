"""Who occupied a chunkserver, from trace-attributed job rows (no jobstats): the job rows
carry what each job's calls waited, and the load nobody traced is what the server moved
beyond the traced bytes."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

from iolens.analyze.jobs import service
from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.schema import CLIENT_IO, FILES, JOBS, METRICS, SERVER_SAMPLES
from iolens.store import open_store

CS = "192.0.2.2:19423"
T0 = datetime(2026, 3, 1, 12, 0, 0)
MIB = 1 << 20


def _io(job: str, fid: int, calls: int, seconds_each: float) -> dict:
    return {"job_id": job, "node": "c1", "rank": 0, "pid": 1, "layer": "posix", "op": "write",
            "file_id": fid, "offset": 0, "size": MIB, "stride": MIB, "count": calls,
            "t_start": T0 + timedelta(seconds=5), "t_end": T0 + timedelta(seconds=55),
            "dur_ns": int(calls * seconds_each * 1e9)}  # fmt: skip


def test_traced_rows_share_the_chunkserver_and_leave_the_rest_to_others(tmp_path: Path) -> None:
    # The chunkserver moved 400 MiB in the minute; the two traced jobs 100 + 100 MiB.
    total = {f.name: None for f in SERVER_SAMPLES}
    total |= {"ts": T0 + timedelta(seconds=60), "interval_s": 60.0, "kind": "ost",
              "component_id": CS, "write_bytes": 400 * MIB, "write_ops": 6400,
              "service_us": 900.0}  # fmt: skip
    io = [_io("a", 1, 100, 0.02), _io("b", 2, 100, 0.06)]
    files = [{"file_id": 1, "path": "/mfs/a", "stripe_size": None, "osts": [CS]},
             {"file_id": 2, "path": "/mfs/b", "stripe_size": None, "osts": [CS]}]  # fmt: skip
    with open_store(str(tmp_path / "s.duckdb"), create=True) as store:
        declared = {"ts": T0, "interval_s": 10.0, "kind": "ost", "component_id": CS,
                    "metric": "jobstats", "value": 0.0}  # fmt: skip
        load(
            store,
            Batch(
                "mfs",
                server_samples=pa.Table.from_pylist([total], SERVER_SAMPLES),
                metrics=pa.Table.from_pylist([declared], METRICS),
            ),
        )
        load(
            store,
            Batch(
                "trace",
                client_io=pa.Table.from_pylist(io, CLIENT_IO),
                files=pa.Table.from_pylist(files, FILES),
                jobs=pa.Table.from_pylist(
                    [{"job_id": j, "user": "u", "start": T0} for j in ("a", "b")], JOBS
                ),
            ),
        )
        s = service.load(store, int(T0.timestamp()) - 3600, int(T0.timestamp()) + 3600)
    assert sorted(s.job.tolist()) == ["a", "b"]
    by = dict(zip(s.job.tolist(), range(len(s)), strict=True))
    # busy = calls x client time per call: 100 x 20 ms and 100 x 60 ms, in us
    assert np.isclose(s.busy[by["a"]], 2e6) and np.isclose(s.busy[by["b"]], 6e6)
    assert np.isclose(s.latency[by["b"]], 60_000.0)
    # half the bytes were nobody's trace: the target's busy time is twice the jobs'
    assert np.isclose(s.group_busy[0], 16e6)
    assert np.isclose(s.group_other[0], 8e6)
    assert np.isclose(s.share[by["b"]], 6 / 16)
