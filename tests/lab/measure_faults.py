"""Measure each slow-chunkserver method (docs/lab.md): one clock minute per configuration
under `Lab.load`, read from `mfscli -SHD -m 1` just after the minute ends.

    python -m tests.lab.measure_faults [out.jsonl]   (the lab must be up: mfslab.sh up)
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from typing import TextIO

from tests.lab.harness import Lab

METHODS = ("sigstop", "cpu", "blkio", "blkio-direct")
CONFIGS = [("none", 1.0)] + [(m, f) for m in METHODS for f in (2.0, 4.0)]


def next_minute() -> None:
    time.sleep(60 - time.time() % 60 + 0.2)


def main() -> None:
    with open(sys.argv[1] if len(sys.argv) > 1 else "/dev/stdout", "a") as out:
        measure(out)


def measure(out: TextIO) -> None:
    lab = Lab()
    lab.reload()
    target = lab.chunkservers[0]
    lab.load(seconds=60 * (len(CONFIGS) + 2))
    next_minute()
    prev = None
    fault = None
    for method, factor in [*CONFIGS, ("end", 1.0)]:
        if fault is not None:
            fault.stop()
            fault = None
        start = time.time()
        if method not in ("none", "end"):
            fault = lab.slow_chunkserver(target, factor, method=method)
        time.sleep(3)
        if prev is not None:
            stats = lab.disk_stats()
            peers = [v for k, v in stats.items() if k != target.id]
            row = {"method": prev[0], "factor": prev[1], "target": stats[target.id]}
            for key in ("read_us", "write_us", "read_bw", "write_bw", "read_ops", "write_ops"):
                vals = [p[key] for p in peers if p[key] is not None]
                row[f"peers_{key}"] = statistics.median(vals) if vals else None
            out.write(json.dumps(row) + "\n")
            out.flush()
        prev = (method, factor)
        if method == "end":
            break
        time.sleep(max(0.0, 60 - (time.time() - start)))
    lab.stop_all()


if __name__ == "__main__":
    main()
