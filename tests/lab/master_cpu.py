"""The lab master's capacity: a CPU limit.

On one 2-core machine a FUSE client spends more CPU per metadata operation than the
master, so no client load can saturate an unrestricted master: a storm there is not a
storm for the servers, whatever it costs the clients. A cgroup v1 `cpu.cfs_quota_us` on
the master gives it the capacity a real master has relative to its many clients; the
`moosefs` source is told that CPU (`master_cpus`), as a site tells it its master's, and
reports the master's utilisation against it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path

CGROUP = Path("/sys/fs/cgroup/cpu")


def limit_master_cpu(lab: object, cpus: float) -> Callable[[], None]:
    """Put the master (all its threads) in a cgroup of `cpus` CPUs; returns the undo."""
    pid = int(lab.master["pid"])  # type: ignore[attr-defined]
    d = CGROUP / f"iolens-lab-master-{pid}"
    if not CGROUP.is_dir():
        raise RuntimeError("no cgroup v1 cpu controller at /sys/fs/cgroup/cpu")
    d.mkdir(exist_ok=True)
    period = 100_000
    (d / "cpu.cfs_period_us").write_text(str(period))
    (d / "cpu.cfs_quota_us").write_text(str(max(1000, int(period * cpus))))
    (d / "cgroup.procs").write_text(str(pid))

    def undo() -> None:
        with contextlib.suppress(OSError):
            (CGROUP / "cgroup.procs").write_text(str(pid))
        for _ in range(50):
            try:
                d.rmdir()
                return
            except OSError:
                time.sleep(0.1)

    return undo
