"""While `iolens serve` owns a store, every command given that store runs through it.

A real server on loopback owns one copy of a small simulated store; the same commands run
offline on another copy. Queries must print exactly the same, imports of the repository's
fixtures must report the same and land in the served store, users see only their jobs,
and a store locked by a process no server answers for is one clear error line.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path
from threading import Lock, Thread

import httpx
import pytest

from iolens.analyze.pipeline import analyze_jobs
from iolens.present import discovery
from iolens.present.cli import forward
from iolens.simulate import SimConfig, simulate
from iolens.store import DuckDBStore
from tests.collect.test_replay import make_dir
from tests.conftest import SHARED_DATA, run_cli
from tests.io500 import write_run
from tests.loopback import TOKEN, free_port, start_server, stop

CASES = Path(__file__).resolve().parents[1] / "cases"
SACCT = CASES / "import" / "sacct" / "habrok"
DARSHAN_LOGS = [
    SHARED_DATA / "darshan-logs" / "apmpi" / "darshan-apmpi-2nodes-64mpi.darshan",
]
ENV = {k: v for k, v in os.environ.items() if not k.startswith("IOLENS_")}


@dataclass
class World:
    served: Path  # owned by the server
    local: Path  # the same data, opened directly
    url: str
    log: Path
    jobs: list[dict[str, object]]


def _copy(src: Path, dst: Path) -> Path:
    shutil.copyfile(src, dst)
    return dst


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory):
    d = tmp_path_factory.mktemp("served-store")
    base = d / "base.duckdb"
    sim = simulate(SimConfig(nodes=64, hours=0.5, seed=5))
    with DuckDBStore(base) as store:
        sim.load(store)
        analyze_jobs(store)
    served, local = _copy(base, d / "served.duckdb"), _copy(base, d / "local.duckdb")
    port = free_port()
    log = d / "serve.log"
    # no background analyses: both copies change only through the commands under test
    proc = start_server(served, port, log, "--analyze-every", "0", "--components-every", "0")
    try:
        jobs = json.loads(cli("jobs", "--json", "--db", str(local)).stdout)
        yield World(served, local, f"http://127.0.0.1:{port}", log, jobs)
    finally:
        stop(proc)


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*args, env=env or ENV)


def both(world: World, *args: str) -> tuple[str, str]:
    remote = cli(*args, "--db", str(world.served))
    direct = cli(*args, "--db", str(world.local))
    assert remote.returncode == 0, remote.stderr
    assert direct.returncode == 0, direct.stderr
    return remote.stdout, direct.stdout


def one_error_line(res: subprocess.CompletedProcess[str], *words: str) -> str:
    assert res.returncode == 2, (res.stdout, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error:"), res.stderr
    for w in words:
        assert w in lines[0], lines[0]
    return lines[0]


# -- serve announces itself ------------------------------------------------------------------
def test_serve_announces_where_it_listens_and_what_it_owns(world: World):
    info = json.loads(discovery.server_file(world.served).read_text())
    assert info["url"] == world.url and info["store"] == str(world.served.resolve())
    token = discovery.token_file(world.served)
    assert stat.S_IMODE(token.stat().st_mode) == 0o600
    said = world.log.read_text()
    assert f"listening on {world.url}, owning {world.served.resolve()}" in said
    assert f"kill {info['pid']}" in said and "Ctrl-C" in said


def test_a_second_serve_of_the_store_is_refused(world: World):
    res = cli("serve", "--db", str(world.served), "--port", str(free_port()))
    one_error_line(res, "already served by iolens serve at " + world.url)


def test_serve_says_when_it_stops_and_withdraws_its_files(tmp_path: Path):
    db = tmp_path / "s.duckdb"
    proc = start_server(db, free_port(), tmp_path / "log")
    assert discovery.server_file(db).exists() and discovery.token_file(db).exists()
    stop(proc)
    assert proc.returncode == 0
    assert f"iolens serve: stopped; {db.resolve()} is free again" in (tmp_path / "log").read_text()
    assert not discovery.server_file(db).exists() and not discovery.token_file(db).exists()
    assert cli("jobs", "--json", "--db", str(db)).stdout.strip() == "[]"  # free again


# -- queries ---------------------------------------------------------------------------------
QUERIES = [
    ("jobs", "--json"),
    ("jobs", "--limit", "12"),
    ("findings", "--json"),
    ("findings",),
    ("load", "--json"),
    ("load",),
    ("series", "--json", "--kind", "ost", "--limit", "200"),
    ("user", "list", "--json"),
]


@pytest.mark.parametrize("args", QUERIES, ids=" ".join)
def test_queries_print_what_they_print_offline(world: World, args: tuple[str, ...]):
    remote, direct = both(world, *args)
    assert remote == direct and remote.strip()


def test_job_commands_print_what_they_print_offline(world: World):
    busiest = max(world.jobs, key=lambda j: (j["write_bytes"] or 0) + (j["read_bytes"] or 0))
    job_id, app = str(busiest["job_id"]), str(busiest["app"])
    for args in (
        ("job", job_id, "--json"),
        ("job", job_id),
        ("interference", job_id, "--json"),
        ("advise", app, "--json"),
        ("compare", str(world.jobs[0]["job_id"]), str(world.jobs[1]["job_id"]), "--json"),
    ):
        remote, direct = both(world, *args)
        assert remote == direct, args
    assert json.loads(remote)["runs"][0]["job_id"] in {j["job_id"] for j in world.jobs}


def test_anomalies_run_the_detectors_on_the_server(world: World):
    remote, direct = both(world, "anomalies", "--json")
    strip = [{k: v for k, v in e.items() if k != "created"} for e in json.loads(remote)["episodes"]]
    want = [{k: v for k, v in e.items() if k != "created"} for e in json.loads(direct)["episodes"]]
    assert strip == want and strip, "the simulation plants faults the detectors find"


def test_alerts_check_reads_its_config_from_the_client(world: World, tmp_path: Path):
    config = tmp_path / "alerts.toml"
    dead = f"http://127.0.0.1:{free_port()}/hook"
    config.write_text(f'[alerts]\nwebhook_url = "{dead}"\nmax_age_hours = 1000000\ntimeout_s = 1\n')
    both(world, "anomalies", "--json")  # the same episodes on both sides first
    remote = cli("alerts", "check", "--config", str(config), "--json", "--db", str(world.served))
    direct = cli("alerts", "check", "--config", str(config), "--json", "--db", str(world.local))
    assert remote.returncode == direct.returncode == 1, remote.stderr  # the webhook is down
    sent, want = json.loads(remote.stdout), json.loads(direct.stdout)
    assert sent["due"] == want["due"] > 0 and sent["failed"] == want["failed"] == sent["due"]
    assert [a["episode"] for a in sent["attempts"]] == [a["episode"] for a in want["attempts"]]


def test_report_file_is_written_where_the_client_asked(world: World, tmp_path: Path):
    job_id = str(world.jobs[0]["job_id"])
    res = cli("report", job_id, "--html", str(tmp_path / "r.html"), "--db", str(world.served))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith(f"wrote {tmp_path / 'r.html'} (")  # the client's path
    page = (tmp_path / "r.html").read_text()
    assert page.lower().startswith("<!doctype html>") and f"job {job_id}" in page


def test_user_mistakes_are_the_same_error_line(world: World):
    remote = one_error_line(cli("job", "424242", "--db", str(world.served)), "job 424242")
    local = one_error_line(cli("job", "424242", "--db", str(world.local)), "job 424242")
    assert remote.replace(str(world.served), "DB") == local.replace(str(world.local), "DB")
    bad = cli("load", "--since", "last week", "--db", str(world.served))
    assert bad.returncode == 2 and "--since" in bad.stderr and not bad.stdout


# -- imports ---------------------------------------------------------------------------------
def _imports(tmp: Path) -> list[tuple[str, ...]]:
    fields = json.loads((SACCT / "options.json").read_text())
    sacct = (
        "import", "sacct", str(SACCT / "sacct.txt"), "--tz", "UTC",
        "--format", ",".join(fields["fields"]), "--delimiter", fields["delimiter"],
    )  # fmt: skip
    runs = tmp / "site" / "results"
    write_run(runs / "2024.05.03-09.00.00")
    write_run(runs / "2024.05.10-09.00.00", {"ior-hard-write": 3.0})
    site = tmp / "site.toml"
    site.write_text(cli("site", "topology", "--sample").stdout)
    out: list[tuple[str, ...]] = [
        sacct,
        ("import", "io500", str(runs)),
        ("import", "lustre", str(make_dir(tmp / "captures")), "--host", "fwd1"),
        ("site", "topology", str(site)),
    ]
    if all(p.exists() for p in DARSHAN_LOGS):
        out.append(("import", "darshan", *map(str, DARSHAN_LOGS)))
    return out


def test_imports_report_and_load_what_offline_imports_do(world: World, tmp_path: Path):
    for args in _imports(tmp_path):
        remote, direct = both(world, *args, "--json")
        timing = ("seconds", "logs_per_s")  # how long it took differs, nothing else
        remote_out = {k: v for k, v in json.loads(remote).items() if k not in timing}
        assert remote_out == {k: v for k, v in json.loads(direct).items() if k not in timing}
    # ... and the data is in the served store: every listing agrees again
    remote, direct = both(world, "jobs", "--json")
    assert remote == direct
    assert len(json.loads(remote)) > len(world.jobs)
    remote, direct = both(world, "expect", "--json")
    assert remote == direct and len(json.loads(remote)["runs"]) == 2
    plot = tmp_path / "box.svg"
    res = cli("expect", "--plot", str(plot), "--db", str(world.served))
    assert res.returncode == 0, res.stderr
    assert plot.read_text().lstrip().startswith(("<?xml", "<svg")) and str(plot) in res.stdout


def test_reanalysis_runs_on_the_server(world: World):
    remote, direct = both(world, "analyze", "--json")
    assert remote == direct
    done = json.loads(remote)
    assert done["jobs"] >= len(world.jobs) and done["findings"] and done["anomalies"] > 0


def test_an_import_streams_progress_from_the_server(world: World, tmp_path: Path):
    captures = make_dir(tmp_path / "captures")
    body = io.BytesIO()
    request = {
        "op": "import lustre",
        "params": {"directory": str(captures), "host": "fwd9", "as_json": True},
        "inputs": {"directory": [str(captures)]},
        "outputs": {},
        "width": 100,
        "color": None,
    }
    forward._pack(body, request, [str(captures)])
    token = discovery.owner_token(world.served)
    res = httpx.post(
        world.url + forward.RUN_PATH,
        content=body.read(),
        headers={"Authorization": f"Bearer {token}"},
        timeout=120,
    )
    assert res.status_code == 200, res.text
    events = [json.loads(line) for line in res.text.splitlines()]
    bars = [e["progress"] for e in events if "progress" in e]
    assert bars[0]["total"] == 3 and bars[0]["completed"] == 0
    assert bars[-1]["completed"] == 3 and bars[-1]["description"] == "importing captures"
    printed = json.loads("".join(e["out"] for e in events if "out" in e))
    assert printed["host"] == "fwd9" and printed["folders"] == 3 and printed["batches"] == 3
    assert events[-1] == {"exit": 0}


# -- who may do what -------------------------------------------------------------------------
def test_users_see_their_own_jobs_and_admin_work_needs_an_admin(world: World):
    made = cli("user", "add", "carol", "--json", "--db", str(world.served))
    assert made.returncode == 0, made.stderr
    carol = {**ENV, "IOLENS_TOKEN": json.loads(made.stdout)["token"]}
    theirs = json.loads(cli("jobs", "--json", "--db", str(world.served), env=carol).stdout)
    asked = json.loads(
        cli("jobs", "--json", "--user", "bob", "--db", str(world.served), env=carol).stdout
    )
    mine = [j for j in world.jobs if j["user"] == "carol"]
    assert [j["job_id"] for j in theirs] == [j["job_id"] for j in mine] != []
    assert asked == []  # another user's jobs: none to see
    other = next(j["job_id"] for j in world.jobs if j["user"] != "carol")
    one_error_line(
        cli("job", str(other), "--db", str(world.served), env=carol), f"job {other} is not in"
    )
    one_error_line(
        cli("reason", str(other), "--db", str(world.served), env=carol), f"job {other} is not in"
    )
    reasoned = cli("reason", str(mine[0]["job_id"]), "--json", "--db", str(world.served), env=carol)
    assert reasoned.returncode == 0, reasoned.stderr
    assert json.loads(reasoned.stdout)["job_id"] == str(mine[0]["job_id"])
    own = cli("job", str(mine[0]["job_id"]), "--json", "--db", str(world.served), env=carol)
    assert json.loads(own.stdout)["user"] == "carol"
    one_error_line(
        cli("anomalies", "--db", str(world.served), env=carol), "anomalies: administrators only"
    )
    one_error_line(
        cli("user", "add", "mallory", "--admin", "--db", str(world.served), env=carol),
        "administrators only",
    )
    agent = {**ENV, "IOLENS_TOKEN": TOKEN}
    one_error_line(
        cli("user", "add", "mallory", "--db", str(world.served), env=agent),
        "agent tokens cannot run this",
    )
    gone = cli("user", "remove", "carol", "--db", str(world.served))
    assert gone.returncode == 0 and "removed user carol" in gone.stdout
    one_error_line(cli("jobs", "--db", str(world.served), env=carol), "refused the token")
    wrong = {**ENV, "IOLENS_TOKEN": "iol_00000000_nopenopenopenopenopenope"}
    for command in ("jobs", "anomalies"):  # the query API and the command runner alike
        one_error_line(
            cli(command, "--db", str(world.served), env=wrong), "refused the token", "IOLENS_TOKEN"
        )


def test_server_from_the_environment_without_db(world: World):
    env = {**ENV, "IOLENS_SERVER": world.url, "IOLENS_DB": str(world.served)}
    res = cli("findings", "--json", env=env)
    assert res.returncode == 0, res.stderr
    assert res.stdout == cli("findings", "--json", "--db", str(world.local)).stdout


# -- no server -------------------------------------------------------------------------------
def _hold(db: Path) -> subprocess.Popen[bytes]:
    """Another process holding the store, as a stuck job or an old server would."""
    code = (
        "import duckdb, sys, time; c = duckdb.connect(sys.argv[1]); "
        "print('held', flush=True); time.sleep(600)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"held\n"
    return proc


def test_a_locked_store_without_a_server_is_one_line_naming_both_ways_out(tmp_path: Path):
    db = tmp_path / "s.duckdb"
    DuckDBStore(db).close()
    holder = _hold(db)
    try:
        for args in (
            ("jobs",),
            ("analyze",),
            ("user", "add", "x"),
        ):
            line = one_error_line(cli(*args, "--db", str(db)))
            assert f"{db} is locked by another process (PID {holder.pid}" in line
            assert "IOLENS_SERVER" in line and f"stop PID {holder.pid}" in line
            assert "Traceback" not in line
        # a stale announcement (a server that crashed) is named, and not used
        discovery.server_file(db).write_text(
            json.dumps({"url": f"http://127.0.0.1:{free_port()}", "pid": 999999, "host": "x"})
        )
        line = one_error_line(cli("jobs", "--db", str(db)))
        assert "the server it announced (http://127.0.0.1:" in line and "does not answer" in line
    finally:
        holder.send_signal(signal.SIGTERM)
        holder.wait()
    assert cli("jobs", "--json", "--db", str(db)).stdout.strip() == "[]"  # stale file ignored


def test_discovery_ignores_a_dead_servers_file(tmp_path: Path):
    db = tmp_path / "s.duckdb"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    discovery.announce(db, "http://127.0.0.1:9", "tok")
    info = json.loads(discovery.server_file(db).read_text())
    info["pid"] = dead.pid
    discovery.server_file(db).write_text(json.dumps(info))
    t0 = time.monotonic()
    assert discovery.find(db) is None
    assert time.monotonic() - t0 < 1.0  # no network wait for a dead pid on this host


def test_event_progress_throttles_but_always_sends_the_end():
    from iolens.present.cli.progress_events import EventProgress

    sent: list[dict[str, object]] = []
    bar = EventProgress(sent.append)
    task = bar.add_task("importing", total=1000)
    for _ in range(1000):
        bar.advance(task)
    assert sent[0]["progress"] == {
        "task": 0, "description": "importing", "total": 1000, "completed": 0,
    }  # fmt: skip
    assert sent[-1]["progress"]["completed"] == 1000
    assert len(sent) < 50


def test_pack_keeps_absolute_paths_for_the_server(tmp_path: Path):
    (tmp_path / "logs").mkdir()
    (tmp_path / "logs" / "a.darshan").write_bytes(b"x")
    body = io.BytesIO()
    forward._pack(body, {"op": "x"}, [str(tmp_path / "logs")])
    with tarfile.open(fileobj=body) as tar:
        names = tar.getnames()
    assert f"in{tmp_path}/logs/a.darshan" in names and forward.REQUEST_MEMBER in names


def test_the_client_draws_the_servers_progress_on_its_terminal(world: World, tmp_path: Path):
    captures = make_dir(tmp_path / "captures")
    args = ["import", "lustre", str(captures), "--host", "fwd7"]
    main, terminal = os.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "iolens", *args, "--db", str(world.served)],
        stdout=subprocess.PIPE,
        stderr=terminal,
        env={**ENV, "COLUMNS": "100"},
    )
    os.close(terminal)
    drawn = b""
    while True:
        try:
            chunk = os.read(main, 4096)
        except OSError:  # the terminal closed
            break
        if not chunk:
            break
        drawn += chunk
    stdout, _ = proc.communicate(timeout=120)
    os.close(main)
    assert proc.returncode == 0
    assert b"importing captures" in drawn and b"3/3" in drawn
    assert b"Imported 3 of 3 sample folder(s) as host fwd7" in stdout
    assert cli(*args, "--db", str(world.local)).returncode == 0  # keep both copies alike


def test_a_command_waits_its_turn_on_the_server_and_says_so(tmp_path: Path):
    import iolens.present.cli.main  # noqa: F401 - registers the commands, as `serve` has
    from iolens.present.cli import hosted

    store = DuckDBStore(tmp_path / "s.duckdb")
    events: list[object] = []

    def jobs() -> None:
        events.append(hosted.run_command("jobs", {"as_json": True}, store, Lock(), events.append))

    hosted._ONE_AT_A_TIME.acquire()
    hosted._running = "import darshan"
    worker = Thread(target=jobs)
    try:
        worker.start()
        time.sleep(0.5)
        assert events == [
            {"err": "iolens: waiting for `iolens import darshan` to finish on the server\n"}
        ]
    finally:
        hosted._ONE_AT_A_TIME.release()
    worker.join(60)
    assert events[-1] == 0
    assert json.loads("".join(e["out"] for e in events if isinstance(e, dict) and "out" in e)) == []
    store.close()
