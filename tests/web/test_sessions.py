"""Sessions and tokens (issue 19): the cookie-signing secret lives outside the store, tokens
and sessions expire and can be revoked, and `?token=` links leave the address bar."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import shutil
import stat
import time
from datetime import timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from iolens.errors import InputError
from iolens.present.web.accounts import Accounts, add_user, list_users, utcnow
from iolens.present.web.app import create_app
from iolens.present.web.auth import COOKIE, WebConfig
from iolens.present.web.session_secret import ENV, LEGACY_KEY, secret_file
from iolens.store import DuckDBStore
from tests.conftest import run_cli
from tests.loopback import free_port


@pytest.fixture(autouse=True)
def _no_env_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    path = tmp_path / "s.duckdb"
    with DuckDBStore(path) as store:
        tokens = {"alice": add_user(store, "alice"), "root": add_user(store, "root", True)}
    return path, tokens


def _forge(secret: bytes, name: str, kid: str, exp: int, gen: int | None) -> str:
    """A session cookie signed with `secret`: the old (v1) format, or v2 with a generation."""
    name64 = base64.urlsafe_b64encode(name.encode()).decode().rstrip("=")
    body = f"v1.{name64}.{kid}.{exp}" if gen is None else f"v2.{name64}.{kid}.{gen}.{exp}"
    return f"{body}.{hmac.new(secret, body.encode(), hashlib.sha256).hexdigest()}"


def _forgeries(secret: bytes, kid: str) -> list[str]:
    exp = int(time.time()) + 3600
    return [_forge(secret, "root", kid, exp, gen) for gen in (None, 0, 1)]


def _root_kid(path: Path) -> str:
    with DuckDBStore(path, read_only=True) as store:
        return next(u.key_id for u in list_users(store) if u.name == "root")


# -- the secret -----------------------------------------------------------------------------
def test_a_copy_of_the_store_forges_no_admin_session(db, tmp_path):
    """Issue 19: the secret was in `meta`; a 0644 copy of the store forged `admin: true`."""
    path, tokens = db
    legacy = os.urandom(32)
    with DuckDBStore(path) as store:  # a store an older iolens served: its secret in meta
        store.execute("INSERT INTO meta VALUES (?, ?)", [LEGACY_KEY, legacy.hex()])
    kid = _root_kid(path)
    store = DuckDBStore(path)
    try:
        with TestClient(create_app(store, [])) as c:
            # the old secret (what any old copy of the file holds) signs nothing any more
            for cookie in _forgeries(legacy, kid):
                c.cookies.set(COOKIE, cookie)
                assert c.get("/api/me").status_code == 401, cookie
            c.cookies.clear()
            rows = store.query("SELECT key FROM meta WHERE key = ?", [LEGACY_KEY]).to_pylist()
            assert rows == []  # deleted on the first start
            # a copy taken now: nothing in it signs a session either
            copy = shutil.copyfile(path, tmp_path / "copy.duckdb")
            with DuckDBStore(copy, read_only=True) as stolen:
                values = [r["value"] for r in stolen.query("SELECT value FROM meta").to_pylist()]
            secret = secret_file(str(path)).read_text().strip()
            assert secret.encode() not in Path(copy).read_bytes()
            for value in values:
                for key in (value.encode(), bytes.fromhex(value) if len(value) == 64 else b""):
                    for cookie in _forgeries(key, kid):
                        c.cookies.set(COOKIE, cookie)
                        assert c.get("/api/me").status_code == 401
            # while a real login works and says admin
            c.cookies.clear()
            c.get(f"/jobs?token={tokens['root']}")
            assert c.get("/api/me").json()["admin"] is True
    finally:
        store.close()


def test_the_secret_file_is_0600_made_once_and_kept(db):
    path, tokens = db
    with DuckDBStore(path) as store, TestClient(create_app(store, [])) as c:
        c.get(f"/jobs?token={tokens['alice']}")
        cookie = c.cookies[COOKIE]
    made = secret_file(str(path))
    assert stat.S_IMODE(made.stat().st_mode) == 0o600
    first = made.read_text()
    with DuckDBStore(path) as store, TestClient(create_app(store, [])) as c:  # a restart
        assert made.read_text() == first
        c.cookies.set(COOKIE, cookie)
        assert c.get("/api/me").json()["name"] == "alice"  # sessions survive it


def test_a_secret_file_others_can_read_is_refused(db):
    path, _ = db
    with DuckDBStore(path) as store:
        create_app(store, [])
    made = secret_file(str(path))
    made.chmod(0o644)
    with DuckDBStore(path) as store, pytest.raises(InputError, match=r"chmod 600") as exc:
        create_app(store, [])
    assert str(made) in str(exc.value)
    port = str(free_port())  # free: the secret, not the address, is what stops it
    res = run_cli("serve", "--db", str(path), "--port", port, "--analyze-every", "0")
    assert res.returncode == 2, res.stderr
    assert "error:" in res.stderr and str(made) in res.stderr and "Traceback" not in res.stderr


def test_a_symlinked_secret_file_is_refused(db, tmp_path):
    path, _ = db
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("a" * 64)
    elsewhere.chmod(0o600)
    secret_file(str(path)).symlink_to(elsewhere)
    with DuckDBStore(path) as store, pytest.raises(InputError, match="session secret"):
        create_app(store, [])


def test_the_secret_from_the_environment(db, monkeypatch):
    path, tokens = db
    monkeypatch.setenv(ENV, "short")
    with DuckDBStore(path) as store, pytest.raises(InputError, match=ENV):
        create_app(store, [])
    monkeypatch.setenv(ENV, "x" * 40)
    with DuckDBStore(path) as store, TestClient(create_app(store, [])) as c:
        c.get(f"/jobs?token={tokens['alice']}")
        assert c.get("/api/me").status_code == 200
    assert not secret_file(str(path)).exists()
    kid = next(u.key_id for u in list_users(DuckDBStore(path, read_only=True)) if u.name == "root")
    assert _forge(b"x" * 40, "root", kid, 2**31, 0)  # the env secret is what signs
    with DuckDBStore(path) as store, TestClient(create_app(store, [])) as c:
        c.cookies.set(COOKIE, _forge(b"x" * 40, "root", kid, int(time.time()) + 60, 0))
        assert c.get("/api/me").json()["name"] == "root"


# -- expiry and revocation ------------------------------------------------------------------
def _expire(path: Path, name: str) -> None:
    with DuckDBStore(path) as store:
        store.execute(
            "UPDATE users SET expires = ? WHERE name = ?", [utcnow() - timedelta(seconds=1), name]
        )


def test_an_expired_token_is_401_everywhere(db):
    path, tokens = db
    _expire(path, "alice")
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    with DuckDBStore(path) as store, TestClient(create_app(store, [])) as c:
        assert c.get("/api/jobs", headers=alice).status_code == 401
        assert c.get("/api/v1/jobs", headers=alice).status_code == 401
        assert c.get(f"/jobs?token={tokens['alice']}", follow_redirects=False).status_code == 401
        own = {"Origin": "http://testserver"}
        res = c.post("/login", data={"token": tokens["alice"]}, headers=own)
        assert res.status_code == 401 and COOKIE not in c.cookies
        assert c.get("/api/jobs", headers={"Authorization": f"Bearer {tokens['root']}"}).is_success


def test_a_token_from_before_expiry_existed_ends_90_days_after_its_creation(db):
    path, tokens = db
    with DuckDBStore(path) as store:
        store.execute("UPDATE users SET expires = NULL, generation = NULL")
        store.execute(
            "UPDATE users SET created = ? WHERE name = 'alice'", [utcnow() - timedelta(days=91)]
        )
        accounts = Accounts(store)
        assert accounts.verify(tokens["alice"]) is None
        assert accounts.verify(tokens["root"]).name == "root"


def test_a_session_ends_when_it_expires_and_never_outlives_its_token(db):
    path, tokens = db
    with DuckDBStore(path) as store:
        store.execute(
            "UPDATE users SET expires = ? WHERE name = 'alice'", [utcnow() + timedelta(hours=1)]
        )
    with DuckDBStore(path) as store, TestClient(create_app(store, [])) as c:
        c.get(f"/jobs?token={tokens['alice']}")
        value = c.cookies[COOKIE]
        exp = int(value.split(".")[4])
        assert exp <= time.time() + 3600 + 5  # the token's hour, not the session's 12
        auth = c.app.state.auth  # type: ignore[attr-defined]
        kid = value.split(".")[2]
        stale = _forge(auth.secret, "alice", kid, int(time.time()) - 1, 0)
        c.cookies.set(COOKIE, stale)
        assert c.get("/jobs").status_code == 401
        c.cookies.set(COOKIE, value)
        assert c.get("/jobs").status_code == 200
    cfg = WebConfig(session_hours=2)
    with DuckDBStore(path) as store, TestClient(create_app(store, [], cfg)) as c:
        c.get(f"/jobs?token={tokens['root']}")
        exp = int(c.cookies[COOKIE].split(".")[4])
        assert abs(exp - (time.time() + 7200)) < 60  # configurable: `session_hours`


def test_revoke_ends_the_token_and_every_session_at_once(db):
    path, tokens = db
    root = {"Authorization": f"Bearer {tokens['root']}"}
    alice = {"Authorization": f"Bearer {tokens['alice']}"}
    with DuckDBStore(path) as store, TestClient(create_app(store, [])) as c:
        c.get(f"/jobs?token={tokens['alice']}")
        assert c.get("/jobs").status_code == 200
        session = c.cookies[COOKIE]
        assert c.get("/api/jobs", headers=alice).status_code == 200
        res = c.post("/api/admin/users/alice/revoke", headers=root)
        assert res.status_code == 200 and res.json()["revoked"] and not res.json()["active"]
        assert c.get("/jobs").status_code == 401  # the session issued before
        assert c.get("/api/jobs", headers=alice).status_code == 401
        assert c.get(f"/jobs?token={tokens['alice']}", follow_redirects=False).status_code == 401
        assert c.post("/api/admin/users/nobody/revoke", headers=root).status_code == 404
        # a new token works; the old one and the old session stay dead
        new = c.app.state.auth.accounts.issue("alice", days=3)  # type: ignore[attr-defined]
        c.cookies.clear()
        assert c.get("/api/jobs", headers={"Authorization": f"Bearer {new}"}).status_code == 200
        assert c.get("/api/jobs", headers=alice).status_code == 401
        c.cookies.set(COOKIE, session)
        assert c.get("/jobs").status_code == 401


def test_user_cli_token_days_and_revoke(tmp_path):
    db = str(tmp_path / "u.duckdb")
    made = json.loads(run_cli("user", "add", "bob", "--days", "7", "--db", db, "--json").stdout)
    with DuckDBStore(db) as store:
        bob = Accounts(store).verify(made["token"])
    assert bob is not None and made["days"] == 7
    assert abs(bob.expires - (utcnow() + timedelta(days=7))) < timedelta(minutes=5)
    res = run_cli("user", "revoke", "bob", "--db", db, "--json")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["revoked"] and not json.loads(res.stdout)["active"]
    with DuckDBStore(db) as store:
        assert Accounts(store).verify(made["token"]) is None
    listed = json.loads(run_cli("user", "list", "--db", db, "--json").stdout)
    assert listed[0]["name"] == "bob" and listed[0]["revoked"] and listed[0]["expires"]
    res = run_cli("user", "token", "bob", "--days", "30", "--db", db, "--json")
    assert res.returncode == 0, res.stderr
    again = json.loads(res.stdout)
    with DuckDBStore(db) as store:
        accounts = Accounts(store)
        assert accounts.verify(again["token"]).name == "bob"
        assert accounts.verify(made["token"]) is None
    # user mistakes: one error line, exit 2
    for args in (
        ("user", "revoke", "nobody"),
        ("user", "token", "nobody"),
        ("user", "token", "bob", "--days", "0"),
        ("user", "add", "carol", "--days", "99999"),
    ):
        res = run_cli(*args, "--db", db)
        assert res.returncode == 2, (args, res.stderr)
        assert "Traceback" not in res.stderr and res.stderr.strip(), args
    assert "no user nobody" in run_cli("user", "revoke", "nobody", "--db", db).stderr


def test_revoke_through_the_server_ends_sessions_at_once(db):
    """`iolens user revoke` while `iolens serve` holds the store runs through it (`/api/v1/run`)
    and the server's accounts see it at once."""
    import iolens.present.cli.main  # noqa: F401 - registers the commands, as `iolens serve` has
    from tests.web.test_run_endpoint import body, events, run

    path, tokens = db
    owner = "iolsrv_owner"
    with DuckDBStore(path) as store, TestClient(create_app(store, [], owner_token=owner)) as c:
        c.get(f"/jobs?token={tokens['alice']}")
        assert c.get("/jobs").status_code == 200
        got = events(run(c, owner, body("user revoke", {"name": "alice", "as_json": True})))
        assert got[-1] == {"exit": 0}, got
        assert c.get("/jobs").status_code == 401
        got = events(
            run(c, owner, body("user token", {"name": "alice", "days": 5, "as_json": True}))
        )
        new = json.loads("".join(e["out"] for e in got if "out" in e))["token"]
        assert c.get("/api/jobs", headers={"Authorization": f"Bearer {new}"}).status_code == 200
        refused = run(c, new, body("user revoke", {"name": "root"}))
        assert refused.json() == {"detail": "iolens user revoke: administrators only"}
