"""Where a browser lands (issue 23), over real HTTP: an unknown address is an HTML page
(the REST API's stays JSON), and the admins' "System now" on a store whose newest minutes
are idle lands on the most recent activity and says so, linking to the newest minutes."""

from __future__ import annotations

import re
from collections.abc import Iterator

import duckdb
import httpx
import pytest

from tests.loopback import free_port, start_server, stop


def test_an_unknown_address_is_a_page_and_an_unknown_api_is_json(server, web_db):
    with httpx.Client(base_url=server, timeout=60, headers=web_db.auth(web_db.user)) as c:
        for path in ("/no/such/page", "/jobsx", "/admin/nothing-here"):
            res = c.get(path)
            assert res.status_code == 404, path
            assert res.headers["content-type"].startswith("text/html"), path
            assert "<h1>Not found</h1>" in res.text and path in res.text
        for path in ("/api/no-such", "/api/v1/nothing"):
            res = c.get(path)
            assert res.status_code == 404, path
            assert res.headers["content-type"] == "application/json", path
            assert res.json()["detail"]
    # no account: still a page, not JSON
    with httpx.Client(base_url=server, timeout=60) as c:
        res = c.get("/no/such/page")
        assert res.status_code == 404 and res.headers["content-type"].startswith("text/html")


IDLE_MINUTES = 15


@pytest.fixture(scope="module")
def drained(web_db, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict]]:
    """The web store after the machine drained: every forwarder, OST and MDT reports
    `IDLE_MINUTES` more minutes of nothing, as its agent would (zero counters)."""
    d = tmp_path_factory.mktemp("drained")
    path = web_db.copy(d / "drained.duckdb")
    with duckdb.connect(str(path)) as con:
        last = con.execute(
            "SELECT max(ts) FROM server_samples WHERE kind IN ('forwarder', 'ost', 'mdt')"
        ).fetchone()[0]
        for k in range(1, IDLE_MINUTES * 6 + 1):  # an agent's 10-s rounds
            con.execute(
                """
                INSERT INTO server_samples
                SELECT * REPLACE (ts + to_seconds(10 * ?) AS ts, 10.0 AS interval_s,
                                  0 AS read_bytes, 0 AS write_bytes, 0 AS md_ops)
                FROM server_samples
                WHERE job_id IS NULL AND kind IN ('forwarder', 'ost', 'mdt')
                  AND ts = (SELECT max(ts) FROM server_samples s2
                            WHERE s2.component_id = server_samples.component_id
                              AND s2.job_id IS NULL AND s2.ts <= ?)
                """,
                [k, last],
            )
        newest = con.execute("SELECT max(ts) FROM server_samples").fetchone()[0]
    port = free_port()
    proc = start_server(path, port, d / "server.log", "--analyze-every", "0")
    try:
        yield f"http://127.0.0.1:{port}", {"last_busy": last, "newest": newest}
    finally:
        stop(proc)


def _levels(html: str) -> list[str]:
    return re.findall(r'class="tile (\w+)"', html)


def test_system_now_lands_on_the_latest_activity_when_the_newest_is_idle(drained, web_db):
    url, facts = drained
    with httpx.Client(base_url=url, timeout=120, headers=web_db.auth("root")) as c:
        page = c.get("/admin")
        assert page.status_code == 200
        levels = _levels(page.text)
        assert levels and set(levels) != {"idle"}, levels  # something to look at
        note = re.search(r'<p class="note" id="landed">(.*?)</p>', page.text, re.S)
        assert note and "idle in the newest data" in note.group(1)
        # shown: minutes before the idle tail; linked: the newest minutes, all idle
        shown = re.search(r"(\d{4}-\d\d-\d\d \d\d:\d\d):\d\d UTC</span></h1>", page.text)
        assert shown and shown.group(1) <= f"{facts['last_busy']:%Y-%m-%d %H:%M}"
        link = re.search(r'href="(/admin\?at=[^"]+)">Show the newest minutes', note.group(1))
        assert link
        newest = c.get(link.group(1).replace("&amp;", "&"))
        assert newest.status_code == 200
        assert set(_levels(newest.text)) == {"idle"}
        assert f"{facts['newest']:%Y-%m-%d %H:%M}" in newest.text
