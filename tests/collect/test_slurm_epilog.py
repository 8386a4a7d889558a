"""The seff line at the end of a job (issue 22 part 3): the SrunEpilog hook run
as Slurm runs it (a fresh `python3` process of the hook file, with the variables an epilog
gets) against a real `iolens serve` on loopback holding a job imported from a real Darshan
log, and against a dead port and a server that never answers: no line and exit 0 there,
within the timeout."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

import iolens.collect.slurm_epilog as hook
from tests.analyze.darshan.zoomin_logs import example
from tests.conftest import run_cli
from tests.loopback import free_port, start_server, stop

JOB = "6265799"  # sample-badost.darshan: 2048 ranks, one slow OST


def run_hook(server: str, *args: str, **env: str) -> tuple[subprocess.CompletedProcess, float]:
    """The hook file under the system's python3, with an epilog's environment only."""
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "SLURM_JOB_ID": JOB,
            "SLURM_SCRIPT_CONTEXT": "epilog_srun", "IOLENS_SERVER": server,
            "IOLENS_TOKEN": USERS.get("glock", "none"), "IOLENS_EPILOG_ENV": "/nonexistent",
            "HOME": "/nonexistent", "IOLENS_EPILOG_TIMEOUT": "2"}  # fmt: skip
    t0 = time.monotonic()
    res = subprocess.run(["python3", hook.__file__, *args], env={**base, **env},
                         capture_output=True, text=True, timeout=30)  # fmt: skip
    return res, time.monotonic() - t0


USERS: dict[str, str] = {}  # name -> API token, from `iolens user add`


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory):
    """The log's job owned by glock (its uid 69615, by a uid map), glock's and eve's own
    tokens (what an epilog running as the user has), a server on loopback."""
    d = tmp_path_factory.mktemp("epilog")
    db, uids = d / "iolens.duckdb", d / "uids.toml"
    uids.write_text('[uids]\n69615 = "glock"\n')
    log = str(example("sample-badost.darshan"))
    imp = run_cli("import", "darshan", log, "--uid-map", str(uids), "--db", str(db))
    assert imp.returncode == 0, imp.stderr
    for name in ("glock", "eve"):
        made = run_cli("user", "add", name, "--db", str(db), "--json")
        assert made.returncode == 0, made.stderr
        USERS[name] = json.loads(made.stdout)["token"]
    port = free_port()
    proc = start_server(db, port, d / "serve.log")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


def test_srun_epilog_prints_the_jobs_seff_line(served: str) -> None:
    res, _ = run_hook(served)
    assert res.returncode == 0 and res.stderr == "", res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 1, lines
    s = httpx.get(f"{served}/api/v1/jobs/{JOB}/seff",
                  headers={"Authorization": f"Bearer {USERS['glock']}"}).json()  # fmt: skip
    findings = httpx.get(f"{served}/api/jobs/{JOB}/findings",
                         headers={"Authorization": f"Bearer {USERS['glock']}"}).json()  # fmt: skip
    best = max(findings, key=lambda f: (f.get("gain") or {}).get("seconds", -1))
    assert s["top"]["code"] == best["code"]  # the largest saving is the fix named
    # the log's own figures: 2048 ranks, run time 780 s, I/O ~all of it
    assert s["cores"] == 2048 and s["io_time_s"] <= s["runtime_s"] <= 781
    line = lines[0]
    assert line.startswith(f"iolens: job {JOB}: I/O {s['io_time_s']:.0f} s")
    assert f"{s['top']['code']} " in line and f"would save ~{s['top']['seconds']:.0f} s" in line


def test_only_the_srun_epilog_answers(served: str) -> None:
    """slurmstepd discards a TaskEpilog's output (and a prolog is too early): asking the
    server from there would cost every task a request for nothing."""
    for ctx in ("epilog_task", "prolog_srun", "epilog_slurmd", ""):
        res, _ = run_hook(served, SLURM_SCRIPT_CONTEXT=ctx, SLURM_PROCID="0")
        assert res.returncode == 0 and res.stdout == "", ctx
    arg, _ = run_hook(served, "srun", SLURM_SCRIPT_CONTEXT="")
    assert arg.stdout.startswith(f"iolens: job {JOB}: ")


def test_no_line_for_a_job_without_data_or_a_refused_token(served: str) -> None:
    bad = (
        {"SLURM_JOB_ID": "424242"},
        {"IOLENS_TOKEN": "wrong"},
        {"IOLENS_TOKEN": USERS["eve"]},
    )  # no data; a bad token; eve (not her job)
    for env in bad:
        res, _ = run_hook(served, **env)
        assert res.returncode == 0 and res.stdout == "" and res.stderr == "", env
    noted, _ = run_hook(served, SLURM_JOB_ID="424242", IOLENS_EPILOG_VERBOSE="1")
    assert noted.stdout == "" and noted.stderr.count("\n") == 1 and "404" in noted.stderr


def test_dead_port_prints_nothing_and_exits_0_fast() -> None:
    res, took = run_hook(f"http://127.0.0.1:{free_port()}")
    assert res.returncode == 0 and res.stdout == "" and res.stderr == ""
    assert took < 2 + 2


def test_a_server_that_never_answers_is_given_up_within_the_timeout(tmp_path: Path) -> None:
    with socket.socket() as s:  # listens (the connect succeeds), never answers
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        port = s.getsockname()[1]
        res, took = run_hook(f"http://127.0.0.1:{port}", IOLENS_EPILOG_TIMEOUT="1",
                             IOLENS_EPILOG_VERBOSE="1")  # fmt: skip
    assert res.returncode == 0 and res.stdout == ""
    assert "not reachable" in res.stderr and took < 1 + 2


def test_the_token_file_and_settings_file(tmp_path: Path) -> None:
    (tmp_path / "epilog.env").write_text("# site settings\nIOLENS_SERVER='http://x:1'\n")
    (tmp_path / "tok").write_text("secret\n")
    s = hook.settings({"IOLENS_EPILOG_ENV": str(tmp_path / "epilog.env"),
                       "IOLENS_TOKEN_FILE": str(tmp_path / "tok")})  # fmt: skip
    assert s["IOLENS_SERVER"] == "http://x:1" and hook.token(s) == "secret"
    assert hook.mode_of({"SLURM_SCRIPT_CONTEXT": "epilog_slurmd"}) is None
    assert json.dumps(hook.mode_of({}, "srun")) == '"srun"'


def test_iolens_seff_through_the_server_gives_the_same_line(served: str) -> None:
    """`iolens seff --server` asks /api/v1/jobs/ID/seff, as the hook does."""
    res = run_cli("seff", JOB, "--line", "--server", served, "--token", USERS["glock"])
    assert res.returncode == 0, res.stderr
    hooked, _ = run_hook(served)
    assert res.stdout == hooked.stdout and res.stdout.startswith(f"iolens: job {JOB}: ")
