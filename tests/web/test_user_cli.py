"""`iolens user add|list|remove`: accounts from the command line."""

from __future__ import annotations

import json

from iolens.present.web.accounts import Accounts
from iolens.store import DuckDBStore
from tests.conftest import run_cli


def test_user_add_list_remove(tmp_path):
    db = str(tmp_path / "u.duckdb")
    res = run_cli("user", "add", "alice", "--db", db, "--json")
    assert res.returncode == 0, res.stderr
    alice = json.loads(res.stdout)
    assert alice["name"] == "alice" and not alice["admin"] and alice["token"].startswith("iol_")
    res = run_cli("user", "add", "root", "--admin", "--db", db)
    assert res.returncode == 0 and res.stdout.strip().splitlines()[-1].startswith("iol_")
    again = run_cli("user", "add", "alice", "--db", db)
    assert again.returncode == 2 and "exists" in again.stderr
    listed = json.loads(run_cli("user", "list", "--db", db, "--json").stdout)
    assert [(u["name"], u["admin"]) for u in listed] == [("alice", False), ("root", True)]
    assert alice["token"] not in run_cli("user", "list", "--db", db).stdout
    with DuckDBStore(db) as store:
        accounts = Accounts(store)
        assert accounts.verify(alice["token"]).name == "alice"
        assert accounts.verify(alice["token"][:-1] + "x") is None
    replaced = json.loads(run_cli("user", "add", "alice", "--replace", "--db", db, "--json").stdout)
    with DuckDBStore(db) as store:
        accounts = Accounts(store)
        assert accounts.verify(alice["token"]) is None  # the old token is dead
        assert accounts.verify(replaced["token"]).name == "alice"
    assert run_cli("user", "remove", "alice", "--db", db).returncode == 0
    gone = run_cli("user", "remove", "alice", "--db", db)
    assert gone.returncode == 2 and "no user alice" in gone.stderr
    assert run_cli("user", "add", "bad name", "--db", db).returncode == 2
