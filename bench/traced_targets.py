"""Cost of attributing a trace to its files' targets at ingest (`ingest/traced_targets.py`).

A trace batch of `--records` merged records over `--files` files, each striped over four
targets, is loaded into a store that already holds `--samples` server rows, once with the
attribution and once without (the baseline, same process, alternating), `--repeat` times
each. Two stores: one whose targets report jobstats (Lustre: the attribution runs, finds
jobstats near the trace's time and keeps nothing) and one whose targets do not (MooseFS:
the rows are kept).

    .venv/bin/python bench/traced_targets.py [--records 2000] [--samples 1000000]
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src")]

from iolens.ingest import traced_targets  # noqa: E402
from iolens.model.batch import Batch  # noqa: E402
from iolens.model.schema import CLIENT_IO, FILES, METRICS, SERVER_SAMPLES  # noqa: E402
from iolens.store import open_store  # noqa: E402

T0 = datetime(2026, 5, 1)
load_mod = importlib.import_module("iolens.ingest.load")  # the module, not `ingest.load`
OSTS = [f"fs-OST{i:04x}" for i in range(64)]


def server_rows(n: int, jobstats: bool) -> pa.Table:
    rng = np.random.default_rng(1)
    ts = [T0 + timedelta(seconds=int(s)) for s in np.sort(rng.integers(0, 86400, n))]
    rows = {f.name: pa.nulls(n, f.type) for f in SERVER_SAMPLES}
    rows |= {
        "ts": pa.array(ts, pa.timestamp("us")),
        "interval_s": pa.array(np.full(n, 60.0)),
        "kind": pa.array(["ost"] * n),
        "component_id": pa.array([OSTS[i % len(OSTS)] for i in range(n)]),
        "job_id": pa.array([f"j{i % 50}" if jobstats and i % 3 else None for i in range(n)]),
        "write_bytes": pa.array(rng.integers(0, 1 << 30, n)),
    }
    return pa.table(rows, schema=SERVER_SAMPLES)


def trace_batch(records: int, files: int, key: str) -> Batch:
    rng = np.random.default_rng(2)
    start = T0 + timedelta(hours=12)
    t0 = [start + timedelta(seconds=float(s)) for s in np.sort(rng.uniform(0, 600, records))]
    io = {f.name: pa.nulls(records, f.type) for f in CLIENT_IO}
    io |= {
        "job_id": pa.array(["job7"] * records),
        "node": pa.array(["c1"] * records),
        "op": pa.array(rng.choice(["read", "write", "open"], records).tolist()),
        "file_id": pa.array(rng.integers(0, files, records)),
        "size": pa.array(np.full(records, 1 << 20)),
        "count": pa.array(rng.integers(1, 64, records)),
        "t_start": pa.array(t0, pa.timestamp("us")),
        "t_end": pa.array([t + timedelta(seconds=5) for t in t0], pa.timestamp("us")),
        "dur_ns": pa.array(rng.integers(1_000_000, 5_000_000_000, records)),
    }
    lay = {
        "file_id": pa.array(np.arange(files)),
        "path": pa.array([f"/fs/f{i}" for i in range(files)]),
        "stripe_size": pa.nulls(files, pa.int64()),
        "osts": pa.array([OSTS[i % 60 : i % 60 + 4] for i in range(files)]),
    }
    return Batch(
        "bench",
        key=key,
        client_io=pa.table(io, schema=CLIENT_IO),
        files=pa.table(lay, schema=FILES),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=2000)
    p.add_argument("--files", type=int, default=16)
    p.add_argument("--samples", type=int, default=1_000_000)
    p.add_argument("--repeat", type=int, default=7)
    a = p.parse_args()
    real = load_mod.target_rows
    for name, jobstats in (("jobstats (Lustre)", True), ("no jobstats (MooseFS)", False)):
        with (
            tempfile.TemporaryDirectory() as d,
            open_store(str(Path(d) / "s.duckdb"), create=True) as s,
        ):
            load_mod.load(s, Batch("seed", server_samples=server_rows(a.samples, jobstats)))
            if not jobstats:
                declared = [{"ts": T0 + timedelta(hours=11), "interval_s": 10.0, "kind": "ost",
                             "component_id": o, "metric": "jobstats", "value": 0.0}
                            for o in OSTS]  # fmt: skip
                load_mod.load(s, Batch("moosefs", metrics=pa.Table.from_pylist(declared, METRICS)))
            times: dict[bool, list[float]] = {True: [], False: []}
            for i in range(a.repeat):
                for on in (False, True):
                    load_mod.target_rows = real if on else (lambda *_: None)
                    b = trace_batch(a.records, a.files, f"{name}:{i}:{on}")
                    t = time.perf_counter()
                    load_mod.load(s, b)
                    times[on].append(time.perf_counter() - t)
            load_mod.target_rows = real
            kept = s.query("SELECT count(*) AS n FROM server_samples WHERE source = 'trace'")
            off, on = statistics.median(times[False]), statistics.median(times[True])
            print(
                f"{name}: load {off * 1e3:.1f} ms -> {on * 1e3:.1f} ms with attribution "
                f"(x{on / off:.2f}, +{(on - off) * 1e3:.1f} ms); rows kept "
                f"{kept.column('n')[0].as_py()}"
            )
    assert traced_targets.BIN_S == 60


if __name__ == "__main__":
    main()
