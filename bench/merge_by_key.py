"""Cost of a trace batch's `files` rows on a store that knows many files (`ingest.load`).

Files merge by key (schema 6): a trace that saw a file without its layout must keep the
layout another trace recorded, so the loader reads the stored rows of the batch's files
before replacing them. Baseline in the same process: the plain delete of those keys that
the loader did before (which erased a known layout).

    python bench/merge_by_key.py [--files 1000000] [--batch 30] [--repeat 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table
from iolens.ingest.load import _delete_keys, _merge_by_key
from iolens.model.schema import FILES
from iolens.store import DuckDBStore


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=1_000_000)
    ap.add_argument("--batch", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    ids = rng.integers(-(2**62), 2**62, args.files)  # file ids are hashes: no locality

    def files(sel: np.ndarray) -> pa.Table:
        n = len(sel)
        return pa.table(
            {
                "file_id": sel,
                "path": [f"/scratch/run/f{i}" for i in sel],
                "stripe_size": pa.nulls(n, pa.int64()),
                "osts": pa.nulls(n, pa.list_(pa.string())),
            },
            schema=FILES,
        )

    rows = []
    with tempfile.TemporaryDirectory() as tmp, DuckDBStore(Path(tmp) / "f.duckdb") as store:
        store.append("files", files(ids))
        for k, (label, step) in enumerate(
            (
                (
                    "delete the keys (before: loses layouts)",
                    lambda b: _delete_keys(store, "files", "file_id", b) or b,
                ),
                ("merge by key (now)", lambda b: _merge_by_key(store, "files", "file_id", b)),
            )
        ):
            times = []
            for i in range(args.repeat):
                at = (k * args.repeat + i) * args.batch
                batch = files(ids[at : at + args.batch])
                t0 = time.perf_counter()
                with store.transaction():
                    store.append("files", step(batch))
                times.append(time.perf_counter() - t0)
            rows.append([label, f"{statistics.median(times) * 1e3:.1f}"])
    print(f"# {args.batch} known files per batch, store of {args.files:,} files\n")
    print(table(["loader", "ms per batch (median)"], rows))


if __name__ == "__main__":
    main()
