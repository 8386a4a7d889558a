"""Make the collector's MooseFS replay fixtures (tests/collect/data/moosefs/, PROVENANCE.md):
two snapshots 60 s apart under `Lab.load`, 2 s after clock minutes: the last minute of t0
is load only, the last minute of t1 has chunkserver 1 slowed (sigstop, factor 4) from 0.5 s
in; the fault's ground-truth record goes to truth.jsonl.

    python -m tests.lab.capture_fixtures OUT_DIR   (the lab must be up: mfslab.sh up)
"""

from __future__ import annotations

import json
import math
import sys
import time
from pathlib import Path

from tests.lab.harness import Lab


def main() -> None:
    out = Path(sys.argv[1])
    lab = Lab()
    lab.reload()
    lab.load(seconds=240)
    time.sleep(62)  # a full minute of load before t0's window
    boundary = math.ceil(time.time() / 60) * 60
    time.sleep(max(0.0, boundary + 0.5 - time.time()))
    # the fault covers the clock minute t1's `-SHD -m 1` reports, none of t0's
    with lab.slow_chunkserver(lab.chunkservers[0], 4.0, method="sigstop") as fault:
        files = sorted(str(p) for p in (lab.mount / "load").glob("*/*"))
        time.sleep(max(0.0, boundary + 2 - time.time()))
        lab.capture(out / "t0", files)
        print(f"t0 at {boundary + 2}, took {time.time() - boundary - 2:.1f} s", file=sys.stderr)
        time.sleep(max(0.0, boundary + 62 - time.time()))
        lab.capture(out / "t1", files)
        print(f"t1 took {time.time() - boundary - 62:.1f} s", file=sys.stderr)
    (out / "truth.jsonl").write_text(json.dumps(fault.record, sort_keys=True) + "\n")
    lab.stop_all()


if __name__ == "__main__":
    main()
