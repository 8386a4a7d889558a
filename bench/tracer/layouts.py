"""What recording Lustre layouts costs the tracer (issue 17): per open, on and off Lustre.

    python bench/tracer/layouts.py [--rounds 9] [--dir DIR]

Off Lustre, the tracer asks the `lustre.lov` xattr of a directory's first file, gets
EOPNOTSUPP and remembers it on the directory: every later open there costs a branch. This
measures (1) open+close and create+close with layouts on (default) and off
(`IOLENS_LAYOUT=0`) on a non-Lustre directory, alternating, medians over the rounds;
(2) the pieces a file on Lustre pays, which can be timed without a Lustre client: the
xattr system call (EOPNOTSUPP, and a successful 416-byte one) and the decoding of real
layout bytes (tests/tracer/lustre_layouts.py builds them from Lustre's struct layouts).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from bench.common import table  # noqa: E402
from bench.tracer.run import add_dir_option, build, env_for, run_kv  # noqa: E402
from tests.tracer import lustre_layouts as lov  # noqa: E402

HERE = Path(__file__).resolve().parent
CORE = ROOT / "tracer" / "src" / "core"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--rounds", type=int, default=9)
    add_dir_option(ap, "where the files are")
    args = ap.parse_args()
    if shutil.which("cc") is None:
        sys.exit("needs a C compiler (cc)")
    with tempfile.TemporaryDirectory(prefix="iolens-bench-") as t:
        tmp = Path(t)
        lib, micro, _wl, _empty = build(tmp)
        cost = tmp / "lov_cost"
        subprocess.run(
            [
                "cc",
                "-O2",
                f"-I{CORE}",
                "-o",
                str(cost),
                str(HERE / "lov_cost.c"),
                str(CORE / "lov.c"),
            ],
            check=True,
        )
        work = Path(tempfile.mkdtemp(prefix="iolens-bench-", dir=args.dir))
        spool = tmp / "spool"

        def traced(mode: str, n: int, layouts: bool):
            env = env_for(lib, spool) | ({} if layouts else {"IOLENS_LAYOUT": "0"})
            return run_kv([str(micro), mode, str(work), str(n)], env)

        rows = []
        for mode, n, keys in (("openclose", 200_000, ["ns_per_op"]), ("mdtest", 5000, ["create"])):
            results = {True: [], False: []}
            for _ in range(args.rounds):
                for on in (False, True):
                    results[on].append(traced(mode, n, on))
            for k in keys:
                off = sorted(r[k] for r in results[False])[args.rounds // 2]
                on = sorted(r[k] for r in results[True])[args.rounds // 2]
                label = (
                    "open() + close(), same file"
                    if mode == "openclose"
                    else "create + close, 5,000 new files"
                )
                rows.append([label, f"{off:.0f}", f"{on:.0f}", f"{on - off:+.0f}"])
        print(
            f"## Layouts on vs off, non-Lustre files in {work.parent} "
            f"(ns per op, medians of {args.rounds})\n"
        )
        print(table(["operation", "IOLENS_LAYOUT=0", "layouts on", "added"], rows))

        blobs = {
            "v1, 4 stripes": lov.v1([0, 1, 2, 3]),
            "PFL, 3 components, 13 stripes": lov.pfl(grown=True),
            "v1, 2,000 stripes": lov.v1(list(range(2000))),
        }
        rows = []
        for mode, label in (
            ("xattr", "fgetxattr lustre.lov, not supported (a directory's first file off Lustre)"),
            ("xattr_ok", "fgetxattr returning 416 bytes (the call a Lustre file makes)"),
        ):
            vals = [
                run_kv([str(cost), mode, str(work), "200000"], {})[mode] for _ in range(args.rounds)
            ]
            rows.append([label, f"{sorted(vals)[args.rounds // 2]:.0f}"])
        for label, blob in blobs.items():
            p = tmp / "blob.lov"
            p.write_bytes(blob)
            vals = [
                run_kv([str(cost), "decode", str(p), "200000"], {})["decode"]
                for _ in range(args.rounds)
            ]
            rows.append(
                [f"decode {label} ({len(blob)} bytes)", f"{sorted(vals)[args.rounds // 2]:.1f}"]
            )
        print("\n## The pieces a file on Lustre pays, once per process (ns)\n")
        print(table(["piece", "ns"], rows))
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
