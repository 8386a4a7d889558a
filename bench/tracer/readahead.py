"""Read-ahead plug-in benchmark (SIOX Table 1): time per strided 1 KiB read.

    python bench/tracer/readahead.py [--rounds 5] [--dir DIR] [--size-mb 2048] [--drop-caches]

Builds the tracer and `stride.c` with `cc`, writes a data file (kept in DIR between runs;
DIR must be on a disk-backed file system, not tmpfs), then for each stride (20 KiB with
100 us of "compute" sleep between reads, 1000 KiB with 10 ms, as in SIOX) runs, in
alternating order within each round:

- regular execution (no tracer),
- traced with the plug-in off (the tracer's own cost),
- embedded fadvise (the program itself hints the next block; no tracer),
- the iolens read-ahead plug-in (`IOLENS_READAHEAD=1`).

Before every run the file's pages are dropped from the page cache (posix_fadvise
DONTNEED inside the driver, which checks with mincore that nothing stayed resident;
`--drop-caches` also writes 3 to /proc/sys/vm/drop_caches, as SIOX did). Prints a
markdown table of the median time per read step (seek + read, and the program's own
fadvise in the embedded row) over the rounds, and checks every run read the same bytes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from bench.common import table  # noqa: E402

HERE = Path(__file__).resolve().parent
MODES = ("regular", "traced, plug-in off", "embedded fadvise", "iolens read-ahead plug-in")
# (stride bytes, reads, compute sleep us): SIOX's two cases.
CASES = ((20 * 1024, 5000, 100), (1000 * 1024, 1000, 10_000))


def build(tmp: Path) -> tuple[Path, Path]:
    subprocess.run(["make", "-s", "-C", str(ROOT / "tracer"), f"OUT={tmp / 'lib'}"], check=True)
    exe = tmp / "stride"
    subprocess.run(["cc", "-O2", "-o", str(exe), str(HERE / "stride.c")], check=True)
    return tmp / "lib" / "libiolens.so", exe


def make_file(path: Path, size_mb: int) -> None:
    """SIZE MiB of incompressible data, each MiB distinct (so checksums catch a wrong block)."""
    if path.exists() and path.stat().st_size == size_mb << 20:
        return
    block = bytearray(os.urandom(1 << 20))
    with open(path, "wb") as f:
        for i in range(size_mb):
            block[:8] = i.to_bytes(8, "little")
            f.write(block)
        f.flush()
        os.fsync(f.fileno())


def drop_caches() -> bool:
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def run(
    exe: Path, lib: Path, mode: str, data: Path, case: tuple[int, int, int], spool: Path
) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    if mode in ("traced, plug-in off", "iolens read-ahead plug-in"):
        env |= {"LD_PRELOAD": str(lib), "IOLENS_SPOOL": str(spool), "IOLENS_JOB_ID": "bench"}
    if mode == "iolens read-ahead plug-in":
        env["IOLENS_READAHEAD"] = "1"
    stride, count, sleep_us = case
    embed = "1" if mode == "embedded fadvise" else "0"
    cmd = [str(exe), str(data), str(stride), str(count), str(sleep_us), embed]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    kv = dict(line.split(" ", 1) for line in res.stdout.splitlines())
    return {k: float(v) for k, v in kv.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", type=Path, default=Path("/var/tmp/iolens-readahead"))
    ap.add_argument("--size-mb", type=int, default=2048, help="data file size [2048]")
    ap.add_argument("--drop-caches", action="store_true", help="also echo 3 > drop_caches")
    ap.add_argument("--keep", action="store_true", help="keep the data file")
    args = ap.parse_args()
    args.dir.mkdir(parents=True, exist_ok=True)
    data = args.dir / "strided.dat"
    make_file(data, args.size_mb)
    if args.drop_caches and not drop_caches():
        sys.exit("--drop-caches: cannot write /proc/sys/vm/drop_caches (not root?)")
    rows = []
    try:
        with tempfile.TemporaryDirectory() as t:
            tmp = Path(t)
            lib, exe = build(tmp)
            for case in CASES:
                stride, count, sleep_us = case
                need = stride * count
                if need > data.stat().st_size:
                    sys.exit(f"--size-mb too small for {count} reads at stride {stride}")
                times: dict[str, list[float]] = {m: [] for m in MODES}
                sums: set[float] = set()
                resident = 0.0
                for r in range(args.rounds):
                    order = MODES if r % 2 == 0 else MODES[::-1]
                    for mode in order:
                        if args.drop_caches:
                            drop_caches()
                        kv = run(exe, lib, mode, data, case, tmp / "spool")
                        times[mode].append(kv["per_read_us"])
                        sums.add(kv["checksum"])
                        resident = max(resident, kv["resident_after_drop"])
                assert len(sums) == 1, "runs read different bytes"
                base = statistics.median(times["regular"])
                for mode in MODES:
                    med = statistics.median(times[mode])
                    rows.append(
                        [
                            f"{stride // 1024} KiB",
                            f"{sleep_us:,} us",
                            f"{count:,}",
                            mode,
                            f"{med:,.1f} us",
                            f"{min(times[mode]):,.1f}-{max(times[mode]):,.1f}",
                            f"{base / med:.2f}x",
                        ]
                    )
                print(
                    f"stride {stride}: pages resident after the drop (max over runs): "
                    f"{int(resident)}",
                    file=sys.stderr,
                )
    finally:
        if not args.keep:
            data.unlink(missing_ok=True)
    header = ["stride", "compute", "reads", "run", "time per read", "range", "speed-up"]
    print(table(header, rows))


if __name__ == "__main__":
    main()
