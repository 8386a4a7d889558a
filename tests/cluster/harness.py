"""The end-to-end harness: a real Slurm mini cluster, an iolens server and agent, and jobs
submitted as ordinary users. Used by tests/cluster/conftest.py; see docs/deploy-slurm.md.

Everything it starts it stops, by process id: the cluster through `minicluster.sh down`
(pid files), the server and the agent through the Popen objects it holds.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "minicluster.sh"
PROGS = Path(__file__).resolve().parent / "progs"
USERS = ("iolensa", "iolensb")
NODES = ["c1", "c2", "c3", "c4"]
# What the suite needs from apt (installed by `minicluster.sh install` when missing).
COMMANDS = ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd", "mpicc", "mpirun", "fio")
HEADERS = ("/usr/include/slurm/spank.h",)
SACCT_FIELDS = "JobID,User,JobName,NodeList,NNodes,NTasks,NCPUS,Submit,Start,End,State,ExitCode"


def missing_packages() -> list[str]:
    return [c for c in COMMANDS if shutil.which(c) is None] + [
        h for h in HEADERS if not Path(h).exists()
    ]


def stop_group(p: subprocess.Popen[bytes]) -> None:
    """SIGTERM to a process started in its own session, SIGKILL after 30 s."""
    if p.poll() is not None:
        return
    os.killpg(p.pid, signal.SIGTERM)
    try:
        p.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(10)


def iolens_bin() -> str:
    exe = Path(sys.executable).with_name("iolens")
    return str(exe) if exe.exists() else shutil.which("iolens") or "iolens"


@dataclass
class Job:
    """One submitted job and what its program printed."""

    job_id: str
    name: str
    user: str
    out: str = ""
    elapsed_s: float = 0.0  # submit -> gone from the queue, measured here

    def records(self) -> list[dict[str, Any]]:
        """The JSON lines the job's programs printed."""
        return [json.loads(x) for x in self.out.splitlines() if x.startswith("{")]


#: a rank killed by a signal, as srun reports it, or mpirun (orted steps)
DIED = re.compile(
    r"srun: error: \S+: tasks? [\d,-]+: (Segmentation fault|Aborted|Bus error)"
    r"|exited on signal \d+ \((Segmentation fault|Aborted|Bus error)\)"
)


def survived(job: Job) -> bool:
    """No rank of the job died of a signal (srun reports it in the job's output)."""
    return not DIED.search(job.out)


@dataclass
class Cluster:
    mc: Path
    port: int
    token: str
    timings: dict[str, float] = field(default_factory=dict)
    user_tokens: dict[str, str] = field(default_factory=dict)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    io_bps: int = 100_000_000

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def env(self) -> dict[str, str]:
        e = dict(os.environ)
        e.update(
            MC=str(self.mc),
            SLURM_CONF=str(self.mc / "etc" / "slurm.conf"),
            IOLENS_SERVER=self.url,
            IOLENS_TOKEN=self.token,
            IOLENS_BIN=iolens_bin(),
            MC_IO_BPS=str(self.io_bps),
            TZ="UTC",  # sacct prints UTC, imported with --tz UTC
        )
        return e

    @property
    def throttled(self) -> bool:
        """Whether `minicluster.sh` could put the jobs in a throttled cgroup (MC_IO_BPS)."""
        base = Path("/sys/fs/cgroup")
        name = f"iolens-mc-{os.environ.get('MC_PORT_BASE', '27800')}"
        return (base / "blkio" / name).is_dir() or (base / name).is_dir()

    @property
    def jobs_dir(self) -> Path:
        return self.mc / "jobs"

    @property
    def bin(self) -> Path:
        return self.mc / "bin"

    # -- life cycle ----------------------------------------------------------------------
    def script(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["bash", str(SCRIPT), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def timed(self, name: str, t0: float) -> None:
        self.timings[name] = round(time.monotonic() - t0, 2)

    def start(self) -> None:
        t0 = time.monotonic()
        self.script("down")  # a previous session's leftovers (its pid files), if any
        if self.mc.exists():
            shutil.rmtree(self.mc)
        self.mc.mkdir(parents=True)
        db = self.mc / "iolens.duckdb"
        self._accounts(db)
        log = open(self.mc / "serve.log", "wb")  # noqa: SIM115 - lives as long as the server
        self.procs["serve"] = subprocess.Popen(
            [iolens_bin(), "serve", "--db", str(db), "--port", str(self.port),
             "--agent-token", self.token, "--analyze-every", "2"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        self._wait_http("/healthz", 60)
        res = self.script("up")
        assert res.returncode == 0, res.stdout + res.stderr
        self.timed("cluster_up_s", t0)
        self._start_agent()
        self._compile()

    def _accounts(self, db: Path) -> None:
        """Per-user API tokens (`iolens user add`), when this iolens has accounts."""
        probe = subprocess.run([iolens_bin(), "user", "--help"], capture_output=True, text=True)
        if probe.returncode != 0:
            return
        for user in USERS:
            res = subprocess.run(
                [iolens_bin(), "user", "add", user, "--db", str(db), "--json"],
                capture_output=True,
                text=True,
            )
            if res.returncode == 0:
                self.user_tokens[user] = json.loads(res.stdout)["token"]

    def _start_agent(self) -> None:
        cfg = self.mc / "agent.toml"
        off = "\n".join(
            f"[sources.{s}]\nenabled = false"
            for s in ("infiniband", "lnet_router", "lustre_oss", "lustre_mds", "lustre_client")
        )
        cfg.write_text(
            f'[agent]\nserver = "{self.url}"\ntoken = "{self.token}"\n'
            f'spool = "{self.mc / "agent-spool"}"\ninterval = 1.0\nrole = "compute"\n'
            f'trace_spool = "{self.mc / "spool"}"\n{off}\n'
        )
        log = open(self.mc / "agent.log", "wb")  # noqa: SIM115
        self.procs["agent"] = subprocess.Popen(
            [iolens_bin(), "agent", "--config", str(cfg)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def _compile(self) -> None:
        for src, flags in (("mpiio_bench.c", []), ("mdstorm.c", [])):
            cc = "mpicc" if src.startswith("mpi") else "cc"
            out = self.bin / src[:-2]
            res = subprocess.run(
                [cc, "-O2", "-Wall", "-o", str(out), str(PROGS / src), *flags],
                capture_output=True,
                text=True,
            )
            assert res.returncode == 0, res.stderr
            out.chmod(0o755)

    def stop(self) -> None:
        self.script("down", timeout=300)
        for data in self.jobs_dir.glob("*.dat"):  # the jobs' output; their logs stay
            data.unlink(missing_ok=True)
        for name in ("agent", "serve"):
            p = self.procs.pop(name, None)
            if p is not None:
                stop_group(p)

    def _wait_http(self, path: str, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if httpx.get(self.url + path, timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            if self.procs["serve"].poll() is not None:
                raise AssertionError((self.mc / "serve.log").read_text()[-2000:])
            time.sleep(0.3)
        raise AssertionError(f"{self.url}{path} did not answer in {timeout} s")

    # -- jobs ----------------------------------------------------------------------------
    def as_user(
        self, user: str, command: str, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        """Run a shell command as `user`, against the cluster (what a user types)."""
        return subprocess.run(
            ["su", user, "-c", f"export SLURM_CONF={self.env['SLURM_CONF']}; cd ~ && {command}"],
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def sbatch(
        self,
        user: str,
        name: str,
        opts: str,
        wrap: str,
        wait: bool = True,
        env: dict[str, str] | None = None,
    ) -> Job:
        """Submit `wrap` as a batch job (with `env` exported, as the user's shell would);
        with `wait`, return once it has left the queue (polled here: `sbatch --wait` backs
        off to half-minute polls)."""
        out = self.jobs_dir / f"{name}-%j.out"
        t0 = time.monotonic()
        exports = "".join(f"export {k}={shlex.quote(v)}; " for k, v in (env or {}).items())
        res = self.as_user(
            user,
            f"{exports}sbatch --parsable -J {name} -o {out} {opts} --wrap {shlex.quote(wrap)}",
        )
        assert res.returncode == 0, res.stdout + res.stderr
        job = Job(res.stdout.strip().split(";")[0].splitlines()[0], name, user)
        if wait:
            self.wait_gone(job)
            job.elapsed_s = time.monotonic() - t0
        return job

    def sbatch_surviving(
        self,
        user: str,
        name: str,
        opts: str,
        wrap: str,
        crashed: list[Job] | None = None,
        ok: Callable[[Job], bool] | None = None,
    ) -> Job:
        """A batch job made once more when it died (`ok`, default `survived`: no rank
        killed by a signal).

        Open MPI 4.1 (Debian 12) on this one-host cluster now and then calls a null
        function pointer inside MPI_Init: a core dump shows the TCP BTL's receive callback
        dispatching a fragment through its active-message table (`call *(%rax)`) before
        the PML has registered that tag's callback; the tracer is not on the stack, and
        untraced runs die the same way (docs/accuracy.md, "Rank deaths in MPI_Init"). The
        dead run is kept in `crashed` and its output in $MC/crashed-ID.out, so a test
        reports it rather than hiding it."""
        return self.surviving(lambda: self.sbatch(user, name, opts, wrap), crashed, ok)

    def surviving(
        self,
        make: Callable[[], Job],
        crashed: list[Job] | None = None,
        ok: Callable[[Job], bool] | None = None,
    ) -> Job:
        """`make()` once more when its job died (`sbatch_surviving` says why)."""
        job = make()
        if (ok or survived)(job):
            return job
        if crashed is not None:
            crashed.append(job)
        (self.mc / f"crashed-{job.job_id}.out").write_text(job.out)
        return make()

    def srun(self, user: str, name: str, opts: str, command: str, check: bool = True) -> Job:
        """Run `command` with srun directly (no batch script); the job id comes from rank 0.
        `check=False`: a step whose rank died is returned too (`surviving`)."""
        t0 = time.monotonic()
        res = self.as_user(
            user,
            f"srun -J {name} {opts} sh -c {shlex.quote('[ $SLURM_PROCID = 0 ] && echo JOBID=$SLURM_JOB_ID; exec ' + command)}",  # noqa: E501
        )
        out = res.stdout + res.stderr
        assert res.returncode == 0 or (not check and DIED.search(out)), out
        job_id = next(x[6:] for x in res.stdout.splitlines() if x.startswith("JOBID="))
        return Job(job_id, name, user, out if res.returncode else res.stdout,
                   time.monotonic() - t0)  # fmt: skip

    def wait_gone(self, job: Job, timeout: float = 900) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            q = subprocess.run(
                ["squeue", "-h", "-j", job.job_id], env=self.env, capture_output=True, text=True
            )
            if not q.stdout.strip():
                self.collect(job)
                return
            time.sleep(0.2)
        raise AssertionError(f"job {job.job_id} still queued after {timeout} s")

    def collect(self, job: Job) -> None:
        out = self.jobs_dir / f"{job.name}-{job.job_id}.out"
        if out.exists():
            job.out = out.read_text()

    def sacct(self, job_ids: list[str]) -> list[dict[str, str]]:
        """Allocation rows of the jobs, as root sees them (with End set)."""
        res = subprocess.run(
            ["sacct", "-a", "-X", "-P", "-j", ",".join(job_ids), "-o", SACCT_FIELDS],
            env=self.env,
            capture_output=True,
            text=True,
        )
        lines = res.stdout.strip().splitlines()
        head = lines[0].split("|")
        return [dict(zip(head, line.split("|"), strict=True)) for line in lines[1:]]

    def import_sacct(self, job_ids: list[str]) -> None:
        """sacct (jobs and steps) -> `iolens import sacct --server`: the scheduler's times,
        task counts and node lists, as a site's periodic import would send them."""
        end = time.monotonic() + 60
        while any(r["End"] in ("", "Unknown") for r in self.sacct(job_ids)):
            assert time.monotonic() < end, "sacct has no End time"
            time.sleep(0.5)
        res = subprocess.run(
            ["sacct", "-a", "-P", "-j", ",".join(job_ids), "-o", SACCT_FIELDS],
            env=self.env,
            capture_output=True,
            text=True,
        )
        path = self.mc / f"sacct-{job_ids[0]}-{len(job_ids)}.txt"
        path.write_text(res.stdout)
        out = self.iolens(
            "import", "sacct", str(path), "--tz", "UTC", "--server", self.url, "--token", self.token
        )
        assert out["jobs"] == len(job_ids), out

    # -- iolens --------------------------------------------------------------------------
    def iolens(self, *args: str, json_out: bool = True) -> Any:
        res = subprocess.run(
            [iolens_bin(), *args, *(["--json"] if json_out else [])],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        return json.loads(res.stdout) if json_out else res.stdout

    def query(self, *args: str) -> Any:
        """A query command through the server, as the CLI runs it (`--server`)."""
        return self.iolens(*args, "--server", self.url, "--token", self.token)

    def api(self, path: str, token: str | None = None) -> httpx.Response:
        return httpx.get(
            f"{self.url}/api/v1{path}",
            headers={"Authorization": f"Bearer {token or self.token}"},
            timeout=120,
        )

    def settle(self, timeout: float = 120) -> None:
        """Wait until every finished process's trace is in the server: the tracer spool and
        the agent's outbox are empty."""
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            left = list((self.mc / "spool").glob("*.iolens"))
            outbox = list((self.mc / "agent-spool").rglob("*.iolb"))
            if not left and not outbox:
                time.sleep(1.5)  # the server's group commit
                return
            time.sleep(0.5)
        raise AssertionError(f"traces still waiting: {left[:3]} {outbox[:3]}")
