"""Darshan import benchmarks (issue 6): per log vs Drishti, the 2 M-segment DXT log, 1,000 logs.

    .venv/bin/python bench/darshan/import_bench.py                 # all three parts
    .venv/bin/python bench/darshan/import_bench.py --part per-log  # or dxt, batch

per-log  every log of ../shared/data/darshan-logs (the broken empty one aside), three ways:
         `iolens import darshan LOG` in a fresh process per log (what a user runs on one log,
         as with Drishti: start-up, import, diagnosis), the same logs imported and diagnosed
         in one process (per-log time inside a batch), and `drishti LOG` per log. Peak RSS
         of each child comes from wait4(2).
dxt      micro-dxt-2M.darshan (2 M DXT_POSIX segments): `iolens import darshan` in a child
         process, against PyDarshan's DataFrame path (DarshanReport + mod_read_all_dxt_records
         + to_df, what Drishti and PyDarshan's summary use) in another.
batch    a directory of 1,000 logs made from the real ones (copies with distinct names and a
         distinct trailing byte, so each is a new log to the content-hash key; libdarshan-util
         never reads past the regions the header maps), imported by one
         `iolens import darshan DIR` under a pseudo-terminal so the progress bar runs.

Diagnosis is what the CLI runs on each log (`iolens.analyze.darshan.diagnose`: the zoom-in
root causes and the Drishti triggers), in every part.
"""

from __future__ import annotations

import argparse
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.common import child as run  # noqa: E402
from bench.common import table  # noqa: E402

SHARED = ROOT.parent / "shared" / "data"
LOGS = SHARED / "darshan-logs"
BIG = SHARED / "darshan-logs-generated" / "micro-dxt-2M.darshan"
BROKEN = ("empty_log.darshan",)
PY = sys.executable
IOLENS = str(Path(PY).parent / "iolens")
DRISHTI = str(Path(PY).parent / "drishti")


def real_logs() -> list[Path]:
    return [p for p in sorted(LOGS.rglob("*.darshan")) if p.name not in BROKEN]


def fmt(xs: list[float], digits: int = 2) -> str:
    return f"{statistics.median(xs):.{digits}f} / {max(xs):.{digits}f}"


# -- per log --------------------------------------------------------------------------------

_IN_PROCESS = r"""
import json, resource, sys, time
from pathlib import Path
from iolens.store import DuckDBStore
from iolens.ingest.importers.darshan import import_logs
from iolens.present.cli.darshan_import import _diagnoser

spent = []
paths = [Path(p) for p in sys.argv[2:]]
with DuckDBStore(sys.argv[1]) as store:
    inner = _diagnoser(store)  # what `iolens import darshan` runs on each log

    def analyze(job):
        t = time.perf_counter()
        out = inner(job)
        spent.append(time.perf_counter() - t)
        return out

    an = analyze if inner is not None else None
    import_logs(store, paths[:1], analyze=an)  # warm-up: imports, first-call costs
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    spent.clear()
    t0 = time.perf_counter()
    res = import_logs(store, paths[1:], analyze=an)
    wall = time.perf_counter() - t0
res = [r for r in res if r.status != "skipped"]  # the warm-up log comes round again
print(json.dumps({"wall": wall, "n": len(res), "per_log": [r.seconds for r in res],
                  "diagnose": spent, "failed": [r.error for r in res if r.error],
                  "rss0": rss0,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def per_log(tmp: Path) -> str:
    import json

    logs = real_logs()
    cli_t, cli_rss, dr_t, dr_rss = [], [], [], []
    for i, log in enumerate(logs):
        db = tmp / f"one{i}.duckdb"
        t, rss, rc, out = run([IOLENS, "import", "darshan", str(log), "--db", str(db)])
        assert rc == 0, out
        cli_t.append(t)
        cli_rss.append(rss)
        t, rss, rc, out = run([DRISHTI, str(log)], cwd=tmp)
        dr_t.append(t)
        dr_rss.append(rss)
        print(f"  {log.name}: iolens {cli_t[-1]:.2f} s {cli_rss[-1]:.0f} MiB, "
              f"drishti {t:.2f} s {rss:.0f} MiB (exit {rc})", flush=True)  # fmt: skip
    t, rss, rc, out = run([PY, "-c", _IN_PROCESS, str(tmp / "batch.duckdb")]
                          + [str(p) for p in [logs[0], *logs]])  # fmt: skip
    assert rc == 0, out
    r = json.loads(out.strip().splitlines()[-1])
    rows = [
        ["`iolens import darshan LOG` (fresh process, incl. start-up)", fmt(cli_t),
         fmt(cli_rss, 0)],
        ["`drishti LOG` 0.8 (fresh process, incl. start-up)", fmt(dr_t), fmt(dr_rss, 0)],
        ["iolens, import + diagnosis inside one batch process", fmt(r["per_log"], 3),
         f"{r['rss']:.0f} (whole batch; {r['rss0']:.0f} after start-up)"],
        ["  of which diagnosis", fmt(r["diagnose"] or [0.0], 3), ""],
    ]  # fmt: skip
    mean = r["wall"] / r["n"]
    return (
        f"{len(logs)} logs (median / max)\n\n"
        + table(["method", "seconds per log", "peak RSS, MiB"], rows)
        + f"\n\nIn one process: {r['n']} logs in {r['wall']:.2f} s = {mean:.3f} s per log "
        f"(group commit included); failures: {r['failed'] or 'none'}.\n"
    )


# -- the 2 M-segment DXT log ------------------------------------------------------------------

_PYDARSHAN = r"""
import sys, time
import darshan
t = time.perf_counter()
r = darshan.DarshanReport(sys.argv[1], read_all=False)
r.mod_read_all_dxt_records("DXT_POSIX")
frames = r.records["DXT_POSIX"].to_df()
n = sum(len(f["write_segments"]) + len(f["read_segments"]) for f in frames)
print(n, time.perf_counter() - t)
"""


def dxt(tmp: Path) -> str:
    rows = []
    for label, cmd in (
        ("`iolens import darshan` (streamed, merged, stored)",
         [IOLENS, "import", "darshan", str(BIG), "--db", str(tmp / "big.duckdb"), "--json"]),
        ("`iolens import darshan --no-dxt` (counters only)",
         [IOLENS, "import", "darshan", str(BIG), "--db", str(tmp / "big2.duckdb"), "--no-dxt"]),
        ("PyDarshan DataFrame path (read_all_dxt_records + to_df)", [PY, "-c", _PYDARSHAN,
                                                                     str(BIG)]),
    ):  # fmt: skip
        t, rss, rc, out = run(cmd)
        assert rc == 0, out
        rows.append([label, f"{t:.2f}", f"{rss:.0f}"])
    return (
        f"{BIG.name}: 2,000,000 DXT_POSIX segments, {BIG.stat().st_size / 2**20:.1f} MiB "
        "(one child process each, start-up included)\n\n"
        + table(["method", "wall s", "peak RSS, MiB"], rows)
        + "\n"
    )


# -- 1,000 logs -------------------------------------------------------------------------------


_IMPORT_ONLY = r"""
import sys
from pathlib import Path
from iolens.store import DuckDBStore
from iolens.ingest.importers.darshan import import_logs
with DuckDBStore(sys.argv[2]) as store:
    res = import_logs(store, [Path(sys.argv[1])])
assert all(r.status == "imported" for r in res)
"""


def batch(tmp: Path, n: int = 1000) -> str:
    src = real_logs()
    d = tmp / "thousand"
    d.mkdir()
    for i in range(n):
        log = src[i % len(src)]
        dest = d / f"{i:04d}-{log.name}"
        shutil.copyfile(log, dest)
        with dest.open("ab") as f:  # distinct content: a new log to the content-hash key
            f.write(i.to_bytes(4, "little"))
    db = tmp / "thousand.duckdb"
    cmd = f"{IOLENS} import darshan {d} --db {db}"
    t, rss, rc, out = run(["script", "-qefc", cmd, "/dev/null"])
    assert rc == 0, out
    t2, rss2, rc, out2 = run([PY, "-c", _IMPORT_ONLY, str(d), str(tmp / "thousand2.duckdb")])
    assert rc == 0, out2
    said = re.search(r"([\d.]+) s, ([\d.]+) logs/s", out)
    bar = "progress bar drawn" if "importing Darshan logs" in out else "no progress bar seen"
    summary = re.search(r"Imported .*?failed\.", out, re.S)
    told = f"{said[1]} / {said[2]}" if said else "?"
    return (
        f"{n} logs ({len(src)} real logs, copied), one `iolens import darshan DIR` under a "
        f"pseudo-terminal ({bar}):\n\n"
        + table(
            ["wall s (child)", "logs/s (wall)", "CLI's own s / logs/s", "peak RSS, MiB"],
            [[f"{t:.1f}", f"{n / t:.1f}", told, f"{rss:.0f}"]],
        )
        + f"\n\n{' '.join(summary[0].split()) if summary else out[-400:]}\n\n"
        f"The same directory imported in-process without diagnosis (`import_logs`, "
        f"analyze=None): {t2:.1f} s including start-up, {n / t2:.1f} logs/s, "
        f"peak RSS {rss2:.0f} MiB.\n"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", choices=("per-log", "dxt", "batch", "all"), default="all")
    ap.add_argument("--logs", type=int, default=1000, help="size of the batch directory")
    args = ap.parse_args()
    if not LOGS.is_dir():
        sys.exit(f"{LOGS} not found")
    with tempfile.TemporaryDirectory() as tmp:
        if args.part in ("per-log", "all"):
            print("## per log\n\n" + per_log(Path(tmp)), flush=True)
        if args.part in ("dxt", "all"):
            print("## 2 M DXT segments\n\n" + dxt(Path(tmp)), flush=True)
        if args.part in ("batch", "all"):
            print("## 1,000 logs\n\n" + batch(Path(tmp), args.logs), flush=True)


if __name__ == "__main__":
    main()
