"""Cost of the periodic flush (IOLENS_FLUSH_S): per-call time of a tight loop of small
writes traced with IOLENS_FLUSH_S=1 against IOLENS_FLUSH_S=0 (and untraced).

    python bench/tracer/flush.py [--rounds 5] [--seconds 4] [--dir DIR]

Builds the tracer and micro.c with `cc`, then in each round runs, alternating, one pass
of N calls (sized to last about --seconds traced, so a 1 s interval flushes several
times inside it) plain, with flushing off and with a flush every second, for two loops:
1-byte write() (every call merges into one record: the flush check alone) and 8-byte
pwrite() at random offsets (one record per call: every interval writes ~1.5 MB). Prints
a markdown table of medians over the rounds and the FLUSH_S=1 / FLUSH_S=0 ratio.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.common import table  # noqa: E402
from bench.tracer.run import add_dir_option, build, env_for, run_kv  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=4.0, help="length of one traced pass")
    add_dir_option(ap)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="iolens-flush-") as t:
        tmp = Path(t)
        lib, micro, _, _ = build(tmp)
        work = Path(tempfile.mkdtemp(prefix="iolens-flush-", dir=args.dir))
        for mode, label in (
            ("writeloop", "1-byte write()"),
            ("scatterloop", "8-byte pwrite(), random offsets"),
        ):
            spool = tmp / f"spool-{mode}"

            def one(flush: str | None, n: int, mode: str = mode, spool: Path = spool) -> float:
                env = env_for(lib if flush is not None else None, spool)
                if flush is not None:
                    env["IOLENS_FLUSH_S"] = flush
                return run_kv([str(micro), mode, str(work), str(n)], env)["ns_per_op"]

            n = int(args.seconds * 1e9 / one("0", 200_000))  # calls in --seconds traced
            got: dict[str | None, list[float]] = {None: [], "0": [], "1": []}
            for _ in range(args.rounds):
                for flush in got:
                    got[flush].append(one(flush, n))
            med = {k: statistics.median(v) for k, v in got.items()}
            interim = [p for p in spool.glob("*.iolens") if "." in p.name[: -len(".iolens")]]
            files = len(interim) / args.rounds
            rows.append(
                [
                    label,
                    f"{n:,}",
                    f"{med[None]:.1f}",
                    f"{med['0']:.1f}",
                    f"{med['1']:.1f}",
                    f"{med['1'] - med['0']:+.1f}",
                    f"{med['1'] / med['0']:.3f}",
                    f"{files:.1f}",
                ]
            )
        for p in work.iterdir():
            p.unlink()
        work.rmdir()
    print(
        f"# periodic flush cost ({args.rounds} rounds, medians, one pass of N calls each; "
        f"I/O on {args.dir})\n"
    )
    head = ["loop", "calls", "plain ns", "FLUSH_S=0 ns", "FLUSH_S=1 ns", "added", "ratio"]
    head.append("interim files/pass")
    print(table(head, rows))


if __name__ == "__main__":
    main()
