"""MPI-IO hint plug-in benchmark: does an injected hint change a real MPI-IO job's time?

    python bench/mpi_hints.py [--repeats 7] [--ranks 4] [--block 64] [--blocks 20000]
        [--hints '' 'romio_cb_write=disable'] [--io romio321] [--dir DIR]
        [--cluster MC --user iolensa] [--json]

Builds the tracer (from this checkout) and `tracer/mpi_strided.c` (one collective write of
BLOCK-byte blocks interleaved across ranks, opened with MPI_INFO_NULL), then runs it
REPEATS times per hint set, the sets in rotating order within each round, with the
tracer preloaded and `IOLENS_MPI_HINTS` set to the hint set ('' = none):

- locally: `mpirun -np RANKS` (Open MPI, oversubscribed on this machine's cores);
- with `--cluster MC`: as `--user` on the mini cluster of `scripts/minicluster.sh` whose
  state directory is MC, `srun -N RANKS -n RANKS` (one rank per virtual node; the
  cluster's SPANK plug-in preloads its own build of the tracer; the file lives in MC/jobs).

`--io` picks Open MPI's MPI-IO component (`OMPI_MCA_io`): romio321 honours the ROMIO
hints (romio_cb_write, romio_ds_write, cb_buffer_size); the default ompio ignores them.
Each run prints the slowest rank's open-to-close seconds and checks every byte of the
file (a run whose file is wrong fails the benchmark). Prints per set the median, the
quartiles and the ratio to the first set.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import table  # noqa: E402

SRC = ROOT / "bench" / "tracer" / "mpi_strided.c"


def build(out: Path) -> tuple[Path, Path]:
    subprocess.run(["make", "-s", "-C", str(ROOT / "tracer"), f"OUT={out / 'lib'}"], check=True)
    exe = out / "mpi_strided"
    subprocess.run(["mpicc", "-O2", "-o", str(exe), str(SRC)], check=True)
    exe.chmod(0o755)
    return out / "lib" / "libiolens.so", exe


def once(args: argparse.Namespace, exe: Path, lib: Path, data: Path, hints: str) -> float:
    """One run's seconds (the slowest rank's open to close), its file checked."""
    data.unlink(missing_ok=True)
    knobs = {"OMPI_MCA_io": args.io, "IOLENS_MPI_HINTS": hints}
    argv = [str(exe), str(data), str(args.block), str(args.blocks)]
    if args.cluster:
        env = " ".join(f"{k}={shlex.quote(v)}" for k, v in knobs.items())
        n = args.ranks
        conf = f"export SLURM_CONF={args.cluster}/etc/slurm.conf"
        cmd = f"{conf}; cd /tmp && {env} srun -N {n} -n {n} {shlex.join(argv)}"
        res = subprocess.run(
            ["su", args.user, "-c", cmd], capture_output=True, text=True, timeout=600
        )
    else:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
        env |= knobs | {
            "LD_PRELOAD": str(lib),
            "IOLENS_SPOOL": str(data.parent / "spool"),
            "OMPI_ALLOW_RUN_AS_ROOT": "1",
            "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
            "OMPI_MCA_rmaps_base_oversubscribe": "1",
        }
        cmd = ["mpirun", "-np", str(args.ranks), *argv]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    lines = res.stdout.split()
    if res.returncode != 0 or len(lines) < 2 or lines[-1] != "ok":
        raise SystemExit(f"run with hints {hints!r} failed:\n{res.stdout}{res.stderr}")
    return float(lines[-2])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--ranks", type=int, default=4)
    ap.add_argument("--block", type=int, default=64)
    ap.add_argument("--blocks", type=int, default=20000)
    ap.add_argument("--hints", nargs="+", default=["", "romio_cb_write=disable"])
    ap.add_argument("--io", default="romio321")
    ap.add_argument("--dir", type=Path, default=None, help="where the data file goes (local)")
    ap.add_argument("--cluster", type=Path, default=None, help="minicluster state dir (MC)")
    ap.add_argument("--user", default="iolensa")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(dir=args.cluster / "jobs" if args.cluster else None) as tmp:
        t = Path(tmp)
        t.chmod(0o777)
        lib, exe = build(t)
        data = (args.dir or t) / "strided.dat"
        times: dict[str, list[float]] = {h: [] for h in args.hints}
        for r in range(args.repeats):
            order = args.hints[r % len(args.hints) :] + args.hints[: r % len(args.hints)]
            for h in order:
                times[h].append(once(args, exe, lib, data, h))
    base = statistics.median(times[args.hints[0]])
    rows = {
        h or "(none)": {
            "median_s": statistics.median(ts),
            "q1_s": statistics.quantiles(ts, n=4)[0] if len(ts) > 1 else ts[0],
            "q3_s": statistics.quantiles(ts, n=4)[2] if len(ts) > 1 else ts[0],
            "vs_first": statistics.median(ts) / base,
            "runs": ts,
        }
        for h, ts in times.items()
    }
    where = f"cluster {args.cluster} (srun -N{args.ranks})" if args.cluster else "local mpirun"
    if args.json:
        shape = {"io": args.io, "block": args.block, "blocks": args.blocks, "ranks": args.ranks}
        print(json.dumps({"where": where, **shape, "sets": rows}, indent=1))
        return
    shape = f"{args.ranks} ranks x {args.blocks} blocks of {args.block} B"
    print(f"{where}, OMPI_MCA_io={args.io}, {shape}")
    print(table(
        ["IOLENS_MPI_HINTS", "median s", "q1-q3 s", f"vs {args.hints[0] or '(none)'}"],
        [[h, f"{v['median_s']:.4f}", f"{v['q1_s']:.4f}-{v['q3_s']:.4f}", f"{v['vs_first']:.2f}"]
         for h, v in rows.items()],
    ))  # fmt: skip


if __name__ == "__main__":
    main()
