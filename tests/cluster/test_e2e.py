"""iolens on a real Slurm cluster, held to the jobs' own numbers (issue 9).

One module fixture runs every job once, as ordinary users, through sbatch, srun and
mpirun, with the tracer preloaded by the SPANK plug-in and the jobs reported by the
PrologSlurmctld/EpilogSlurmctld hook and a sacct import through the server. The tests
then compare what iolens says (CLI with `--server`, and the HTTP API) with the
scheduler's records and the programs' own output. Accuracy and overhead figures are
written to $IOLENS_MC/accuracy.md (docs/accuracy.md, "Real cluster (issue 9)").

Bandwidth is compared like with like: the programs report bytes / (end of their last
data call - start of their first), over all ranks; iolens's `write_bw_span` and
`read_bw_span` are the same quotient over the job's data files, timed at the outermost
traced layer (the MPI-IO calls for MPI programs, POSIX for fio).
"""

from __future__ import annotations

import json
import shlex
import statistics
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest

from iolens.parse.slurm import expand_hostlist
from tests.cluster.diskfeed import DiskFeed
from tests.cluster.harness import NODES, Cluster, Job

pytestmark = pytest.mark.cluster

BLOCK_KIB, BLOCKS = 1024, 16  # per rank: 16 MiB written, then read back
PAUSE_MS = 100  # between blocks: phases of ~2 s, timed to well under 1 % on a busy host
MD_FILES = 1000  # per rank of the metadata job
MAX_CRASHED = 3  # MPI runs that may die in Open MPI's start-up and be made again
FIO_MB, FIO_RATE = 512, "128m"  # fio's own rate limit: a 4-s write, then a 4-s read
OVERHEAD_RUNS = 5
# The disturbed job's I/O time alone, at the throttled rate. The throttle shares the disk
# between the jobs' cgroups about evenly (a 2x slowdown, measured), so the victim loses
# about VICTIM_S: twice the analysis's 10-s floor (interference.MIN_DELAY_S).
VICTIM_S = 20.0
TOLERANCE = 0.01  # bandwidth within 1 % of the program's own figure


@dataclass
class Runs:
    cluster: Cluster
    jobs: dict[str, Job] = field(default_factory=dict)
    victims: list[Job] = field(default_factory=list)
    culprit: Job | None = None
    overhead: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    sacct: dict[str, dict[str, str]] = field(default_factory=dict)
    reports: dict[str, dict[str, Any]] = field(default_factory=dict)
    feed_errors: list[str] = field(default_factory=list)
    crashed: list[Job] = field(default_factory=list)  # MPI start-ups that died, made again

    def report(self, job: Job) -> dict[str, Any]:
        if job.job_id not in self.reports:
            self.reports[job.job_id] = self.cluster.query("job", job.job_id)
        return self.reports[job.job_id]

    def all_jobs(self) -> list[Job]:
        extra = [*self.victims, *([self.culprit] if self.culprit else [])]
        return [*self.jobs.values(), *extra]


def fio_out(job: Job) -> dict[str, Any]:
    """fio's JSON report (printed pretty, after any other output)."""
    return json.loads(job.out[job.out.index("{") :])


def fio_job(name: str, data: str, size_mb: int, direct: bool, extra: str = "") -> str:
    """A fio command writing `size_mb` MiB to `data` (then reading it back unless direct),
    its jobs as threads of one process."""
    common = (
        f"fio --thread --output-format=json --bs=1M --size={size_mb}M --ioengine=psync "
        f"--direct={int(direct)} --filename={data} {extra} --name={name}-w --rw=write"
    )
    return common if direct else common + f" --name={name}-r --stonewall --rw=read"


def run_interference(c: Cluster, runs: Runs) -> None:
    """Three undisturbed runs of the victim (its history), then one while an N-1 job of
    another user writes through the same throttled storage server (`diskfeed.py`)."""
    t0 = time.monotonic()
    mb = max(64, int(c.io_bps * VICTIM_S / 2**20))
    victim_cmd = fio_job("victim", f"{c.jobs_dir}/victim.$SLURM_JOB_ID", mb, direct=True)
    victim_cmd += f"; rm -f {c.jobs_dir}/victim.$SLURM_JOB_ID"
    for _ in range(3):
        runs.victims.append(c.sbatch("iolensa", "victim", "-N1 -n1 -w c1", victim_cmd))
    # the culprit: 6 tasks on 3 nodes, one shared file (N-1), twice the victim's volume in
    # all: it outlasts the victim whether the disk is shared per job (1:1) or per task (6:1)
    per = mb // 3
    task = (
        f"exec fio --output-format=json --bs=1M --size={per}M --offset=$((SLURM_PROCID*{per}))M "
        f"--ioengine=psync --direct=1 --filename={c.jobs_dir}/culprit.$SLURM_JOB_ID "
        f"--name=culprit --rw=write"
    )
    culprit = c.sbatch(
        "iolensb",
        "culprit",
        "-N3 -n6 -w c2,c3,c4",
        f"srun sh -c {shlex.quote(task)}; rm -f {c.jobs_dir}/culprit.$SLURM_JOB_ID",
        wait=False,
    )
    runs.culprit = culprit
    shared = c.jobs_dir / f"culprit.{culprit.job_id}"
    end = time.monotonic() + 120
    while not (shared.exists() and shared.stat().st_size > 0):
        assert time.monotonic() < end, "the culprit never started writing"
        time.sleep(0.2)
    time.sleep(1.0)
    runs.victims.append(c.sbatch("iolensa", "victim", "-N1 -n1 -w c1", victim_cmd))
    c.wait_gone(culprit)
    c.import_sacct([j.job_id for j in [*runs.victims, culprit]])
    c.timed("interference_jobs_s", t0)


def run_accuracy(c: Cluster, runs: Runs) -> None:
    t0 = time.monotonic()
    bench, d = c.bin / "mpiio_bench", c.jobs_dir
    size = f"{BLOCK_KIB} {BLOCKS}"
    j = runs.jobs
    # three launchers: sbatch + srun, srun alone, sbatch + mpirun (orted steps)
    # MPI jobs whose start-up died in Open MPI are made again (`Cluster.sbatch_surviving`)
    j["mpi-n1"] = c.sbatch_surviving(
        "iolensa", "mpi-n1", "-N4 -n4", f"srun {bench} n1 {d} {size} 1 {PAUSE_MS}", runs.crashed
    )
    nn = f"{bench} nn {d} {size} 1 {PAUSE_MS}"
    j["mpi-nn"] = c.surviving(
        lambda: c.srun("iolensa", "mpi-nn", "-N4 -n4", nn, check=False), runs.crashed
    )
    j["mpi-nm"] = c.sbatch_surviving(
        "iolensa", "mpi-nm", "-N4 -n4", f"mpirun {bench} nm {d} {size} 2 {PAUSE_MS}", runs.crashed
    )
    data = f"{d}/fio.$SLURM_JOB_ID.dat"
    # --invalidate=0: fio would otherwise drop the file's cached pages before reading, and
    # count that time (no read at all) in its read bandwidth
    fio = fio_job("fio", data, FIO_MB, direct=False, extra=f"--rate={FIO_RATE} --invalidate=0")
    j["fio"] = c.sbatch("iolensa", "fio", "-N1 -n1", f"{fio}; rm -f {data}")
    j["mdstorm"] = c.sbatch("iolensa", "mdstorm", "-N2 -n4", f"srun {c.bin}/mdstorm {d} {MD_FILES}")
    j["untraced"] = c.sbatch(
        "iolensa", "untraced", "--no-iolens -N2 -n2", f"srun {bench} nn {d} {BLOCK_KIB} 4"
    )
    c.import_sacct([x.job_id for x in j.values()])
    c.timed("accuracy_jobs_s", t0)


def run_overhead(c: Cluster, runs: Runs) -> None:
    """The N-1 MPI job traced and with --no-iolens, alternately, OVERHEAD_RUNS times each."""
    t0 = time.monotonic()
    cmd = f"srun {c.bin}/mpiio_bench n1 {c.jobs_dir} {BLOCK_KIB} {BLOCKS}"
    for _ in range(OVERHEAD_RUNS):
        for mode, opt in (("traced", ""), ("untraced", "--no-iolens ")):
            job = c.sbatch_surviving(
                "iolensa", f"overhead-{mode}", f"{opt}-N4 -n4", cmd, runs.crashed
            )
            rec = job.records()[0]
            runs.overhead.setdefault(mode, []).append(
                {"wall_s": job.elapsed_s, "io_s": rec["write_s"] + rec["read_s"]}
            )
    c.timed("overhead_jobs_s", t0)


@pytest.fixture(scope="module")
def runs(cluster: Cluster) -> Runs:
    r = Runs(cluster)
    feed = DiskFeed(cluster.url, cluster.token, NODES, float(cluster.io_bps))
    feed.start()
    try:
        if cluster.throttled:
            run_interference(cluster, r)
        run_accuracy(cluster, r)
        run_overhead(cluster, r)
    finally:
        feed.stop()
        r.feed_errors = feed.errors
    cluster.settle()
    r.sacct = {row["JobID"]: row for row in cluster.sacct([j.job_id for j in r.all_jobs()])}
    # the server analyses a job once it has been over for 30 s (agents ship late): wait for
    # the last one, so listings show final figures
    last_end = max(_utc(row["End"]) for row in r.sacct.values())
    while (datetime.now(UTC).replace(tzinfo=None) - last_end).total_seconds() < 36:
        time.sleep(1)
    cluster.query("jobs")  # analyses anything still pending
    return r


def _utc(sacct_time: str) -> datetime:
    return datetime.fromisoformat(sacct_time)


def _deviation(ours: float, theirs: float) -> float:
    return ours / theirs - 1.0


def _data_files(rep: dict[str, Any], runs: Runs) -> list[dict[str, Any]]:
    """The programs' own files (`*.dat`), not ROMIO's lock files beside a shared one
    (`n1.8.dat-4168444956-30638.lock`, 32 bytes: I/O of the ranks, but not the data)."""
    d = str(runs.cluster.jobs_dir)
    return [
        f
        for f in rep["top_files"]
        if (f["path"] or "").startswith(d) and f["path"].endswith(".dat")
    ]


# ---- the scheduler's view ----------------------------------------------------------------


def test_jobs_carry_the_schedulers_user_nodes_and_times(runs):
    for job in runs.all_jobs():
        rep, acct = runs.report(job), runs.sacct[job.job_id]
        assert rep["user"] == acct["User"] == job.user
        # which source's row this is shows in its state and times (tracer rows have none)
        why = (job.name, job.job_id, rep["state"], rep["start"], rep["end"])
        assert rep["node_list"] == expand_hostlist(acct["NodeList"]), why
        assert rep["start"] == acct["Start"] + "Z" and rep["end"] == acct["End"] + "Z"
        assert rep["state"] == acct["State"] == "COMPLETED"


def test_listing_through_cli_and_api(runs):
    c = runs.cluster
    listed = {j["job_id"]: j for j in c.query("jobs")}
    assert {j.job_id for j in runs.all_jobs()} <= set(listed)
    api = c.api("/jobs")
    assert api.status_code == 200
    assert {j["job_id"]: j for j in api.json()} == listed
    for job in runs.jobs.values():
        got = c.api(f"/jobs/{job.job_id}")
        assert got.status_code == 200 and got.json() == runs.report(job)
        assert listed[job.job_id]["user"] == job.user


# ---- bytes, modes, bandwidth -------------------------------------------------------------


@pytest.mark.parametrize("label", ["mpi-n1", "mpi-nn", "mpi-nm"])
def test_mpi_jobs_exact_bytes_mode_and_bandwidth(runs, label):
    job = runs.jobs[label]
    prog = job.records()[0]
    rep = runs.report(job)
    assert rep["nprocs"] == prog["ranks"] == 4
    # exact bytes: the MPI-IO layer as the program called it, and the data files' bytes as
    # counted (the POSIX layer below, each file once)
    assert rep["io_layers"]["mpiio"]["write_bytes"] == prog["write_bytes"]
    assert rep["io_layers"]["mpiio"]["read_bytes"] == prog["read_bytes"]
    files = _data_files(rep, runs)
    assert len(files) == prog["files"]
    assert sum(f["write_bytes"] for f in files) == prog["write_bytes"]
    assert sum(f["read_bytes"] for f in files) == prog["read_bytes"]
    assert rep["io_mode"] == {"mpi-n1": "N-1", "mpi-nn": "N-N", "mpi-nm": "N-M"}[label]
    assert abs(_deviation(rep["write_bw_span"], prog["write_bw"])) < TOLERANCE
    assert abs(_deviation(rep["read_bw_span"], prog["read_bw"])) < TOLERANCE


def test_fio_job_exact_bytes_and_bandwidth(runs):
    job = runs.jobs["fio"]
    w, r = (x for x in fio_out(job)["jobs"])
    rep = runs.report(job)
    files = _data_files(rep, runs)
    assert [f["write_bytes"] for f in files] == [w["write"]["io_bytes"]]
    assert [f["read_bytes"] for f in files] == [r["read"]["io_bytes"]]
    assert rep["io_mode"] == "1-1"
    assert "mpiio" not in rep["io_layers"]
    assert abs(_deviation(rep["write_bw_span"], w["write"]["bw_bytes"])) < TOLERANCE
    assert abs(_deviation(rep["read_bw_span"], r["read"]["bw_bytes"])) < TOLERANCE


def test_metadata_job(runs):
    job = runs.jobs["mdstorm"]
    prog = job.records()
    assert len(prog) == 4
    ops = sum(p[k] for p in prog for k in ("mkdir", "open", "close", "stat", "unlink", "rmdir"))
    rep = runs.report(job)
    # the program's own ops, plus the few the shell, srun and libc make around it
    assert ops <= rep["md_ops"] <= ops * 1.02 + 500
    assert rep["write_bytes"] < 1 << 20
    assert "IOL005" in {f["code"] for f in rep["findings"]}


def test_no_iolens_is_not_traced(runs):
    job = runs.jobs["untraced"]
    assert job.records()[0]["write_bytes"] > 0  # it did its I/O
    rep = runs.report(job)  # the scheduler still reported it
    assert rep["user"] == "iolensa" and rep["nprocs"] == 2
    assert rep["io_layers"] == {} and rep["read_bytes"] == rep["write_bytes"] == 0


# ---- interference -----------------------------------------------------------------------


def test_disturbed_job_gets_the_interference_finding(runs):
    if not runs.cluster.throttled:
        pytest.skip("no blkio/io cgroup controller: the storage-server stand-in needs one")
    assert not runs.feed_errors, runs.feed_errors[:3]
    assert runs.culprit is not None
    *history, disturbed = runs.victims
    for job in history:
        assert "IOL006" not in {f["code"] for f in runs.report(job)["findings"]}
    culprit = runs.report(runs.culprit)
    assert culprit["io_mode"] == "N-1" and culprit["user"] == "iolensb"
    rep = runs.report(disturbed)
    found = {f["code"]: f for f in rep["findings"]}
    # the whole report on failure: this test runs real jobs on a real throttled disk
    assert "IOL006" in found, json.dumps(rep, default=str)[:6000]
    ev = found["IOL006"]["evidence"]
    assert ev["earlier_runs"] >= 3
    assert max(p["slowdown"] or 0 for p in ev["anomalous_phases"]) > 1.6
    assert [c["job_id"] for c in ev["culprits"]][:1] == [runs.culprit.job_id]
    assert runs.culprit.job_id in {n["job_id"] for n in ev["neighbours"]}


# ---- privacy ---------------------------------------------------------------------------


def test_users_see_only_their_own_jobs(runs):
    c = runs.cluster
    if not c.user_tokens:
        pytest.skip("this iolens has no per-user accounts (`iolens user add`)")
    a, b = c.user_tokens["iolensa"], c.user_tokens["iolensb"]
    mine = runs.jobs["mpi-n1"].job_id
    assert c.api(f"/jobs/{mine}", token=a).status_code == 200
    assert c.api(f"/jobs/{mine}", token=b).status_code == 404
    listed_for_b = c.api("/jobs", token=b).json()
    assert {j["user"] for j in listed_for_b} <= {"iolensb"}
    if runs.culprit is not None:  # iolensb's own job
        assert runs.culprit.job_id in {j["job_id"] for j in listed_for_b}
        assert c.api(f"/jobs/{runs.culprit.job_id}", token=b).status_code == 200


# ---- the accuracy table -------------------------------------------------------------------


def test_accuracy_and_overhead_table(runs):
    rows = []
    for label in ("mpi-n1", "mpi-nn", "mpi-nm", "fio"):
        job, rep = runs.jobs[label], runs.report(runs.jobs[label])
        if label == "fio":
            w, r = (x for x in fio_out(job)["jobs"])
            prog = {
                "write_bytes": w["write"]["io_bytes"], "write_bw": w["write"]["bw_bytes"],
                "read_bytes": r["read"]["io_bytes"], "read_bw": r["read"]["bw_bytes"],
            }  # fmt: skip
        else:
            prog = job.records()[0]
        files = _data_files(rep, runs)
        for op in ("write", "read"):
            ours_b = sum(f[f"{op}_bytes"] for f in files)
            dev = _deviation(rep[f"{op}_bw_span"], prog[f"{op}_bw"])
            rows.append(
                f"| {label} ({job.job_id}) {op} | {prog[f'{op}_bytes']:,} | "
                f"{prog[f'{op}_bw'] / 1e6:,.2f} | {ours_b:,} | "
                f"{rep[f'{op}_bw_span'] / 1e6:,.2f} | {rep['io_mode']} | {dev:+.4%} |"
            )
    med = {
        m: {k: statistics.median(x[k] for x in v) for k in ("wall_s", "io_s")}
        for m, v in runs.overhead.items()
    }
    over = [
        f"| {k} | {med['untraced'][k]:.2f} | {med['traced'][k]:.2f} | "
        f"{med['traced'][k] / med['untraced'][k] - 1:+.1%} |"
        for k in ("wall_s", "io_s")
    ]
    c = runs.cluster
    text = "\n".join(
        [
            "| job, phase | program bytes | program MB/s | iolens bytes | iolens MB/s | "
            "iolens mode | bandwidth deviation |",
            "|---|---|---|---|---|---|---|",
            *rows,
            "",
            f"Overhead, {OVERHEAD_RUNS} runs each (median): 4-rank N-1 MPI-IO job",
            "",
            "| measure | --no-iolens | traced | overhead |",
            "|---|---|---|---|",
            *over,
            "",
            "Runs (wall_s, io_s): "
            + json.dumps(
                {
                    m: [(round(x["wall_s"], 2), round(x["io_s"], 3)) for x in v]
                    for m, v in runs.overhead.items()
                }
            ),
            "",
            f"Runs whose MPI start-up died in Open MPI and were made again: "
            f"{', '.join(j.job_id for j in runs.crashed) or 'none'}",
            "",
            f"Timings: {json.dumps(c.timings)}",
        ]
    )
    (c.mc / "accuracy.md").write_text(text + "\n")
    print("\n" + text)
    assert len(rows) == 8
    # a few of the 14 MPI runs may die in Open MPI's start-up (2-3 % each, traced or not);
    # more than that is no longer the known race
    assert len(runs.crashed) <= MAX_CRASHED, [j.job_id for j in runs.crashed]
