"""`iolens watch` and `iolens alerts subscribe` from the command line: on a store, and
against a real server on loopback (a user sees only their own job)."""

from __future__ import annotations

import json
import threading

from iolens.ingest.load import load
from iolens.present.scheduling import AnalysisScheduler
from iolens.store import DuckDBStore
from tests.conftest import run_cli
from tests.loopback import free_port, start_server, stop
from tests.present.test_live import history_store, slice_batch


def running_store(db) -> dict[str, str]:
    """History, then 6.5 min of a running job whose last 1.5 min ran 10x slower, analysed
    live as the server would."""
    tokens = history_store(db)
    with DuckDBStore(db) as store:
        for k in range(13):
            load(store, slice_batch("run1", k, k == 0))
        AnalysisScheduler(
            store, threading.Lock(), analyze_every=0, components_every=0, owner_alerts=False
        ).tick(0.0)
    return tokens


def test_watch_once_on_a_store(tmp_path):
    db = tmp_path / "s.duckdb"
    running_store(db)
    res = run_cli("watch", "run1", "--db", str(db), "--once", "--json")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.strip().splitlines()
    assert len(lines) == 1
    snap = json.loads(lines[0])
    assert snap["running"] and snap["provisional"] and snap["slower"]
    assert snap["write_bytes"] == (10 * 100 + 3 * 10) * 30 * (1 << 20)
    assert [f["code"] for f in snap["findings"]] == ["IOL006"] and snap["findings"][0]["live"]
    human = run_cli("watch", "run1", "--db", str(db), "--once")
    assert human.returncode == 0, human.stderr
    assert "slower than earlier runs" in human.stdout and "IOL006" in human.stdout
    gone = run_cli("watch", "nope", "--db", str(db), "--once")
    assert gone.returncode == 2 and "job nope" in gone.stderr
    assert "Traceback" not in gone.stderr


def test_subscriptions_on_a_store(tmp_path):
    db = tmp_path / "s.duckdb"
    DuckDBStore(db).close()
    url = "http://127.0.0.1:9/hook"
    sub = ("alerts", "subscribe", "--db", str(db), "--user", "alice")
    assert run_cli(*sub, "--webhook", url).returncode == 0
    assert run_cli(*sub, "--email", "alice@example.org").returncode == 0
    bad = run_cli(*sub, "--webhook", "ftp://x")
    assert bad.returncode == 2 and "http" in bad.stderr and "Traceback" not in bad.stderr
    rows = json.loads(run_cli("alerts", "subscriptions", "--db", str(db), "--json").stdout)
    assert [(r["channel"], r["target"]) for r in rows] == [
        ("email", "alice@example.org"),
        ("webhook", url),
    ]
    rm = ("alerts", "unsubscribe", "--db", str(db), "--user", "alice", "--channel", "email")
    assert "1 subscription removed" in run_cli(*rm).stdout
    rows = json.loads(run_cli("alerts", "subscriptions", "--db", str(db), "--json").stdout)
    assert [r["channel"] for r in rows] == ["webhook"]


def test_watch_and_subscribe_against_a_server(tmp_path):
    db, port, log = tmp_path / "s.duckdb", free_port(), tmp_path / "serve.log"
    tokens = running_store(db)
    server = start_server(db, port, log, "--analyze-every", "0", "--components-every", "0")
    url = f"http://127.0.0.1:{port}"
    try:
        mine = run_cli("watch", "run1", "--server", url, "--token", tokens["alice"], "--once",
                       "--json")  # fmt: skip
        assert mine.returncode == 0, mine.stderr
        assert json.loads(mine.stdout)["slower"] is True
        theirs = run_cli("watch", "run1", "--server", url, "--token", tokens["bob"], "--once")
        assert theirs.returncode == 2 and "run1" in theirs.stderr
        assert "Traceback" not in theirs.stderr
        sub = ("alerts", "subscribe", "--server", url, "--webhook", "http://127.0.0.1:9/h")
        assert run_cli(*sub, "--token", tokens["bob"]).returncode == 0
        other = run_cli(*sub, "--token", tokens["bob"], "--user", "alice")
        assert other.returncode == 2 and "403" in other.stderr
        listed = run_cli("alerts", "subscriptions", "--server", url, "--token", tokens["bob"],
                         "--json")  # fmt: skip
        assert [r["user"] for r in json.loads(listed.stdout)] == ["bob"]
    finally:
        stop(server)
