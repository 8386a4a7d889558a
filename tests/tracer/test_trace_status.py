"""`iolens trace` exits with the program's own status and never loses its trace: stored,
stored through the server that owns the store, or kept in the spool for later."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from iolens.store import DuckDBStore
from tests.conftest import run_cli
from tests.loopback import free_port, start_server, stop
from tests.tracer.conftest import needs_cc

pytestmark = needs_cc

#: A shell that hands a file to `cat` (a traced child that ends normally), then ends as told.
SCRIPT = "echo data > {f}; cat {f} > /dev/null; {end}"


@pytest.fixture
def env(tracer_lib: Path, tmp_path: Path) -> dict[str, str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    return {**clean, "IOLENS_LIBRARY": str(tracer_lib), "HOME": str(tmp_path / "home")}


def trace(env: dict[str, str], db: Path, job: str, end: str, *extra: str):
    script = SCRIPT.format(f=db.parent / f"{job}.txt", end=end)
    args = ("trace", "--db", str(db), "--job-id", job, "--json", *extra, "--", "sh", "-c", script)
    return run_cli(*args, env=env)


def job(env: dict[str, str], db: Path, job_id: str) -> dict[str, object]:
    res = run_cli("job", job_id, "--db", str(db), "--json", env=env)
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)


@pytest.mark.parametrize(
    "end,status,state",
    [
        ("exit 0", 0, "COMPLETED"),
        ("exit 3", 3, "FAILED"),
        ("kill -TERM $$", 128 + signal.SIGTERM, "FAILED"),
        ("kill -KILL $$", 128 + signal.SIGKILL, "FAILED"),
    ],
)
def test_exit_status_is_the_programs(env, tmp_path, end, status, state):
    db = tmp_path / "s.duckdb"
    res = trace(env, db, "t1", end)
    assert res.returncode == status, res.stderr
    summary = json.loads(res.stdout)
    assert summary["exit_code"] == status and summary["stored"] is True
    assert summary["files"] >= 1 and summary["records"] > 0
    got = job(env, db, "t1")
    assert got["state"] == state and got["read_bytes"] >= 5  # cat read "data\n"
    spool = tmp_path / "home" / ".local" / "share" / "iolens" / "traces"
    assert spool.is_dir() and list(spool.iterdir()) == []  # stored: nothing left behind


def test_a_missing_program_is_127_and_one_line(env, tmp_path):
    res = run_cli("trace", "--db", str(tmp_path / "s.duckdb"), "--", "no-such-program", env=env)
    assert res.returncode == 127
    assert res.stderr.strip() == "error: cannot run 'no-such-program': command not found"


def test_locked_store_with_a_server_stores_through_it(env, tmp_path):
    db = tmp_path / "s.duckdb"
    proc = start_server(db, free_port(), tmp_path / "log")
    try:
        res = trace(env, db, "t2", "exit 3")
        assert res.returncode == 3, res.stderr
        summary = json.loads(res.stdout)
        assert summary["stored"] is True and summary["files"] >= 1
        got = job(env, db, "t2")  # asked through the server too: it owns the store
        assert got["state"] == "FAILED" and got["read_bytes"] >= 5
    finally:
        stop(proc)
    with DuckDBStore(db, create=False) as store:
        rows = store.query("SELECT state FROM jobs WHERE job_id = 't2'").to_pylist()
    assert rows == [{"state": "FAILED"}]


def test_locked_store_without_a_server_keeps_the_trace_in_the_spool(env, tmp_path):
    db = tmp_path / "s.duckdb"
    DuckDBStore(db).close()
    code = (
        "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
        "print(1, flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE)
    assert holder.stdout is not None and holder.stdout.readline() == b"1\n"
    spool = tmp_path / "spool"
    try:
        res = trace(env, db, "t3", "kill -TERM $$", "--spool", str(spool))
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait()
    assert res.returncode == 143, res.stderr
    summary = json.loads(res.stdout)
    assert summary["stored"] is False and summary["spool"] == str(spool)
    assert f"it is kept in {spool}: `iolens import trace {spool}` loads it" in res.stderr
    assert "is locked by another process" in res.stderr
    kept = sorted(spool.glob("*.iolens"))
    assert kept and not [p for p in spool.iterdir() if p.is_dir()]
    # ... and later, with the store free, it loads as the job it was
    res = run_cli("import", "trace", str(spool), "--db", str(db), "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["files"] == len(kept)
    assert job(env, db, "t3")["read_bytes"] >= 5


def test_a_user_stores_their_own_traces_through_the_server_and_only_those(env, tmp_path):
    db = tmp_path / "s.duckdb"
    proc = start_server(db, free_port(), tmp_path / "log")
    try:
        made = run_cli("user", "add", "carol", "--db", str(db), "--json", env=env)
        assert made.returncode == 0, made.stderr
        carol = {**env, "IOLENS_TOKEN": json.loads(made.stdout)["token"], "USER": "carol"}
        res = trace(carol, db, "c1", "exit 0")
        assert res.returncode == 0 and json.loads(res.stdout)["stored"] is True, res.stderr
        assert job(carol, db, "c1")["user"] == "carol"
        # someone else's processes are not carol's to load: kept, and said so
        spool = tmp_path / "spool"
        res = trace({**carol, "USER": "dave"}, db, "c2", "exit 4", "--spool", str(spool))
        assert res.returncode == 4
        assert "a trace of user dave; you may load your own only" in res.stderr
        assert json.loads(res.stdout)["stored"] is False and list(spool.glob("*.iolens"))
        # nor may her traces join another user's job
        dave = trace({**env, "USER": "dave"}, db, "d1", "exit 0")  # the owner's token
        assert json.loads(dave.stdout)["stored"] is True, dave.stderr
        res = trace(carol, db, "d1", "exit 0", "--spool", str(spool))
        assert res.returncode == 0 and "job d1 is another user's" in res.stderr
    finally:
        stop(proc)
