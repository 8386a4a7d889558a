"""`iolens darshan LOG --json` against `drishti LOG` and today's per-log path (issue 21).

    PYTHONPATH=src .venv/bin/python bench/darshan_cli.py [--repeat 5] [--out FILE.json]
        [--log SUBSTRING]... [--method NAME]...

Each method runs as a fresh process per log, as a user runs it on one log: start-up,
reading, diagnosis, output. The methods alternate within each round (the order rotates
from round to round), so a machine whose load drifts treats them alike. Per log and
method: the median wall time over the rounds, and the peak RSS of the process and the
children it waited for (`wait4`'s rusage of the child, what `getrusage(RUSAGE_CHILDREN)`
reports for it: `iolens darshan` reads each log in a forked child).

Methods:
  iolens darshan   `iolens darshan LOG --json` (no store)
  drishti          `drishti LOG` 0.8 (what users run today; PyDarshan, rich)
  import           `iolens import darshan LOG --db NEW.duckdb --json`, a new store each run:
                   iolens's per-log path before `iolens darshan` (store, import, diagnosis)
  baseline         `iolens darshan LOG --json` of another source tree (`--baseline SRC`, the
                   `src` of an older commit: `git archive COMMIT src | tar -x -C DIR`), to
                   measure a change before and after in the same rounds
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.common import table  # noqa: E402

LOGS = ROOT.parent / "shared" / "data" / "darshan-logs"
#: Real logs of every kind: small and old (big-endian), AutoPerf, HDF5 with DXT, STDIO
#: partial, 17,652 DXT segments, a 1.1 MB DXT log, PnetCDF, a Python (DLIO) process.
PICKS = (
    "release_logs/mpi-io-test-x86_64-3.5.0.darshan",
    "release_logs/mpi-io-test-ppc64-3.0.0.darshan",
    "apmpi/darshan-apmpi-2nodes-64mpi.darshan",
    "hdf5_diagonal_write_only/hdf5_diagonal_write_half_ranks_dxt.darshan",
    "hdf5_diagonal_write_only/hdf5_file_opens_only.darshan",
    "partial_data_stdio/partial_data_stdio.darshan",
    "nonmpi_dxt_anonymized/nonmpi_dxt_anonymized.darshan",
    "partial_data_dxt/partial_data_dxt.darshan",
    "ior_pnetcdf_hdf5/shane_ior-PNETCDF_id438100-438100_11-9-41525-10280033558448664385_1.darshan",
    "dlio_logs/snyder_python3_id3116902-2110366_12-19-66957-4077632997277538683_1.darshan",
)
BIN = Path(sys.executable).parent
METHODS = ("iolens darshan", "drishti", "import")


def child(
    cmd: list[str], env: dict[str, str] | None = None
) -> tuple[float, float, float, int, str]:
    """Wall seconds, CPU seconds (user + system), peak RSS in MiB and exit status of a child
    process, from `wait4` (which includes the children it waited for), and its output."""
    t0 = time.perf_counter()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    out = p.stdout.read() if p.stdout else ""
    _, status, ru = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t0
    return (
        wall,
        ru.ru_utime + ru.ru_stime,
        ru.ru_maxrss / 1024,
        os.waitstatus_to_exitcode(status),
        out,
    )


def command(method: str, log: Path, tmp: Path, n: int) -> list[str]:
    if method in ("iolens darshan", "baseline"):
        return [sys.executable, "-m", "iolens", "darshan", str(log), "--json"]
    if method == "drishti":
        return [str(BIN / "drishti"), str(log)]
    db = tmp / f"{n}.duckdb"
    return [
        sys.executable,
        "-m",
        "iolens",
        "import",
        "darshan",
        str(log),
        "--db",
        str(db),
        "--json",
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--log",
        action="append",
        metavar="SUBSTRING",
        help="only the picked logs whose path contains SUBSTRING (repeatable)",
    )
    ap.add_argument(
        "--method",
        action="append",
        choices=METHODS,
        help="only this method (repeatable; default: all three; --baseline adds its own)",
    )
    ap.add_argument(
        "--baseline",
        type=Path,
        metavar="SRC",
        help="also run `iolens darshan` with PYTHONPATH=SRC (another tree's src directory)",
    )
    args = ap.parse_args()
    if args.baseline is not None and not (args.baseline / "iolens" / "__init__.py").is_file():
        sys.exit(f"--baseline {args.baseline}: no iolens package there")
    methods = tuple(m for m in METHODS if not args.method or m in args.method)
    if args.baseline is not None:
        methods += ("baseline",)
    base_env = {**os.environ, "PYTHONPATH": str(args.baseline)} if args.baseline else None
    # an installed package comes with its bytecode (pip compiles it), Drishti's too: without
    # it (PYTHONDONTWRITEBYTECODE, a source tree) every run would compile iolens again
    import compileall

    import iolens

    compileall.compile_dir(Path(iolens.__file__).parent, quiet=1)
    if args.baseline is not None:
        compileall.compile_dir(args.baseline / "iolens", quiet=1)
    logs = [
        LOGS / p
        for p in PICKS
        if (LOGS / p).is_file() and (not args.log or any(s in p for s in args.log))
    ]
    if not logs:
        sys.exit(f"no logs under {LOGS}")
    runs: dict[str, dict[str, list[tuple[float, float, float]]]] = {
        m: {str(log): [] for log in logs} for m in methods
    }
    with tempfile.TemporaryDirectory(prefix="iolens-bench-") as tmp:
        n = 0
        for r in range(args.repeat):
            for log in logs:
                k = r % len(methods)
                order = methods[k:] + methods[:k]
                for m in order:
                    n += 1
                    env = base_env if m == "baseline" else None
                    wall, cpu, rss, code, out = child(command(m, log, Path(tmp), n), env)
                    if code != 0:
                        print(f"{m} failed on {log.name} ({code}): {out[-300:]}", file=sys.stderr)
                    runs[m][str(log)].append((wall, cpu, rss))
                    print(f"round {r + 1} {m:15s} {wall:6.2f} s {cpu:6.2f} s CPU {rss:6.0f} MiB "
                          f"{log.name}", file=sys.stderr)  # fmt: skip
    rows, summary = [], {}
    for m in methods:
        walls = [statistics.median(w for w, _, _ in v) for v in runs[m].values()]
        cpus = [statistics.median(c for _, c, _ in v) for v in runs[m].values()]
        peaks = [max(r for _, _, r in v) for v in runs[m].values()]
        summary[m] = {"wall_s": walls, "cpu_s": cpus, "rss_mib": peaks}
        rows.append(
            [m]
            + [f"{statistics.median(x):.2f} / {max(x):.2f}" for x in (walls, cpus)]
            + [f"{statistics.median(peaks):.0f} / {max(peaks):.0f}"]
        )
    print(table(["method", "wall s (median / max)", "CPU s", "peak RSS MiB"], rows))
    per_log = [
        [Path(log).name[:40]]
        + [
            f"{statistics.median(w for w, _, _ in runs[m][log]):.2f} / "
            f"{statistics.median(c for _, c, _ in runs[m][log]):.2f} / "
            f"{max(r for _, _, r in runs[m][log]):.0f}"
            for m in methods
        ]
        for log in runs[methods[0]]
    ]
    print()
    print(table(["log (wall s / CPU s / MiB)", *methods], per_log))
    if args.out:
        args.out.write_text(json.dumps({"logs": [str(p) for p in logs], **summary}, indent=1))


if __name__ == "__main__":
    main()
