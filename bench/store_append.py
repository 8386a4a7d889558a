"""Store append throughput for client records (goal: >= 1 M records/s per core).

Appends Arrow batches of realistic client records into a fresh DuckDB file through the
ingest path, with DuckDB limited to 1 and to 2 threads, and compares with row-by-row
INSERTs (the thing the issue forbids) measured in the same process.

    python bench/store_append.py [--records 2000000] [--repeat 5]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import median, table, timed
from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.schema import CLIENT_IO
from iolens.store import DuckDBStore


def client_records(n: int, seed: int = 0) -> pa.Table:
    """Records shaped like a 1,024-node job mix: few jobs, many nodes, merged runs."""
    rng = np.random.default_rng(seed)
    nodes = np.array([f"cn{i:05d}" for i in range(1024)], object)
    node_i = rng.integers(0, 1024, n)
    t0 = 1_741_000_000_000_000 + np.sort(rng.integers(0, 7200 * 10**6, n))
    size = rng.choice([2048, 1 << 20, 4 << 20], n)
    return pa.table(
        {
            "job_id": pa.array((100000 + rng.integers(0, 80, n)).astype(str)),
            "node": nodes[node_i],
            "rank": (node_i * 4 + rng.integers(0, 4, n)).astype(np.int32),
            "pid": rng.integers(1000, 60000, n).astype(np.int32),
            "layer": pa.array(np.full(n, "posix", object)),
            "op": rng.choice(np.array(["read", "write", "open", "close"], object), n),
            "file_id": rng.integers(-(2**62), 2**62, n),
            "offset": rng.integers(0, 2**40, n),
            "size": size,
            "stride": size,
            "count": rng.integers(1, 200, n),
            "t_start": t0.astype("datetime64[us]"),
            "t_end": (t0 + rng.integers(0, 10**7, n)).astype("datetime64[us]"),
            "dur_ns": rng.integers(0, 10**10, n),
        },
        schema=CLIENT_IO,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline-rows", type=int, default=5_000)
    args = ap.parse_args()
    data = client_records(args.records)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for threads in (1, 2):
            store = DuckDBStore(Path(tmp) / f"t{threads}.duckdb")
            store.execute(f"SET threads = {threads}")
            secs = timed(lambda s=store: load(s, Batch("bench", client_io=data)), args.repeat)
            rate = args.records / median(secs)
            rows.append(
                [
                    f"Arrow append via ingest.load, {threads} thread(s)",
                    f"{args.records:,}",
                    f"{median(secs):.3f} s",
                    f"{rate / 1e6:.2f} M/s",
                    f"{rate / threads / 1e6:.2f} M/s",
                ]
            )
            store.close()
        # Baseline: row-by-row INSERT (executemany), what a naive ingest would do.
        store = DuckDBStore(Path(tmp) / "rows.duckdb")
        store.execute("SET threads = 1")
        few = data.slice(0, args.baseline_rows)
        values = [tuple(r.values()) for r in few.to_pylist()]
        placeholders = ", ".join("?" * len(CLIENT_IO.names))
        secs = timed(
            lambda: store.con.executemany(f"INSERT INTO client_io VALUES ({placeholders})", values),
            3,
        )
        base = args.baseline_rows / median(secs)
        rows.append(
            [
                "row-by-row INSERT (executemany), 1 thread",
                f"{args.baseline_rows:,}",
                f"{median(secs):.3f} s",
                f"{base / 1e6:.4f} M/s",
                f"{base / 1e6:.4f} M/s",
            ]
        )
        store.close()
    print(table(["method", "records", "median time", "records/s", "records/s/core"], rows))
    best_1 = float(rows[0][3].split()[0]) * 1e6
    print(
        f"\nArrow append on 1 thread is {best_1 / base:,.0f}x row-by-row INSERT "
        f"(median of {args.repeat} runs)."
    )


if __name__ == "__main__":
    main()
