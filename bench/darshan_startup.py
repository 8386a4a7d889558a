"""Where the CPU of a fresh `iolens darshan LOG --json` goes: its own process, the reading
child, and the cycle collector's passes (issue 21).

    PYTHONPATH=src .venv/bin/python bench/darshan_startup.py LOG [--rounds 7]

Each round runs a fresh process that runs the command as `python -m iolens` does
(`entry.standalone`, output to /dev/null) and reports its CPU seconds (user + system), the
CPU of the children it waited for (the reader), and how many collections the cycle
collector made and how long they took (`gc.callbacks`). Medians over the rounds. Run it
with PYTHONPATH set to an older tree's `src` to measure that tree the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ONE = r"""
import contextlib, gc, json, os, resource, sys, time
passes, spent, began = [0], [0.0], [0.0]
def watch(phase, info):
    if phase == "start":
        began[0] = time.process_time()
    else:
        passes[0] += 1
        spent[0] += time.process_time() - began[0]
gc.callbacks.append(watch)
from iolens.present.cli import entry
with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
    code = entry.standalone("darshan", [sys.argv[1], "--json"])
me = resource.getrusage(resource.RUSAGE_SELF)
kids = resource.getrusage(resource.RUSAGE_CHILDREN)
print(json.dumps({"code": code, "cpu": me.ru_utime + me.ru_stime,
                  "child_cpu": kids.ru_utime + kids.ru_stime,
                  "gc_passes": passes[0], "gc_s": spent[0]}))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("log", type=Path)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    if not args.log.is_file():
        sys.exit(f"{args.log}: no such file")
    import compileall

    import iolens

    compileall.compile_dir(Path(iolens.__file__).parent, quiet=1)  # as installed
    runs = []
    for _ in range(args.rounds):
        out = subprocess.run(
            [sys.executable, "-c", ONE, str(args.log)],
            capture_output=True,
            text=True,
            check=True,
            env=os.environ,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(f"{iolens.__file__} on {args.log.name}, {args.rounds} fresh processes (medians):")
    for k in ("cpu", "child_cpu", "gc_passes", "gc_s"):
        print(f"  {k:10s} {statistics.median(r[k] for r in runs):.3f}")
    print(f"  load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
