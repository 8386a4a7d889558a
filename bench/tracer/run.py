"""Tracer benchmarks: per-call overhead, metadata rate, bandwidth, compression.

    python bench/tracer/run.py [--rounds 7] [--quick]

Builds the tracer from tracer/ and the C drivers with `cc` into a temporary directory,
then runs every measurement plain and traced in the same command, alternating the two
so drift hits both equally, and prints markdown tables (medians over the rounds).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.common import table  # noqa: E402

from iolens.tracefile import decode_dir  # noqa: E402

HERE = Path(__file__).resolve().parent


def build(tmp: Path) -> tuple[Path, Path, Path]:
    subprocess.run(["make", "-s", "-C", str(ROOT / "tracer"), f"OUT={tmp / 'lib'}"], check=True)
    micro = tmp / "micro"
    subprocess.run(["cc", "-O2", "-o", str(micro), str(HERE / "micro.c")], check=True)
    wl = tmp / "workload"
    src = ROOT / "tests" / "tracer" / "workloads" / "workload.c"
    subprocess.run(["cc", "-O2", "-pthread", "-o", str(wl), str(src), "-ldl"], check=True)
    empty = tmp / "libempty.so"  # control: a preloaded library that wraps nothing
    (tmp / "empty.c").write_text("int iolens_bench_empty;\n")
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(empty), str(tmp / "empty.c")], check=True)
    return tmp / "lib" / "libiolens.so", micro, wl, empty


def env_for(lib: Path | None, spool: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    if lib:
        e["LD_PRELOAD"] = str(lib)
        e["IOLENS_SPOOL"] = str(spool)
        e["IOLENS_JOB_ID"] = "bench"
    return e


def run_kv(cmd: list[str], env: dict[str, str]) -> dict[str, float]:
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        k, _, v = line.rpartition(" ")
        res[k] = float(v)
    return res


def paired(
    rounds: int, fn: Callable[[Path | None], dict[str, float]], *libs: Path
) -> list[dict[str, float]]:
    """Medians of fn(None), fn(lib1), ... over `rounds` rounds that alternate them."""
    acc: list[dict[str, list[float]]] = [{} for _ in range(len(libs) + 1)]
    for _ in range(rounds):
        for which, a in zip((None, *libs), acc, strict=True):
            for k, v in fn(which).items():
                a.setdefault(k, []).append(v)
    return [{k: statistics.median(v) for k, v in a.items()} for a in acc]


def add_dir_option(ap: argparse.ArgumentParser, what: str = "where the I/O happens") -> None:
    """--dir, on a tmpfs by default: the cheapest calls, so the largest relative cost."""
    ap.add_argument(
        "--dir",
        type=Path,
        default=Path("/dev/shm") if Path("/dev/shm").is_dir() else None,
        help=f"{what} [default: /dev/shm, a tmpfs: the cheapest calls, so the largest "
        "relative overhead and least noise]",
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke test)")
    add_dir_option(ap)
    args = ap.parse_args()
    if shutil.which("cc") is None:
        sys.exit("needs a C compiler (cc)")
    scale = 10 if args.quick else 1
    with tempfile.TemporaryDirectory(prefix="iolens-bench-") as t:
        tmp = Path(t)
        lib, micro, wl, empty = build(tmp)
        work = Path(tempfile.mkdtemp(prefix="iolens-bench-", dir=args.dir))
        spool = tmp / "spool"

        def micro_fn(mode: str, n: int) -> Callable[[Path | None], dict[str, float]]:
            return lambda which: run_kv(
                [str(micro), mode, str(work), str(n)], env_for(which, spool)
            )

        fs = subprocess.run(
            ["stat", "-f", "-c", "%T", str(work)], capture_output=True, text=True
        ).stdout.strip()
        print(
            f"# iolens tracer benchmarks ({os.cpu_count()} cores, {args.rounds} rounds, "
            f"medians; plain and traced alternate; I/O on {work.parent} ({fs}))\n"
        )
        clk = run_kv([str(micro), "clock", str(work), str(10_000_000 // scale)], os.environ)
        print("## Timestamp sources (ns per call)\n")
        print(table(["source", "ns/call"], [[k, f"{v:.1f}"] for k, v in clk.items()]) + "\n")

        rows = []
        added_read = 0.0
        for mode, label, calls, goal in (
            ("write1", "1-byte write()", 1, 60),
            ("pread4k", "4 KiB pread()", 1, 60),
            ("lseekread", "lseek() + 4 KiB read()", 2, 120),
            ("openclose", "open() + close()", 2, 150),
            ("fputc", "fputc() (stdio, 1 char)", 1, 60),
            ("fgetc", "fgetc() (stdio, 1 char)", 1, 60),
        ):
            p, tr = paired(args.rounds, micro_fn(mode, 200_000 // scale), lib)
            a, b = p["ns_per_op"], tr["ns_per_op"]
            if mode == "pread4k":
                added_read = b - a
            rows.append(
                [
                    label,
                    f"{a:.0f}",
                    f"{b:.0f}",
                    f"{b - a:+.0f}",
                    f"{(b - a) / calls:+.0f}",
                    f"<= {goal}",
                ]
            )
        print("## Per-call overhead (ns)\n")
        print(
            table(["operation", "plain", "traced", "added", "added per call", "goal (added)"], rows)
            + "\n"
        )

        p, tr = paired(args.rounds, micro_fn("mdtest", 5000 // scale), lib)
        rows = [
            [k, f"{p[k]:.0f}", f"{tr[k]:.0f}", f"{100 * (tr[k] / p[k] - 1):+.1f} %"]
            for k in ("create", "stat", "unlink")
        ]
        print("## mdtest-style metadata, 5,000 files in one directory (ns per op)\n")
        print(table(["phase", "plain", "traced", "slowdown"], rows) + "\n")

        rows = []
        for kib in (64, 1024):
            p, ctl, tr = paired(args.rounds, micro_fn("ior", kib), empty, lib)
            for k in ("write", "read"):
                a, b = p[f"{k}_MBps"], tr[f"{k}_MBps"]
                rows.append(
                    [
                        f"{k} {kib} KiB",
                        f"{a:.0f}",
                        f"{b:.0f}",
                        f"{100 * (a / b - 1):+.2f} %",
                        f"{100 * (a / ctl[f'{k}_MBps'] - 1):+.2f} %",
                        f"{100 * added_read / p[f'{k}_ns']:.3f} %",
                    ]
                )
        print("## IOR-style sequential I/O, 256 MiB file, best of 5 passes per run (MB/s)\n")
        print(
            "`A/A` preloads a library that wraps nothing: the noise floor of this comparison."
            "\n`implied` = the per-call cost measured above (4 KiB pread) / time per call.\n"
        )
        print(
            table(["transfer", "plain", "traced", "slowdown", "A/A (no tracer)", "implied"], rows)
            + "\n"
        )

        rows = []
        for mode, n, what in (
            ("small", 100_000, "100k 1-byte write()s"),
            ("n1", 4, "N-1 strided pwrite, 4 procs x 200"),
            ("nn", 4, "N-N sequential write + read back"),
            ("threads", 4, "4 threads: N-N + shared-file pwrite"),
            ("stdio", 4, "stdio fprintf/fgets/fread"),
            ("meta", 1000, "1000 x create/stat/unlink"),
            ("scatter", 20_000, "random-offset 8-byte pwrite"),
        ):
            sp = tmp / f"cspool-{mode}"
            base = work / f"cbase-{mode}"
            base.mkdir()
            subprocess.run(
                [str(wl), mode, str(base), str(n)],
                env=env_for(lib, sp),
                capture_output=True,
                check=True,
            )
            traces = list(decode_dir(sp))
            calls = sum(x.calls for x in traces)
            recs = sum(x.client_io.num_rows for x in traces)
            size = sum(x.path.stat().st_size for x in traces)
            rows.append(
                [
                    what,
                    f"{calls:,}",
                    f"{recs:,}",
                    f"{calls / recs:.1f}x",
                    f"{calls * 64:,}",
                    f"{size:,}",
                ]
            )
        print("## First-pass compression (raw = one 64-byte record per call)\n")
        print(table(["pattern", "calls", "records", "ratio", "raw bytes", "file bytes"], rows))
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
