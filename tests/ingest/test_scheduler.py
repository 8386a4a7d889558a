"""Scheduler job records: `iolens import sacct` on real sacct output, and the Slurm
prolog/epilog hook against a store, a real loopback server and a dead one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest

from iolens.collect.slurm_hook import hook_batch, outcome
from iolens.ingest.importers import sacct
from iolens.ship import wire
from iolens.ship.shipper import Backoff, Shipper
from iolens.ship.spool import DiskSpool
from iolens.ship.transport import HttpTransport
from iolens.store import DuckDBStore
from tests.conftest import run_cli
from tests.loopback import TOKEN, free_port, start_server, stop

CASES = Path(__file__).resolve().parents[1] / "cases" / "import" / "sacct"
HABROK = CASES / "habrok" / "sacct.txt"
HABROK_OPTS = json.loads((CASES / "habrok" / "options.json").read_text())
SLYME = CASES / "slyme" / "sacct_single_parallel_COMPLETED_parsable.out"
SLYME_OPTS = json.loads((CASES / "slyme" / "options.json").read_text())


def _habrok_args(db: Path, *extra: str) -> list[str]:
    fmt = ",".join(HABROK_OPTS["fields"])
    return [
        "import",
        "sacct",
        str(HABROK),
        "--db",
        str(db),
        "--format",
        fmt,
        "--delimiter",
        HABROK_OPTS["delimiter"],
        *extra,
    ]


def _jobs(db: Path) -> dict[str, dict]:
    with DuckDBStore(db, create=False) as store:
        return {r["job_id"]: r for r in store.query("SELECT * FROM jobs").to_pylist()}


def _clean_env(**slurm: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "IOLENS_"))}
    return {**env, **slurm}


# -- sacct import ---------------------------------------------------------------------------
def test_sacct_import_real_file_golden(tmp_path):
    db = tmp_path / "s.duckdb"
    res = run_cli(*_habrok_args(db, "--tz", "Europe/Amsterdam", "--json"))
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    # Independently of the parser: every line's JobID without its step suffix.
    delim = HABROK_OPTS["delimiter"]
    lines = [ln for ln in HABROK.read_text(encoding="utf-8").splitlines() if ln.strip()]
    ids = {ln.split(delim)[0].split(".")[0] for ln in lines}
    assert summary == {
        "file": str(HABROK),
        "rows": len(lines),
        "jobs": len(ids),
        "loaded": len(ids),
        "duplicate": False,
    }
    jobs = _jobs(db)
    assert set(jobs) == ids
    # 7818766: omni[2-3], 128 tasks in step .0 (the allocation row has no NTasks), started
    # 2024-04-02T09:05:14 Amsterdam summer time = 07:05:14 UTC.
    j = jobs["7818766"]
    assert j["nodes"] == ["omni2", "omni3"]
    assert j["nprocs"] == 128
    assert j["start"] == datetime(2024, 4, 2, 7, 5, 14)
    assert j["end"] == datetime(2024, 4, 3, 13, 51, 56)
    assert (j["user"], j["state"], j["source"]) == ("user492", "COMPLETED", "slurm")
    # Winter time: one hour off, not two.
    row = next(ln.split(delim) for ln in lines if ln.startswith("6708912" + delim))
    local = datetime.fromisoformat(row[10]).replace(tzinfo=ZoneInfo("Europe/Amsterdam"))
    assert jobs["6708912"]["start"] == local.astimezone(UTC).replace(tzinfo=None)
    assert jobs["6708912"]["state"] == "TIMEOUT"
    # An array task keeps its index; a job cancelled before it started has no start or nodes.
    assert jobs["5908801_3"]["nodes"] == ["v100gpu10"]
    assert jobs["4047445"]["start"] is None and jobs["4047445"]["nodes"] == []
    assert jobs["4047445"]["state"] == "CANCELLED"  # "CANCELLED by 10290820"


def test_sacct_parsable2_noheader_and_local_zone(tmp_path):
    db = tmp_path / "s.duckdb"
    fmt = ",".join(SLYME_OPTS["fields"])
    env = {**os.environ, "TZ": "America/New_York"}  # the default --tz is the machine's zone
    res = run_cli("import", "sacct", str(SLYME), "--db", str(db), "--format", fmt, env=env)
    assert res.returncode == 0, res.stderr
    assert "Imported 1 job(s)" in res.stdout
    (job,) = _jobs(db).values()
    assert job["job_id"] == "77454" and job["app"] == "cpu_user_parallel"
    assert job["nodes"] == ["hero4515", "hero4516"]
    assert job["nprocs"] == 3  # no NTasks column: the allocation's CPUs
    assert job["start"] == datetime(2014, 6, 26, 15, 51, 28)  # EDT is UTC-4


def test_sacct_import_is_idempotent_and_a_header_file_merges(tmp_path):
    db = tmp_path / "s.duckdb"
    first = run_cli(*_habrok_args(db, "--tz", "UTC", "--json"))
    again = run_cli(*_habrok_args(db, "--tz", "UTC", "--json"))
    assert first.returncode == again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["duplicate"] is True
    assert json.loads(again.stdout)["loaded"] == 0
    before = _jobs(db)
    # The same jobs printed with a header and `|` (sacct --parsable2): new content, same ids.
    delim = HABROK_OPTS["delimiter"]
    rows = [ln.split(delim)[:-1] for ln in HABROK.read_text(encoding="utf-8").splitlines()]
    with_header = tmp_path / "header.txt"
    with_header.write_text(
        "\n".join("|".join(r) for r in [HABROK_OPTS["fields"], *rows]) + "\n", encoding="utf-8"
    )
    res = run_cli("import", "sacct", str(with_header), "--db", str(db), "--tz", "UTC")
    assert res.returncode == 0, res.stderr
    assert _jobs(db) == before
    human = run_cli("import", "sacct", str(with_header), "--db", str(db), "--tz", "UTC")
    assert "imported before" in human.stdout


def test_sacct_rows_merge_with_hook_rows(tmp_path):
    db = tmp_path / "s.duckdb"
    env = _clean_env(
        SLURM_JOB_ID="555",
        SLURM_JOB_USER="alice",
        SLURM_JOB_NODELIST="n[1-2]",
        SLURM_JOB_NAME="wrf",
        SLURM_NTASKS="8",
    )
    assert run_cli("hook", "slurm", "prolog", "--db", str(db), env=env).returncode == 0
    # sacct without JobName or task counts: what it leaves empty, the hook's row keeps.
    sacct = tmp_path / "sacct.txt"
    sacct.write_text(
        "JobID|User|NodeList|Start|End|State\n"
        "555|alice|n[1-2]|2024-01-01T10:00:00|Unknown|RUNNING\n"
        "555.0|alice|n[1-2]|2024-01-01T10:00:05|Unknown|RUNNING\n"
        "556|bob|n3|2024-01-01T11:00:00|2024-01-01T12:00:00|COMPLETED\n"
    )
    res = run_cli("import", "sacct", str(sacct), "--db", str(db), "--tz", "UTC")
    assert res.returncode == 0, res.stderr
    jobs = _jobs(db)
    assert set(jobs) == {"555", "556"}
    j = jobs["555"]
    assert (j["app"], j["nprocs"], j["nodes"]) == ("wrf", 8, ["n1", "n2"])
    assert j["start"] == datetime(2024, 1, 1, 10, 0, 0) and j["end"] is None
    assert (j["state"], j["source"]) == ("RUNNING", "slurm")
    # The epilog then ends it.
    env["SLURM_JOB_EXIT_CODE"] = "0"
    assert run_cli("hook", "slurm", "epilog", "--db", str(db), env=env).returncode == 0
    j = _jobs(db)["555"]
    assert j["start"] == datetime(2024, 1, 1, 10, 0, 0) and j["end"] is not None
    assert j["state"] == "COMPLETED"


def test_a_half_written_sacct_record_does_not_replace_the_hooks_nodes(tmp_path):
    """Seen on a real cluster right after a 2-node job ended: slurmdbd's allocation row still
    had the name "allocation" and only the first node, with NNodes 2."""
    db = tmp_path / "s.duckdb"
    env = _clean_env(
        SLURM_JOB_ID="11", SLURM_JOB_USER="ann", SLURM_JOB_NODELIST="c[1-2]",
        SLURM_JOB_NAME="untraced", SLURM_NTASKS="2",
    )  # fmt: skip
    assert run_cli("hook", "slurm", "prolog", "--db", str(db), env=env).returncode == 0
    head = "JobID|User|JobName|NodeList|NNodes|NTasks|NCPUS|Start|End|State\n"
    half = tmp_path / "half.txt"
    half.write_text(
        head + "11|ann|allocation|c1|2||2|2026-11-23T17:24:02|2026-11-23T17:24:04|COMPLETED\n"
        "11.batch||batch|c1|1|1|1|2026-11-23T17:24:02|2026-11-23T17:24:04|COMPLETED\n"
        "11.0||mpiio_bench|c[1-2]|2|2|2|2026-11-23T17:24:03|2026-11-23T17:24:04|COMPLETED\n"
    )
    assert run_cli("import", "sacct", str(half), "--db", str(db), "--tz", "UTC").returncode == 0
    j = _jobs(db)["11"]
    assert (j["nodes"], j["app"], j["state"]) == (["c1", "c2"], "untraced", "COMPLETED")
    assert j["end"] == datetime(2026, 11, 23, 17, 24, 4)  # the rest of the record counts
    final = tmp_path / "final.txt"  # a later import brings the finished record
    final.write_text(
        head + "11|ann|untraced|c[1-2]|2||2|2026-11-23T17:24:02|2026-11-23T17:24:04|COMPLETED\n"
    )
    assert run_cli("import", "sacct", str(final), "--db", str(db), "--tz", "UTC").returncode == 0
    assert _jobs(db)["11"]["nodes"] == ["c1", "c2"]


def test_array_tasks_use_raw_ids_and_het_components_fold_into_their_leader():
    text = (
        "JobID|JobIDRaw|JobName|User|NodeList|NCPUS|NTasks|State|Start|End\n"
        "123_4|130|sweep|al|n1|4||COMPLETED|2024-01-01T00:00:00|2024-01-01T01:00:00\n"
        "123_4.batch|130.batch|batch||n1|4|1|COMPLETED|2024-01-01T00:00:00|2024-01-01T01:00:00\n"
        "123_[5-9]|123|sweep|al|None assigned|4||PENDING|Unknown|Unknown\n"
        "200+0|200|coupled|bo|a[1-2]|8|2|RUNNING|2024-01-02T00:00:00|Unknown\n"
        "200+1|201|coupled|bo|b1|4|4|RUNNING|2024-01-02T00:00:01|Unknown\n"
        "200+1.0|201.0|ocean||b1|4|4|RUNNING|2024-01-02T00:00:02|Unknown\n"
    )
    batch, rows = sacct.batch_of_text(text, "t.txt", tz="UTC")
    jobs = {r["job_id"]: r for r in batch.jobs.to_pylist()}
    assert rows == 6 and set(jobs) == {"130", "123_[5-9]", "200"}
    assert (jobs["130"]["app"], jobs["130"]["nprocs"]) == ("sweep", 1)  # the batch step's task
    assert jobs["123_[5-9]"]["start"] is None and jobs["123_[5-9]"]["nodes"] == []
    het = jobs["200"]
    assert (het["app"], het["nodes"], het["nprocs"]) == ("coupled", ["a1", "a2", "b1"], 6)
    assert het["start"] == datetime(2024, 1, 2) and het["end"] is None
    assert het["state"] == "RUNNING"


def test_format_widths_are_ignored(tmp_path):
    out = tmp_path / "noheader.txt"
    out.write_text("42|al|2024-05-01T08:00:00|2024-05-01T09:00:00|COMPLETED|n[7-8]\n")
    fmt = "JobID,User%12,Start,End,State%-10,NodeList%30"
    db = tmp_path / "s.duckdb"
    res = run_cli("import", "sacct", str(out), "--db", str(db), "--format", fmt, "--tz", "UTC")
    assert res.returncode == 0, res.stderr
    assert _jobs(db)["42"]["nodes"] == ["n7", "n8"]


@pytest.mark.parametrize(
    "content,args,message",
    [
        ("JobID|User|Start\n1|al|2024-01-01T00:00:00\n2|bo\n", [], ":3: expected 3 fields"),
        ("JobID|User|Start\n1|al|yesterday\n", [], ":2: Start: bad time"),
        ("JobID|User\nx.y.z|al\n", [], ":2: bad job id"),
        ("1|al|2024-01-01T00:00:00\n", [], ":1: no header line naming JobID"),
        ("JobID|Start\n1|2024-01-01T00:00:00\n", [], ":2: no User column"),
        ("JobID|User\n1|al\n", ["--tz", "Mars/Olympus"], "unknown time zone"),
    ],
)
def test_bad_sacct_input_is_one_error_line(tmp_path, content, args, message):
    bad = tmp_path / "bad.txt"
    bad.write_text(content)
    res = run_cli("import", "sacct", str(bad), "--db", str(tmp_path / "s.duckdb"), *args)
    assert res.returncode == 2, res.stdout
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    assert message in lines[0]
    if "time zone" not in message:
        assert str(bad) in lines[0]


def test_missing_sacct_file(tmp_path):
    res = run_cli("import", "sacct", str(tmp_path / "nope.txt"), "--db", str(tmp_path / "s.db"))
    assert res.returncode == 2 and "nope.txt: no such file" in res.stderr
    assert "Traceback" not in res.stderr


# -- hook: unit -----------------------------------------------------------------------------
def test_hook_batch_from_environment():
    now = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    env = {
        "SLURM_JOB_ID": "42",
        "SLURM_JOB_UID": str(os.getuid()),
        "SLURM_NODELIST": "cn[008-010],gpu1",
        "SLURM_NPROCS": "4",
        "SLURM_JOB_PARTITION": "batch",
    }
    b = hook_batch("prolog", env, now)
    (row,) = b.jobs.to_pylist()
    import pwd

    assert row["user"] == pwd.getpwuid(os.getuid()).pw_name
    assert row["nodes"] == ["cn008", "cn009", "cn010", "gpu1"]
    assert (row["nprocs"], row["state"], row["start"], row["end"]) == (
        4,
        "RUNNING",
        datetime(2025, 1, 2, 3, 4, 5),
        None,
    )
    assert b.key == "slurm-hook:42:prolog" and b.extra["partition"] == "batch"
    assert hook_batch("epilog", {**env, "SLURM_RESTART_COUNT": "1"}, now).key == (
        "slurm-hook:42:epilog:1"
    )


@pytest.mark.parametrize(
    "env,state",
    [
        ({}, "COMPLETED"),
        ({"SLURM_JOB_EXIT_CODE": "0"}, "COMPLETED"),
        ({"SLURM_JOB_EXIT_CODE": "256"}, "FAILED"),
        ({"SLURM_JOB_EXIT_CODE2": "0:9"}, "FAILED"),
        ({"SLURM_JOB_EXIT_CODE": "0", "SLURM_JOB_DERIVED_EC": "2"}, "FAILED"),
        ({"SLURM_JOB_DERIVED_EC": "0:0"}, "COMPLETED"),
    ],
)
def test_epilog_state_from_exit_codes(env, state):
    assert outcome(env) == state


# -- hook: CLI ------------------------------------------------------------------------------
JOB_ENV = {
    "SLURM_JOB_ID": "9001",
    "SLURM_JOB_USER": "carol",
    "SLURM_JOB_NODELIST": "node[01-03]",
    "SLURM_JOB_NAME": "lammps",
    "SLURM_JOB_PARTITION": "compute",
    "SLURM_JOB_ACCOUNT": "physics",
}


def _hook(phase: str, *args: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli("hook", "slurm", phase, *args, env=_clean_env(**JOB_ENV, **extra))


def _check_job(db: Path) -> dict:
    rows = list(_jobs(db).values())
    assert len(rows) == 1
    (j,) = rows
    assert j["job_id"] == "9001" and j["user"] == "carol" and j["app"] == "lammps"
    assert j["nodes"] == ["node01", "node02", "node03"]
    assert j["start"] is not None and j["end"] is not None and j["start"] <= j["end"]
    return j


def test_hook_prolog_epilog_into_db(tmp_path):
    db = tmp_path / "s.duckdb"
    assert _hook("prolog", "--db", str(db)).returncode == 0
    first = _jobs(db)["9001"]
    assert (first["state"], first["end"]) == ("RUNNING", None)
    assert _hook("prolog", "--db", str(db)).returncode == 0  # every node runs it: one row
    res = _hook("epilog", "--db", str(db), SLURM_JOB_EXIT_CODE="0")
    assert res.returncode == 0, res.stderr
    j = _check_job(db)
    assert j["start"] == first["start"] and j["state"] == "COMPLETED"


def test_hook_without_job_id_exits_zero(tmp_path):
    db = tmp_path / "s.duckdb"
    res = run_cli("hook", "slurm", "prolog", "--db", str(db), env=_clean_env())
    assert res.returncode == 0
    assert "SLURM_JOB_ID" in res.stderr and "Traceback" not in res.stderr
    assert not db.exists()
    res = run_cli("hook", "slurm", "--db", str(db), env=_clean_env(**JOB_ENV))
    assert res.returncode == 0 and "prolog|epilog" in res.stderr


def test_hook_with_a_locked_db_exits_zero_and_spools(tmp_path):
    db, spool = tmp_path / "s.duckdb", tmp_path / "spool"
    held = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import duckdb,sys,time; c = duckdb.connect(sys.argv[1]); "
            "print('ok', flush=True); time.sleep(60)",
            str(db),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert held.stdout is not None and held.stdout.readline().strip() == "ok"
        res = _hook("prolog", "--db", str(db), "--spool", str(spool))
        assert res.returncode == 0 and "kept in" in res.stderr, res.stderr
    finally:
        held.kill()
        held.wait()
    res = _hook("epilog", "--db", str(db), "--spool", str(spool))  # delivers both
    assert res.returncode == 0, res.stderr
    assert DiskSpool(spool).pending() == []
    _check_job(db)


# -- hook against a real server -----------------------------------------------------------
def test_hook_prolog_epilog_through_the_server(tmp_path):
    db, port = tmp_path / "s.duckdb", free_port()
    url = f"http://127.0.0.1:{port}"
    server = start_server(db, port, tmp_path / "server.log")
    try:
        for phase in ("prolog", "epilog"):
            res = _hook(phase, "--server", url, "--token", TOKEN)
            assert res.returncode == 0 and "reported to" in res.stderr, res.stderr
        # While the server owns the store, the job is read through it.
        res = run_cli("job", "9001", "--server", url, "--token", TOKEN, "--json")
        assert res.returncode == 0, res.stderr
        rep = json.loads(res.stdout)
        assert (rep["nodes"], rep["state"]) == (3, "COMPLETED") and rep["end"] >= rep["start"]
        bad = _hook("epilog", "--server", url, "--token", "wrong")
        assert bad.returncode == 0 and "could not deliver" in bad.stderr
    finally:
        stop(server)
    _check_job(db)


def test_hook_against_a_dead_server_spools_and_is_delivered_later(tmp_path):
    db, port, spool = tmp_path / "s.duckdb", free_port(), tmp_path / "spool"
    url = f"http://127.0.0.1:{port}"
    started = time.monotonic()
    res = _hook("prolog", "--server", url, "--token", TOKEN, "--spool", str(spool))
    assert res.returncode == 0 and f"kept in {spool}" in res.stderr, res.stderr
    assert time.monotonic() - started < 30
    box = DiskSpool(spool)
    (key,) = box.pending()
    assert wire.decode(box.get(key)).key == "slurm-hook:9001:prolog"
    server = start_server(db, port, tmp_path / "server.log")
    try:
        # What the node agent does with its outbox: a shipper delivers what waits.
        shipper = Shipper(box, HttpTransport(url, TOKEN, timeout=5), Backoff(0.0, 0.0))
        assert shipper.deliver(now=0.0) == 1 and box.pending() == []
        # The next hook run would have delivered it too; the epilog goes straight through.
        res = _hook("epilog", "--server", url, "--token", TOKEN, "--spool", str(spool))
        assert res.returncode == 0 and "reported to" in res.stderr, res.stderr
        # A prolog re-sent by a node that spooled it too is a duplicate, not a second row.
        res = _hook("prolog", "--server", url, "--token", TOKEN, "--spool", str(spool))
        assert res.returncode == 0 and box.pending() == []
    finally:
        stop(server)
    j = _check_job(db)
    assert j["state"] == "COMPLETED"


def test_empty_delimiter_is_one_error_line(tmp_path):
    """Issue 19: `--delimiter ""` gave a traceback; now one line naming the file, exit 2."""
    res = run_cli(
        "import", "sacct", str(SLYME), "--db", str(tmp_path / "d.duckdb"), "--delimiter", ""
    )
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    assert "empty delimiter" in res.stderr and SLYME.name in res.stderr
