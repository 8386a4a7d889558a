"""`POST /api/v1/run` in-process: who may run what, and what a hostile body cannot do."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

import iolens.present.cli.main  # noqa: F401 - registers the commands, as `iolens serve` has
from iolens.present.cli import forward
from iolens.present.web.accounts import add_user
from iolens.present.web.app import create_app
from iolens.store import DuckDBStore

OWNER = "iolsrv_owner-token-for-tests"
AGENT = "agent-token"


@pytest.fixture
def client(tmp_path: Path):
    store = DuckDBStore(tmp_path / "s.duckdb")
    users = {"carol": add_user(store, "carol"), "root": add_user(store, "root", admin=True)}
    with TestClient(create_app(store, [AGENT], owner_token=OWNER)) as c:
        c.users = users  # type: ignore[attr-defined]
        yield c
    store.close()


def body(op: str, params: dict[str, object], extra: list[tuple[str, bytes]] = ()) -> bytes:
    buf = io.BytesIO()
    forward._pack(buf, {"op": op, "params": params, "inputs": {}, "outputs": {}}, [])
    if not extra:
        return buf.getvalue()
    out = io.BytesIO()  # the same request with members a hostile client added
    with (
        tarfile.open(fileobj=io.BytesIO(buf.getvalue())) as src,
        tarfile.open(fileobj=out, mode="w") as dst,
    ):
        for m in src.getmembers():
            dst.addfile(m, src.extractfile(m))
        for name, data in extra:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            dst.addfile(info, io.BytesIO(data))
    return out.getvalue()


def run(client: TestClient, token: str | None, data: bytes):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return client.post(forward.RUN_PATH, content=data, headers=headers)


def events(res) -> list[dict[str, object]]:
    assert res.status_code == 200, res.text
    return [json.loads(line) for line in res.text.splitlines()]


def test_who_may_run_what(client):
    carol, admin = client.users["carol"], client.users["root"]
    add = body("user add", {"name": "dave", "as_json": True})
    assert run(client, None, add).status_code == 401
    assert run(client, carol, add).json() == {"detail": "iolens user add: administrators only"}
    assert "agent tokens cannot" in run(client, AGENT, add).json()["detail"]
    assert run(client, carol, body("anomalies", {})).status_code == 403
    made = events(run(client, admin, add))
    assert made[-1] == {"exit": 0}
    assert json.loads("".join(e["out"] for e in made if "out" in e))["name"] == "dave"
    listed = events(run(client, OWNER, body("user list", {"as_json": True})))
    names = [u["name"] for u in json.loads("".join(e["out"] for e in listed if "out" in e))]
    assert names == ["carol", "dave", "root"]


def test_a_users_call_is_narrowed_to_their_jobs(client):
    carol = client.users["carol"]
    got = events(run(client, carol, body("job", {"job_id": "42", "as_json": True})))
    assert got[0]["error"].startswith("job 42 is not in") and got[-1] == {"exit": 2}
    got = events(run(client, carol, body("findings", {"as_json": True})))
    assert "give --job" in got[0]["error"]


def test_bad_requests_are_400_and_nothing_escapes_the_upload(client, tmp_path):
    admin = client.users["root"]
    assert run(client, admin, b"not a tar").status_code == 400
    res = run(client, admin, body("simulate", {}))
    assert res.status_code == 400 and "no command `iolens simulate`" in res.json()["detail"]
    escape = tmp_path / "escaped.txt"
    hostile = body("import sacct", {"file": "x"}, [(f"in/../../../../..{escape}", b"x")])
    res = run(client, admin, hostile)
    assert res.status_code == 400 and not escape.exists()


def test_a_users_upload_is_bounded(client, monkeypatch):
    from iolens.present.web import run as run_module

    monkeypatch.setattr(run_module, "MAX_USER_UPLOAD_BYTES", 1000)
    big = body("import trace", {"paths": ["x"]}, [("in/x/a.iolens", b"x" * 5000)])
    res = run(client, client.users["carol"], big)
    assert res.status_code == 413 and "stop at 1000 bytes" in res.json()["detail"]
    assert run(client, client.users["root"], big).status_code == 200  # admins: no bound
