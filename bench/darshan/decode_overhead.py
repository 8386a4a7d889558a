"""What decoding Darshan logs in a worker process costs (issue 19), against decoding them in
the importing process as before.

    .venv/bin/python bench/darshan/decode_overhead.py [DIR ...]   # default: the shared logs

For each directory: the header and static records of every log read in this process
(libdarshan-util loaded here), then through a `DecoderPool`: the worker's start with the
first log, and every log one after the other (a round trip each, nothing overlapped). The
importer hands the next log over while it stores the current one, so in a batch the per-log
figure is hidden; the start is paid once per import.
"""

from __future__ import annotations

import contextlib
import sys
import time
from pathlib import Path

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "darshan-logs"


def _logs(root: Path) -> list[Path]:
    return sorted(root.rglob("*.darshan")) if root.is_dir() else [root]


def measure(root: Path) -> str:
    from iolens.errors import InputError
    from iolens.ingest.darshan_decode import DecoderPool
    from iolens.ingest.darshan_reader import DarshanLog

    logs = _logs(root)
    t0 = time.perf_counter()
    for p in logs:
        try:
            with DarshanLog(p) as log:
                log.read_static(log.header_job(), frames=False)
        except InputError:
            pass
    t1 = time.perf_counter()
    with DecoderPool() as pool:
        t2 = time.perf_counter()
        pool.decode(logs[0])
        t3 = time.perf_counter()
        for p in logs:
            with contextlib.suppress(InputError):
                pool.decode(p)
        t4 = time.perf_counter()
    return (
        f"{root}: {len(logs)} logs; in-process {t1 - t0:.2f} s (with loading libdarshan-util); "
        f"worker start + first log {t3 - t2:.2f} s, then {(t4 - t3) / len(logs) * 1000:.1f} "
        f"ms per log (in-process {(t1 - t0) / len(logs) * 1000:.1f})"
    )


def main() -> None:
    import numpy  # noqa: F401  the importer has these loaded before it decodes
    import pandas  # noqa: F401

    for root in [Path(a) for a in sys.argv[1:]] or [SHARED]:
        print(measure(root), flush=True)


if __name__ == "__main__":  # the workers import this module's parent (forkserver)
    main()
