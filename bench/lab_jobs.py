"""Traced MPI jobs on the MooseFS lab's mounts, watched by iolens: what the lab benches
(`lab_interference.py`, `lab_savings.py`) share.

`observed_lab` brings the lab up with iolens watching it (`tests/lab/observe.py`) and
always takes it down again; `mpirun_traced` starts a program under the tracer as one job;
`build` compiles the cluster suite's programs (`tests/cluster/progs`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests.lab.harness import Lab  # noqa: E402
from tests.lab.observe import Observatory  # noqa: E402

PROGS = ROOT / "tests" / "cluster" / "progs"
PROG = PROGS / "mpiio_bench.c"
#: Direct I/O and the smallest write buffer on the node mounts: without them the clients'
#: caches absorb the jobs' writes (a 64 MiB job "wrote" in 0.1 s) and every call returns
#: before the chunkserver has seen it; with them each call is a round trip.
DIRECT_MOUNT_OPTS = "-o mfscachemode=DIRECT,mfswritecachesize=16"


def build(out: Path, name: str = "mpiio_bench") -> Path:
    """`tests/cluster/progs/<name>.c`, compiled into `out`."""
    exe = out / name
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mpicc", "-O2", "-o", str(exe), str(PROGS / f"{name}.c")], check=True)
    return exe


def mpirun_traced(argv: Sequence[str], job: str, ranks: int, spool: Path) -> subprocess.Popen[str]:
    """`ranks` processes of `argv` under mpirun with the tracer preloaded, as job `job`
    (IOLENS_JOB_ID), their traces into `spool`; stdout is piped (`records`)."""
    from iolens.tracefile import library_path

    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env |= {
        "LD_PRELOAD": str(library_path()),
        "IOLENS_SPOOL": str(spool),
        "IOLENS_JOB_ID": job,
        "OMPI_MCA_btl": "self,vader",
        "OMPI_MCA_rmaps_base_oversubscribe": "1",
    }
    cmd = ["mpirun", "--allow-run-as-root", "-x", "LD_PRELOAD", "-x", "IOLENS_SPOOL",
           "-x", "IOLENS_JOB_ID", "-np", str(ranks), *argv]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, text=True)


def mpi(
    exe: Path, job: str, mode: str, where: Path, ranks: int, kib: int, blocks: int,
    spool: Path, pause_ms: int = 0,
) -> subprocess.Popen[str]:  # fmt: skip
    """An `mpiio_bench` job under the tracer, as job `job`; prints its own JSON line."""
    where.mkdir(parents=True, exist_ok=True)
    argv = [str(exe), mode, str(where), str(kib), str(blocks), "1", str(pause_ms)]
    return mpirun_traced(argv, job, ranks, spool)


def records(p: subprocess.Popen[str], timeout: float = 1800) -> list[dict[str, Any]]:
    """Every JSON line the job printed, once it has exited 0. A job still running when
    this returns or raises (a timeout, an interrupt) is ended first."""
    try:
        out, _ = p.communicate(timeout=timeout)
    finally:
        if p.poll() is None:
            p.terminate()  # mpirun passes it on to the ranks
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
    if p.returncode != 0:
        raise RuntimeError(f"mpirun exited {p.returncode}: {out[-2000:]}")
    found = [json.loads(x) for x in out.splitlines() if x.startswith("{")]
    if not found:
        raise RuntimeError(f"the job printed no JSON line: {out[-2000:]}")
    return found


def result(p: subprocess.Popen[str], timeout: float = 1800) -> dict[str, Any]:
    """The first JSON line of a job (`mpiio_bench`'s rank 0 prints the job's)."""
    return records(p, timeout)[0]


def io_time(r: dict[str, Any]) -> float:
    return float(r["write_s"]) + float(r["read_s"])


def wait_free(disk: str | Path, need: int, timeout: float = 300) -> None:
    """Until the chunkserver's disk has room for `need` bytes (with 10 % to spare): MooseFS
    frees an unlinked file's chunks some time after the unlink, and a full chunkserver
    fails the writers."""
    deadline = time.monotonic() + timeout
    while shutil.disk_usage(disk).free < need / 0.9:
        if time.monotonic() > deadline:
            raise SystemExit(f"lab bench: {disk} still lacks {need >> 20} MiB free")
        time.sleep(5)


def _terminate(signum: int, _frame: object) -> None:
    raise SystemExit(128 + signum)


@contextlib.contextmanager
def observed_lab(
    state: Path, port_base: int, port: int, keep: bool = False, direct: bool = True
) -> Iterator[tuple[Lab, Observatory]]:
    """The lab up under `state/lab`, iolens watching it from `state/iolens`; on the way out
    (also on an error, Ctrl-C or SIGTERM) the agents and the server stop and the lab goes
    down (unless `keep`). `direct`: node mounts with DIRECT_MOUNT_OPTS unless
    LAB_MOUNT_OPTS says otherwise."""
    if direct:
        os.environ.setdefault("LAB_MOUNT_OPTS", DIRECT_MOUNT_OPTS)
    old = signal.signal(signal.SIGTERM, _terminate)  # SIGTERM unwinds like Ctrl-C
    lab = Lab(lab=state / "lab", port_base=port_base)
    obs: Observatory | None = None
    try:
        lab.up()
        obs = Observatory(
            state / "iolens",
            master=f"{lab.master['ip']}:{lab.master['cl_port']}",
            nodes={n.name: n.ip for n in lab.nodes.values()},
            port=port,
        )
        obs.start()
        yield lab, obs
    finally:
        try:
            if obs is not None:
                obs.stop()
        finally:
            lab.stop_all()
            if not keep:
                lab.down()
            signal.signal(signal.SIGTERM, old)
