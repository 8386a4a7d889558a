"""Trace size and tracer cost with zstd-compressed RECORDS sections (format version 5).

    python bench/trace_compression.py [--rounds 5] [--calls 200000] [--level 1] [--dir DIR]

Builds the tracer and bench/tracer/micro.c, then for three write patterns - contiguous
4 KiB pwrite()s (seq4k: every call merges into one record), IOR-like segments of 8
strided blocks (strided4k: a record per 8 calls) and 8-byte pwrite()s at random offsets
(scatterloop: a record per call) - runs one pass of --calls calls untraced, traced with
IOLENS_COMPRESS=0 and traced with compression on (the default, zstd level 1), alternating,
--rounds times. Prints the trace file's bytes per call both ways (the same in every
round: the calls are deterministic) and the medians of the per-call time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.common import table  # noqa: E402
from bench.tracer.run import add_dir_option, build, env_for, run_kv  # noqa: E402

PATTERNS = (
    ("seq4k", "sequential 4 KiB"),
    ("strided4k", "strided 4 KiB (8 per segment)"),
    ("scatterloop", "random-offset 8 B"),
)
SETTINGS = (None, "0", "1")  # untraced, IOLENS_COMPRESS=0, IOLENS_COMPRESS=1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=200_000)
    ap.add_argument("--level", default="1", help="IOLENS_COMPRESS for the zstd runs, 1-3")
    add_dir_option(ap)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="iolens-zstd-") as t:
        tmp = Path(t)
        lib, micro, _, _ = build(tmp)
        work = Path(tempfile.mkdtemp(prefix="iolens-zstd-", dir=args.dir))
        for mode, label in PATTERNS:
            ns: dict[str | None, list[float]] = {s: [] for s in SETTINGS}
            size: dict[str, int] = {}
            for r in range(args.rounds):
                for s in SETTINGS:
                    spool = tmp / f"spool-{mode}-{s}-{r}"
                    env = env_for(lib if s is not None else None, spool)
                    if s is not None:
                        env["IOLENS_COMPRESS"] = s if s == "0" else args.level
                    cmd = [str(micro), mode, str(work), str(args.calls)]
                    ns[s].append(run_kv(cmd, env)["ns_per_op"])
                    if s is not None:
                        (f,) = spool.glob("*.iolens")
                        size[s] = f.stat().st_size
                        f.unlink()
            med = {s: statistics.median(v) for s, v in ns.items()}
            calls = args.calls + 1  # + the set-up pwrite of micro.c
            rows.append(
                [
                    label,
                    f"{calls:,}",
                    f"{size['0'] / calls:.2f}",
                    f"{size['1'] / calls:.2f}",
                    f"{size['0'] / size['1']:.1f}x",
                    f"{med[None]:.1f}",
                    f"{med['0']:.1f}",
                    f"{med['1']:.1f}",
                    f"{med['1'] - med['0']:+.1f}",
                ]
            )
        for p in work.iterdir():
            p.unlink()
        work.rmdir()
    print(
        f"# trace compression, zstd level {args.level} ({args.rounds} rounds, medians of "
        f"one pass each; I/O on {args.dir})\n"
    )
    head = ["pattern", "calls", "B/call plain", "B/call zstd", "ratio", "untraced ns"]
    head += ["traced ns, off", "traced ns, zstd", "added"]
    print(table(head, rows))


if __name__ == "__main__":
    main()
