"""`GET /api/jobs/{id}/reason` and the job page's reasoner section, on a real `iolens serve`
over the traced job of `conftest.py` (one process of six slowed): the API answers exactly
what `iolens reason ID --json` prints, to the job's owner and admins only, and the page
shows each anomaly with the activities forwarded before it."""

from __future__ import annotations

import html
import json
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from iolens.present.cli.render import to_json
from iolens.present.web.accounts import add_user
from iolens.store import DuckDBStore
from tests.conftest import run_cli
from tests.loopback import free_port, start_server, stop
from tests.reasoner.jobrun import SLOW_N, needs_nodes
from tests.reasoner.test_reasoner_traced import activities
from tests.tracer.conftest import needs_cc
from tests.web.chromium import CHROMIUM, launch

pytestmark = [needs_cc, needs_nodes]
JOB, CALM = "reason-job", "calm-job"
#: calls a process makes before the detectors have a baseline (`Latency.min_samples`)
WARM_UP = 16


@dataclass
class Served:
    url: str
    owner: str
    tokens: dict[str, str]  # owner, "stranger" (another user), "admin"

    def get(self, path: str, who: str | None) -> httpx.Response:
        auth = {"Authorization": f"Bearer {self.tokens[who]}"} if who else {}
        return httpx.get(self.url + path, headers=auth, timeout=60)


@pytest.fixture(scope="module")
def served(stored: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """The traced store with accounts, and CALM: the owner's job holding the first calls
    of one process, too few for any detector to have a baseline (so no anomaly)."""
    d = tmp_path_factory.mktemp("served-reason")
    db = d / "served.duckdb"
    shutil.copyfile(stored, db)
    with DuckDBStore(db) as store:
        owner = store.query('SELECT "user" FROM jobs WHERE job_id = ?', [JOB]).to_pylist()[0]
        owner = owner["user"]
        store.execute(
            f"INSERT INTO jobs SELECT * REPLACE ('{CALM}' AS job_id) FROM jobs "
            f"WHERE job_id = '{JOB}'"
        )
        store.execute(
            f"INSERT INTO client_io SELECT * REPLACE ('{CALM}' AS job_id) FROM client_io "
            f"WHERE job_id = '{JOB}' AND pid = (SELECT min(pid) FROM client_io) "
            f"ORDER BY t_start LIMIT {WARM_UP - 1}"
        )
        tokens = {
            owner: add_user(store, owner),
            "stranger": add_user(store, "stranger"),
            "admin": add_user(store, "siteadmin", True),
        }
    port = free_port()
    proc = start_server(
        db, port, d / "server.log", "--analyze-every", "0", "--components-every", "0"
    )
    try:
        yield Served(f"http://127.0.0.1:{port}", owner, tokens)
    finally:
        stop(proc)


def test_api_is_the_cli_json(served: Served, stored: Path, one_slow) -> None:
    cli = run_cli("reason", JOB, "--json", "--db", str(stored))
    assert cli.returncode == 0, cli.stderr
    for who in (served.owner, "admin"):
        res = served.get(f"/api/jobs/{JOB}/reason", who)
        assert res.status_code == 200 and res.headers["content-type"] == "application/json"
        assert res.json() == json.loads(cli.stdout)
    # and it holds the planted anomaly: the slowed process, judged process-local
    i = planted(res.json(), one_slow)
    assert res.json()["anomalies"][i]["verdict"] == "process-local"


def planted(api: dict, one_slow) -> int:
    """The index of the anomaly of the slowed process's slow phase (its log: SLOW_N slow
    calls on n2): that process's with the most calls. A loaded machine may add a stray
    one (a slow start-up read) or split the phase, so most of it is enough here;
    `test_reason_cli` holds the exact call count."""
    spool, procs = one_slow
    pid = activities(spool)[1][str(next(p for p in procs if p.slowed).data)]
    mine = [i for i, a in enumerate(api["anomalies"]) if a["where"].startswith(f"n2 pid {pid}")]
    assert mine, api["anomalies"]
    i = max(mine, key=lambda i: api["anomalies"][i]["calls"])
    assert api["anomalies"][i]["calls"] >= SLOW_N // 2, api["anomalies"]
    return i


def test_another_users_job_is_not_found(served: Served) -> None:
    unknown = served.get("/api/jobs/nope/reason", "stranger")
    hidden = served.get(f"/api/jobs/{JOB}/reason", "stranger")
    assert unknown.status_code == hidden.status_code == 404
    assert hidden.json()["detail"] == f"job {JOB} not found"  # no hint that it exists
    assert served.get(f"/jobs/{JOB}", "stranger").status_code == 404
    assert served.get(f"/api/jobs/{JOB}/reason", None).status_code == 401


def section(page: str) -> str:
    m = re.search(r'<section id="reasoner">(.*?)</section>', page, re.S)
    assert m, "no reasoner section on the job page"
    return html.unescape(m.group(1))


def test_page_shows_each_anomaly_and_its_ring(served: Served, one_slow) -> None:
    api = served.get(f"/api/jobs/{JOB}/reason", served.owner).json()
    res = served.get(f"/jobs/{JOB}", served.owner)
    assert res.status_code == 200
    sec = section(res.text)
    rows = re.findall(r'<tr class="reason-anomaly" data-level="(\w+)">(.*?)</tr>', sec, re.S)
    assert [lvl for lvl, _ in rows] == [a["level"] for a in api["anomalies"]]
    for lvl in ("process", "node", "system"):
        n = sum(a["level"] == lvl for a in api["anomalies"])
        assert f'data-level="{lvl}">{n}</b>' in sec
    i = planted(api, one_slow)
    row = rows[i][1]
    assert "process-local" in row
    # the ring excerpt: the last 5 activities forwarded, the slowed process's writes to its
    # own data file just before the FIFO (`test_reasoner_traced` checks them against its log)
    fw = api["anomalies"][i]["forwarded"]
    assert len(fw) == 32 and "5 of 32 forwarded" in row
    for f in fw[-5:]:
        assert f"{f['node']} pid {f['pid']} {f['op']} {f['count']}×{f['size']} B" in row
    slowed = next(p for p in one_slow[1] if p.slowed)
    assert sum(f["path"] == str(slowed.data) for f in fw[-5:]) >= 4
    assert str(slowed.data) in row


def test_nothing_anomalous_is_one_line(served: Served) -> None:
    api = served.get(f"/api/jobs/{CALM}/reason", served.owner).json()
    assert api["activities"] == WARM_UP - 1 and api["anomalies"] == []
    sec = section(served.get(f"/jobs/{CALM}", served.owner).text)
    assert "<table" not in sec
    line = f"No anomaly in the job's {WARM_UP - 1} traced activities (1 processes on 1 nodes)."
    assert line in re.sub(r"\s+", " ", sec)


def test_the_server_reads_the_sites_reasoner_table(
    stored: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As `iolens reason` does, the web reads `[reasoner]` from `IOLENS_SITE_CONFIG`."""
    from iolens.errors import InputError
    from iolens.present.web.job_views import reasoning

    site = tmp_path / "site.toml"
    site.write_text("[reasoner]\nring = 4\n")
    monkeypatch.setenv("IOLENS_SITE_CONFIG", str(site))
    cli = run_cli("reason", JOB, "--json", "--db", str(stored))
    assert cli.returncode == 0, cli.stderr
    with DuckDBStore(stored, create=False) as store:
        got = json.loads(to_json(reasoning(store, JOB)))
        assert got == json.loads(cli.stdout)
        assert got["anomalies"] and all(len(a["forwarded"]) == 4 for a in got["anomalies"])
        site.write_text("[reasoner.detectors.histogramm]\n")
        with pytest.raises(InputError, match="histogramm") as err:
            reasoning(store, JOB)
    assert str(site) in str(err.value)


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")
def test_the_ring_unfolds_in_chromium(served: Served, one_slow) -> None:
    """In the browser the excerpt is folded until its row is opened; no script error and
    no CSP violation on the way (the section needs no script and no outside asset)."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    api = served.get(f"/api/jobs/{JOB}/reason", served.owner).json()
    i = planted(api, one_slow)
    with sync_api.sync_playwright() as p:
        browser = launch(p)
        try:
            page = browser.new_page()
            problems: list[str] = []
            page.on("pageerror", lambda e: problems.append(str(e)))
            page.on(
                "console",
                lambda m: problems.append(m.text) if "Content Security Policy" in m.text else None,
            )
            page.goto(f"{served.url}/jobs/{JOB}?token={served.tokens[served.owner]}")
            row = page.locator("#reasoner tr.reason-anomaly").nth(i)
            ring = row.locator("ul.ring li")
            assert page.locator("#reasoner tr.reason-anomaly").count() == len(api["anomalies"])
            assert not ring.first.is_visible()
            row.locator("summary").click()
            assert ring.first.is_visible() and ring.count() >= 5
            assert "process-local" in row.inner_text()
        finally:
            browser.close()
    assert not problems, problems
