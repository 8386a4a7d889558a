"""Run a small 'job' under the real tracer: processes on named nodes (each in its own
UTS namespace, so the tracer records that host name), some slowed through a FIFO."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
#: calls per process, the first slow call, and how many are slow
N, SLOW_AT, SLOW_N = 600, 300, 40


def can_name_nodes() -> bool:
    if shutil.which("unshare") is None:
        return False
    res = subprocess.run(["unshare", "--uts", "hostname", "x"], capture_output=True)
    return res.returncode == 0


needs_nodes = pytest.mark.skipif(not can_name_nodes(), reason="unshare --uts not permitted")


@dataclass
class Proc:
    node: str
    data: Path
    slowed: bool
    log: list[dict]


def run_job(
    tmp: Path, lib: Path, nodes: list[str], per_node: int, slowed: set[tuple[str, int]]
) -> tuple[Path, list[Proc]]:
    """Run per_node processes on each node; `slowed` holds (node, index) pairs. Returns
    the spool and each process's own log."""
    spool = tmp / "spool"
    start = time.time_ns() + int(1.5e9)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env |= {"IOLENS_SPOOL": str(spool), "IOLENS_JOB_ID": "reason-job", "TRACER": str(lib)}
    procs, drains, meta = [], [], []
    for node in nodes:
        for k in range(per_node):
            slow = (node, k) in slowed
            fifo = tmp / f"fifo-{node}-{k}"
            os.mkfifo(fifo)
            if slow:
                drains.append(
                    subprocess.Popen([sys.executable, str(HERE / "drain.py"), str(fifo), "0.005"])
                )
            args = [
                str(tmp / f"data-{node}-{k}"),
                str(N),
                str(SLOW_AT if slow else -1),
                str(SLOW_N),
                str(fifo),
                str(start),
            ]
            cmd = [
                "unshare",
                "--uts",
                "sh",
                "-c",
                f'hostname {node} && export LD_PRELOAD="$TRACER" && exec "$@"',
                "sh",
                sys.executable,
                str(HERE / "workload.py"),
                *args,
            ]
            procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True))
            meta.append((node, slow, tmp / f"data-{node}-{k}"))
    out = []
    try:
        for p, (node, slow, data) in zip(procs, meta, strict=True):
            stdout, _ = p.communicate(timeout=120)
            assert p.returncode == 0
            out.append(Proc(node, data, slow, [json.loads(x) for x in stdout.splitlines()]))
        for d in drains:
            d.wait(timeout=30)
    finally:  # a failed run leaves no process behind
        for p in procs + drains:
            if p.poll() is None:
                p.kill()
                p.wait()
    return spool, out
