"""Interference in the real MooseFS lab: a small N-N job alone, then beside a large N-1
writer, and iolens's delay estimate against the victim's measured slowdown (issue 20).

    sudo .venv/bin/python bench/lab_interference.py [--rounds 3]      # about 5 min a round

Both jobs are real MPI programs (`tests/cluster/progs/mpiio_bench.c`) under the real
tracer, on the lab's client mounts, their directories on one chunkserver (storage class
cs<label>), so they share it as two jobs on one OST do:

- the victim: `--victim-ranks` ranks each writing then reading its own file (N-N), on
  node c1;
- the culprit: `--culprit-ranks` ranks writing one shared file collectively (N-1; `--culprit-
  mode n1i`: independent calls, each rank a stream of its own), on node c3, started
  `--lead` seconds before the victim and long enough to cover it.

Each round runs the victim alone (the control), then beside the culprit. Measured
slowdown: the victim's I/O time (its own `write_s + read_s`, MPI_Wtime around its data
calls) beside the culprit minus the median of its runs alone. iolens sees only what a site
has: the chunkservers' own counters (`moosefs` source) and the jobs' traces with their
files' layouts (`tracer_spool`); its interference analysis attributes the traces to the
chunkserver (`ingest/traced_targets.py`) and estimates what the culprit cost the victim.
Goal (issue 20): the estimate within 25 % of the measured slowdown.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests.lab.harness import Lab, run  # noqa: E402
from tests.lab.observe import Observatory  # noqa: E402

from bench.lab_jobs import build, io_time, mpi, observed_lab, result, wait_free  # noqa: E402


def run_rounds(args: argparse.Namespace, lab: Lab, obs: Observatory) -> list[dict[str, Any]]:
    exe = build(Path(args.state) / "bin")
    cs = lab.chunkservers[args.server]
    shutil.rmtree(lab.mount / "interference", ignore_errors=True)  # an earlier run's files
    time.sleep(5)  # the chunkserver frees its chunks a moment after the unlink (trash 0)
    need = round_need(args)
    free = shutil.disk_usage(cs.disk).free
    if need > 0.9 * free:  # a full chunkserver stalls its writers instead of failing them
        raise SystemExit(
            f"lab_interference: a round needs {need >> 20} MiB on chunkserver {cs.id}, which "
            f"has {free >> 20} MiB free (LAB_DISK_MB of scripts/mfslab.sh); use fewer blocks"
        )
    rounds: list[dict[str, Any]] = []
    for k in range(args.rounds):
        try:
            wait_free(cs.disk, need)
        except SystemExit as e:  # keep the rounds run so far: they are scored
            if not rounds:
                raise
            print(f"{e}; stopping after {len(rounds)} round(s)", flush=True)
            break
        dirs = {}
        for who, node in (("victim", "c1"), ("culprit", "c3")):
            d = lab.mount / "interference" / f"{who}{k}"
            d.mkdir(parents=True, exist_ok=True)
            run(["mfssetsclass", f"cs{cs.label}", str(d)])
            run(["mfssettrashtime", "0", str(d)])  # removed files free their chunks now
            dirs[who] = Path(lab.nodes[node].mount) / "interference" / f"{who}{k}"
        vargs = (args.victim_ranks, args.victim_kib, args.victim_blocks, obs.trace_spool)
        alone = result(mpi(exe, f"v{k}alone", "nn", dirs["victim"] / "a", *vargs))
        time.sleep(args.gap)
        culprit = mpi(exe, f"c{k}", args.culprit_mode, dirs["culprit"], args.culprit_ranks,
                      args.culprit_kib, args.culprit_blocks, obs.trace_spool)  # fmt: skip
        time.sleep(args.lead)
        beside = result(mpi(exe, f"v{k}with", "nn", dirs["victim"] / "w", *vargs))
        c = result(culprit)
        for d in dirs.values():  # the shared chunkserver's disk is small (LAB_DISK_MB)
            shutil.rmtree(d, ignore_errors=True)
        rounds.append({"round": k, "alone": alone, "beside": beside, "culprit": c,
                       "victim": f"v{k}with", "culprit_job": f"c{k}"})  # fmt: skip
        print(f"round {k}: victim alone {io_time(alone):.1f} s, beside {io_time(beside):.1f} s,"
              f" culprit {io_time(c):.1f} s", flush=True)  # fmt: skip
        time.sleep(args.gap)
    return rounds


def round_need(args: argparse.Namespace) -> int:
    """Bytes a round writes on the shared chunkserver (the victim twice: alone, beside)."""
    return 1024 * (args.culprit_ranks * args.culprit_kib * args.culprit_blocks
                   + 2 * args.victim_ranks * args.victim_kib * args.victim_blocks)  # fmt: skip


def disk_mib(args: argparse.Namespace) -> int:
    """Each chunkserver's disk for all the rounds (removed files stay while the mounts
    live), with 10 % and 1 GiB to spare; 4 GiB at least."""
    return max(4096, args.rounds * round_need(args) // 2**20 * 10 // 9 + 1024)


def score(rounds: list[dict[str, Any]], culprits: dict[str, list[dict[str, Any]]]) -> dict:
    base = statistics.median(io_time(r["alone"]) for r in rounds)
    rows = []
    for r in rounds:
        measured = io_time(r["beside"]) - base
        pairs = [c for c in culprits.get(r["victim"], []) if c["job_id"] == r["culprit_job"]]
        est = sum(float(c["delay_s"]) for c in pairs)
        rows.append({"victim": r["victim"], "measured_s": round(measured, 2),
                     "estimated_s": round(est, 2),
                     "error": round(abs(est - measured) / measured, 3) if measured > 0 else None,
                     "found": bool(pairs)})  # fmt: skip
    errs = [x["error"] for x in rows if x["error"] is not None]
    return {"alone_median_s": round(base, 2), "rows": rows,
            "median_error": statistics.median(errs) if errs else None,
            "found": sum(x["found"] for x in rows)}  # fmt: skip


def analyse(obs: Observatory, rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """iolens's analysis of the stored run, its culprits per victim, scored."""
    obs.analyze()
    culprits = {
        r["victim"]: json.loads(
            obs._run("interference", r["victim"], "--db", str(obs.db), "--json")
        )["culprits"]
        for r in rounds
    }
    out = score(rounds, culprits)
    out["rounds"] = rounds
    out["culprits"] = culprits
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--server", type=int, default=0, help="index of the shared chunkserver")
    p.add_argument("--victim-ranks", type=int, default=4)
    p.add_argument("--victim-kib", type=int, default=1024)
    p.add_argument("--victim-blocks", type=int, default=64)
    p.add_argument("--culprit-ranks", type=int, default=8)
    p.add_argument(
        "--culprit-mode", default="n1", choices=("n1", "n1i", "nn"),
        help="the culprit's shared file written collectively (n1) or independently (n1i), "
        "or a file per rank (nn)",
    )  # fmt: skip
    p.add_argument("--culprit-kib", type=int, default=4096)
    p.add_argument("--culprit-blocks", type=int, default=32)
    p.add_argument("--lead", type=float, default=1.0)
    p.add_argument("--cs-cpu", type=float, default=0.0, help="cap the shared chunkserver's CPU")
    p.add_argument(
        "--cs-disk-mib", type=float, default=0.0,
        help="hold the shared chunkserver's disk to this many MiB/s (sync writes, blkio)",
    )  # fmt: skip
    p.add_argument(
        "--capacity", type=float, default=1.0,
        help="slow the shared chunkserver this many times for the whole run (duty cycle)",
    )  # fmt: skip
    p.add_argument("--gap", type=float, default=70.0)
    p.add_argument("--state", default="/tmp/iolens-lab-interference")
    p.add_argument("--port", type=int, default=28494)
    p.add_argument("--port-base", type=int, default=19919)
    p.add_argument("--json", default=None)
    p.add_argument("--keep", action="store_true", help="leave the lab up")
    p.add_argument(
        "--rescore", metavar="RUN_JSON", help="analyse the run kept in --state again (its --json)"
    )
    args = p.parse_args()
    state = Path(args.state)
    if args.rescore:
        rounds = json.loads(Path(args.rescore).read_text())["rounds"]
        obs = Observatory(state / "iolens", master="", nodes={}, port=args.port)
        out = analyse(obs, rounds)
    else:
        out = run_lab(args, state)
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1, default=str))
    print(json.dumps({k: v for k, v in out.items() if k not in ("rounds", "culprits")}))


class DiskCap:
    """The shared chunkserver's disk held to `mib_s` MiB/s: its file system remounted
    `sync` (every chunk write reaches the loop device in the writing thread, which cgroup
    v1 charges to the chunkserver; through the page cache the kernel's flusher would write
    it, uncharged, docs/lab.md) and a blkio throttle on the loop device for its cgroup. A
    disk of finite bandwidth the two jobs share, as two jobs on one OST share its disks."""

    def __init__(self, lab: Lab, cs: Any, mib_s: float) -> None:
        self.lab, self.cs = lab, cs
        st = os.stat(cs.loop)
        self.dev = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        run(["mount", "-o", "remount,sync", cs.disk])
        self.dir = lab._cgroup("blkio", cs)
        bps = int(mib_s * (1 << 20))
        for k in ("read_bps_device", "write_bps_device"):
            (self.dir / f"blkio.throttle.{k}").write_text(f"{self.dev} {bps}")
        (self.dir / "cgroup.procs").write_text(str(cs.pid))

    def stop(self) -> None:
        for k in ("read_bps_device", "write_bps_device"):
            with contextlib.suppress(OSError):
                (self.dir / f"blkio.throttle.{k}").write_text(f"{self.dev} 0")
        self.lab._move_back("blkio", self.dir, self.cs.pid)
        run(["mount", "-o", "remount,async", self.cs.disk], check=False)


class CpuCap:
    """The shared chunkserver held to `cpus` of CPU (cgroup v1 cpu quota): a server whose
    throughput two jobs really share (each byte costs it CPU: checksums, copies), unlike a
    duty cycle, which adds latency but leaves throughput to spare."""

    def __init__(self, lab: Lab, cs: Any, cpus: float) -> None:
        self.lab, self.cs = lab, cs
        self.dir = lab._cgroup("cpu", cs)
        period = 100_000
        (self.dir / "cpu.cfs_period_us").write_text(str(period))
        (self.dir / "cpu.cfs_quota_us").write_text(str(int(period * cpus)))
        (self.dir / "cgroup.procs").write_text(str(cs.pid))

    def stop(self) -> None:
        (self.dir / "cpu.cfs_quota_us").write_text("-1")
        self.lab._move_back("cpu", self.dir, self.cs.pid)


def run_lab(args: argparse.Namespace, state: Path) -> dict[str, Any]:
    # the shared chunkserver holds every round's files: the node mounts keep a removed
    # file open ("sustained") while they live, so its chunks are not freed between rounds
    # (a disk image is sparse: only what is written takes room)
    os.environ.setdefault("LAB_DISK_MB", str(disk_mib(args)))
    # direct-I/O node mounts (lab_jobs.DIRECT_MOUNT_OPTS): else the clients' caches absorb
    # the victim's writes
    with observed_lab(state, args.port_base, args.port, keep=args.keep) as (lab, obs):
        # The lab's chunkservers are faster than its FUSE clients, so two jobs contend on
        # the clients' CPU, not on the server; a duty-cycled chunkserver (stopped for
        # 1 - 1/capacity of every 0.2 s, alone and beside alike) is a server of finite
        # capacity the jobs really share, as the cluster suite's throttled disk is.
        cap = None
        try:
            if args.cs_disk_mib:
                cap = DiskCap(lab, lab.chunkservers[args.server], args.cs_disk_mib)
            elif args.cs_cpu:
                cap = CpuCap(lab, lab.chunkservers[args.server], args.cs_cpu)
            elif args.capacity > 1:
                cap = lab.slow_chunkserver(lab.chunkservers[args.server], args.capacity)
            rounds = run_rounds(args, lab, obs)
            time.sleep(150)  # the last chart minute, then the agents' next rounds
        finally:
            if cap is not None:
                cap.stop()
            obs.stop()
        out = analyse(obs, rounds)
        out["capacity"] = args.capacity
        out["cs_cpu"] = args.cs_cpu
        out["cs_disk_mib"] = args.cs_disk_mib
        return out


if __name__ == "__main__":
    main()
