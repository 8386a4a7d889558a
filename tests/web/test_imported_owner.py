"""Imported Darshan logs over real HTTP (issue 21): a local account whose uid number is the
log's does not see the job; the account the site's uid map names does.

A real `iolens serve` on loopback, asked with httpx. mpi-io-test-x86_64-3.4.0 ran as uid
1000 elsewhere; today's code named its job after this machine's uid 1000 (or "1000" when
it has none), and that account then listed and read it. The map is applied by importing
again through the running server (the CLI forwards to it, uploading the map).
"""

from __future__ import annotations

import os
import pwd
from pathlib import Path

import httpx
import pytest

from iolens.present.web.accounts import add_user
from iolens.store import DuckDBStore
from tests.conftest import SHARED_DATA, run_cli
from tests.loopback import TOKEN, free_port, start_server, stop

LOG = SHARED_DATA / "darshan-logs" / "release_logs" / "mpi-io-test-x86_64-3.4.0.darshan"
ENV = {k: v for k, v in os.environ.items() if not k.startswith("IOLENS_")}


def _local_name(uid: int) -> str:
    """The account uid `uid` has on this machine: what today's import named the job."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


@pytest.mark.skipif(not LOG.exists(), reason="../shared/data not available")
def test_an_imported_job_is_seen_only_by_the_account_the_site_maps(tmp_path: Path):
    db = tmp_path / "s.duckdb"
    res = run_cli("import", "darshan", str(LOG), "--db", str(db), env=ENV)
    assert res.returncode == 0, res.stderr
    local = _local_name(1000)
    with DuckDBStore(db) as store:
        (row,) = store.query('SELECT job_id, "user" FROM jobs').to_pylist()
        tokens = {name: add_user(store, name) for name in (local, "alice")}
    job_id = row["job_id"]
    assert row["user"] == "uid:1000"

    port = free_port()
    proc = start_server(
        db, port, tmp_path / "serve.log", "--analyze-every", "0", "--components-every", "0"
    )
    base = f"http://127.0.0.1:{port}"

    def sees(token: str, web: bool = True) -> bool:
        """Does the caller list the job and read its report (query API and, for a user,
        the web's REST API), consistently?"""
        with httpx.Client(
            base_url=base, timeout=120, headers={"Authorization": f"Bearer {token}"}
        ) as c:
            listed = job_id in {r["job_id"] for r in c.get("/api/v1/jobs").json()}
            got = {c.get(f"/api/v1/jobs/{job_id}").status_code}
            if web:  # agent tokens serve the CLI only
                got.add(c.get(f"/api/jobs/{job_id}").status_code)
        assert got == ({200} if listed else {404}), got
        return listed

    try:
        assert sees(TOKEN, web=False)  # the agent token reads everything, as an admin
        assert not sees(tokens[local]), f"{local} has uid 1000 here, not at the log's site"
        assert not sees(tokens["alice"])
        uids = tmp_path / "uids.toml"
        uids.write_text('# uid in the logs = account here\n[uids]\n1000 = "alice"\n')
        res = run_cli(
            "import", "darshan", str(LOG), "--uid-map", str(uids), "--db", str(db), env=ENV
        )
        assert res.returncode == 0, res.stderr
        assert sees(tokens["alice"])
        assert not sees(tokens[local])
    finally:
        stop(proc)
