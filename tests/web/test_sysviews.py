"""The admins' system views (issue 23): Beacon Tables 2-4, Figures 9, 10(b), 13 and the K
computer's positional OST map, each checked against an independent computation from the
raw tables or the simulator's ground truth, then through `iolens sysview --json`, the REST
API of a real `iolens serve` on loopback, and the page."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import datetime, timedelta

import httpx
import pyarrow as pa
import pytest

from iolens.analyze.system.anomaly_durations import anomaly_durations
from iolens.analyze.system.io_mode_mix import io_mode_mix
from iolens.analyze.system.mds_clients import mds_clients
from iolens.analyze.system.ost_positions import ost_positions
from iolens.analyze.system.volume_by_corehours import volume_by_corehours
from iolens.model.schema import ANOMALIES, COMPONENT_ALIASES, COMPONENTS, SERVER_SAMPLES
from iolens.store import DuckDBStore
from tests.conftest import run_cli

VIEWS = ("durations", "corehours", "modes", "mds-clients", "osts")


@pytest.fixture(scope="module")
def store(web_db) -> Iterator[DuckDBStore]:
    with DuckDBStore(web_db.path, create=False) as s:
        yield s


def _iso(s: str) -> datetime:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).replace(tzinfo=None)


# -- Beacon Table 2 ---------------------------------------------------------------------
def _hours_class(h: float) -> str:
    if h < 1:
        return "(0,1)"
    if h < 4:
        return "[1,4)"
    if h < 12:
        return "[4,12)"
    if h < 96:
        return "[12,96)"
    return ">=96"


def test_anomaly_durations_match_the_stored_episodes(store):
    rows = store.query('SELECT component_kind, "start", "end" FROM anomalies').to_pylist()
    assert rows, "the analysed simulation has anomaly episodes"
    layer = {"forwarder": "forwarding", "ost": "storage", "mdt": "metadata"}
    want = Counter(
        (_hours_class((r["end"] - r["start"]).total_seconds() / 3600), layer[r["component_kind"]])
        for r in rows
    )
    got = anomaly_durations(store)
    assert got.total == len(rows)
    seen = Counter({(c, lay): n for c, per in got.counts.items() for lay, n in per.items() if n})
    assert seen == want


def test_anomaly_duration_classes_at_their_edges(tmp_path):
    """Planted episodes of known length on a fresh store: each lands in its class, a
    1-hour one in [1,4) (Beacon's classes are closed on the left), and an open one counts
    up to the newest sample."""
    t0 = datetime(2026, 1, 1)
    lengths = {"a": 0.5, "b": 1.0, "c": 3.99, "d": 4.0, "e": 50.0, "f": 96.0}
    eps = [
        {"kind": "slow_ost", "component_kind": "ost", "component_id": f"ost-{k}",
         "start": t0, "end": t0 + timedelta(hours=h), "severity": "warning"}
        for k, h in lengths.items()
    ]  # fmt: skip
    eps.append({"kind": "slow_forwarder", "component_kind": "forwarder", "component_id": "fwd1",
                "start": t0, "end": None, "severity": "critical"})  # fmt: skip
    sample = {"ts": t0 + timedelta(hours=13), "interval_s": 10.0, "kind": "forwarder",
              "component_id": "fwd1"}  # fmt: skip
    with DuckDBStore(tmp_path / "s.duckdb") as s:
        s.append("anomalies", pa.Table.from_pylist(eps, schema=ANOMALIES))
        s.append("server_samples", pa.Table.from_pylist([sample], schema=SERVER_SAMPLES))
        got = anomaly_durations(s)
    assert got.counts["(0,1)"]["storage"] == 1
    assert got.counts["[1,4)"]["storage"] == 2
    assert got.counts["[4,12)"]["storage"] == 1
    assert got.counts["[12,96)"] == {"forwarding": 1, "storage": 1}  # the open one: 13 h
    assert got.counts[">=96"]["storage"] == 1
    assert got.ongoing == {"forwarding": 1, "storage": 0}


# -- Beacon Table 3 ---------------------------------------------------------------------
def test_volume_by_corehours_matches_the_workload(store, sim_db):
    """Core-hours and bytes from the simulator's own job specs, not from the store."""
    truth = sim_db.truth["jobs"]
    bounds = [(0, 1e3), (1e3, 1e4), (1e4, 1e5), (1e5, 1e6), (1e6, float("inf"))]
    want: dict[int, list[int]] = {}
    for t in truth.values():
        ch = t["nprocs"] * (_iso(t["end"]) - _iso(t["start"])).total_seconds() / 3600
        k = next(i for i, (lo, hi) in enumerate(bounds) if lo < ch <= hi)
        acc = want.setdefault(k, [0, 0, 0])
        acc[0] += 1
        acc[1] += t["read_bytes"]
        acc[2] += t["write_bytes"]
    got = volume_by_corehours(store).classes
    assert [c.label for c in got] == [
        "(0,1K]", "(1K,10K]", "(10K,100K]", "(100K,1000K]", "(1000K,inf)",
    ]  # fmt: skip
    assert sum(c.jobs for c in got) == len(truth)
    for i, c in enumerate(got):
        n, r, w = want.get(i, [0, 0, 0])
        assert c.jobs == n
        if n:
            assert c.avg_read == pytest.approx(r / n, rel=0.01)
            assert c.avg_write == pytest.approx(w / n, rel=0.01)


# -- Beacon Table 4 / Figure 9 ------------------------------------------------------------
def test_io_mode_mix_matches_the_workload(store, sim_db):
    truth = sim_db.truth["jobs"]
    jobs = Counter(t["io_mode"] for t in truth.values())
    read = Counter()
    write = Counter()
    for t in truth.values():
        read[t["io_mode"]] += t["read_bytes"]
        write[t["io_mode"]] += t["write_bytes"]
    got = {m.mode: m for m in io_mode_mix(store).modes}
    assert set(got) == {"N-N", "N-1", "N-M", "1-1"}  # every job analysed: no "unknown"
    for mode in got:
        assert got[mode].jobs == jobs[mode], mode
        assert got[mode].read_bytes == pytest.approx(read[mode], rel=0.01), mode
        assert got[mode].write_bytes == pytest.approx(write[mode], rel=0.01), mode
        assert got[mode].job_share == pytest.approx(jobs[mode] / len(truth))
    assert sum(m.write_share for m in got.values()) == pytest.approx(1.0)


# -- Beacon Figure 10(b) -------------------------------------------------------------------
def test_mds_clients_split_matches_the_export_counters(store):
    """Per NID from the raw `mdt_client` rows, the role from the alias's component kind."""
    per_nid = {
        r["c"].split(":", 1)[1]: int(r["ops"])
        for r in store.query(
            "SELECT component_id AS c, sum(md_ops) AS ops FROM server_samples "
            "WHERE kind = 'mdt_client' AND job_id IS NULL GROUP BY 1"
        ).to_pylist()
    }
    kind_of = {
        r["alias"]: r["kind"]
        for r in store.query(
            "SELECT a.alias, c.kind FROM component_aliases a JOIN components c USING (component_id)"
        ).to_pylist()
    }
    want = Counter()
    for nid, ops in per_nid.items():
        k = kind_of.get(nid)
        want[{"compute": "compute", "forwarder": "compute", "login": "login"}.get(k, "other")
             if k else "unknown"] += ops  # fmt: skip
    got = mds_clients(store)
    assert got.total_ops == sum(per_nid.values()) > 0
    assert {k: v for k, v in got.roles.items() if v} == dict(want)
    assert got.roles["login"] > got.roles["compute"]  # the simulated login-node storm


def test_mds_clients_names_unknown_nids_unknown(tmp_path):
    t = datetime(2026, 1, 1)
    comps = [
        {"component_id": "login1", "kind": "login"},
        {"component_id": "dm1", "kind": "service"},
    ]
    aliases = [{"alias": "10.0.0.1@tcp", "component_id": "login1"},
               {"alias": "10.0.0.9", "component_id": "dm1"}]  # fmt: skip
    samples = [
        {"ts": t, "interval_s": 60.0, "kind": "mdt_client", "component_id": f"MDT0:{nid}",
         "md_ops": ops}
        for nid, ops in (("10.0.0.1@tcp", 70), ("10.0.0.9@tcp", 20), ("10.9.9.9@tcp", 10))
    ]  # fmt: skip
    with DuckDBStore(tmp_path / "s.duckdb") as s:
        s.append("components", pa.Table.from_pylist(comps, schema=COMPONENTS))
        s.append("component_aliases", pa.Table.from_pylist(aliases, schema=COMPONENT_ALIASES))
        s.append("server_samples", pa.Table.from_pylist(samples, schema=SERVER_SAMPLES))
        got = mds_clients(s)
    assert got.roles == {"compute": 0, "login": 70, "other": 20, "unknown": 10}
    assert got.top["unknown"][0].nid == "10.9.9.9@tcp" and got.top["unknown"][0].host is None


# -- the K computer's positional OST map ----------------------------------------------------
def test_ost_positions_lay_out_every_ost_with_its_bytes(store, web_db):
    parent = {
        r["component_id"]: r["parent"]
        for r in store.query("SELECT component_id, parent FROM components WHERE kind = 'ost'")
        .to_pylist()
    }  # fmt: skip
    for job in (None, web_db.job):
        who = "job_id = ?" if job else "job_id IS NULL"
        moved = {
            r["c"]: int(r["b"])
            for r in store.query(
                "SELECT component_id AS c, sum(coalesce(read_bytes, 0) + coalesce(write_bytes, 0))"
                f" AS b FROM server_samples WHERE kind = 'ost' AND {who} GROUP BY 1",
                [job] if job else [],
            ).to_pylist()
        }
        got = ost_positions(store, job_id=job)
        cells = {c.ost: (oss, c) for oss, row in zip(got.servers, got.grid, strict=True)
                 for c in row}  # fmt: skip
        assert set(cells) == set(parent) | set(moved)
        for ost, (oss, c) in cells.items():
            assert oss == parent[ost]
            assert c.read_bytes + c.write_bytes == moved.get(ost, 0)
            assert c.index == int(ost.rsplit("OST", 1)[1], 16)
        for row in got.grid:  # within an OSS, by target index
            assert [c.index for c in row] == sorted(c.index for c in row)
        assert got.max_bytes == max(moved.values())


# -- CLI, REST, page -----------------------------------------------------------------------
def test_cli_json_is_the_views(store, web_db, tmp_path):
    db = web_db.copy(tmp_path / "cli.duckdb")  # the module's store holds the file's lock
    direct = {
        "modes": io_mode_mix(store),
        "mds-clients": mds_clients(store),
    }
    for name in VIEWS:
        res = run_cli("sysview", name, "--db", str(db), "--json")
        assert res.returncode == 0, res.stderr
        doc = json.loads(res.stdout)
        if name in direct:
            assert doc == json.loads(json.dumps(_plain(direct[name])))
    res = run_cli("sysview", "mds-clients", "--db", str(db))
    assert res.returncode == 0 and "login" in res.stdout and "unknown" in res.stdout
    # each table prints the view's rows: the modes' job counts, the core-hour classes
    res = run_cli("sysview", "modes", "--db", str(db))
    assert res.returncode == 0, res.stderr
    for m in io_mode_mix(store).modes:
        assert any(ln.split()[:2] == [m.mode, str(m.jobs)] for ln in
                   res.stdout.replace("│", " ").splitlines()), m.mode  # fmt: skip
    res = run_cli("sysview", "corehours", "--db", str(db))
    assert res.returncode == 0 and "(1K,10K]" in res.stdout
    for name in ("durations", "osts"):
        res = run_cli("sysview", name, "--db", str(db))
        assert res.returncode == 0 and "Traceback" not in res.stderr, name
    res = run_cli("sysview", "durations", "--db", str(db), "--since", "yesterday")
    assert res.returncode == 2 and "Traceback" not in res.stderr


def _plain(view):
    from iolens.analyze.system import to_plain

    return to_plain(view)


def test_rest_and_page_over_http(server, web_db, store):
    admin = web_db.auth("root")
    with httpx.Client(base_url=server, timeout=120, headers=admin) as c:
        for name in VIEWS:
            r = c.get(f"/api/admin/sysview/{name}")
            assert r.status_code == 200, (name, r.text)
        modes = {m["mode"]: m["jobs"] for m in c.get("/api/admin/sysview/modes").json()["modes"]}
        assert modes == {m.mode: m.jobs for m in io_mode_mix(store).modes}
        assert c.get("/api/admin/sysview/nope").status_code == 404
        assert c.get("/api/admin/sysview/durations?since=never").status_code == 400
        job = c.get(f"/api/admin/sysview/osts?job={web_db.job}").json()
        assert job["job_id"] == web_db.job
        page = c.get("/admin/sysviews")
        assert page.status_code == 200
        for section in ("durations", "corehours", "modes", "mds-clients", "osts", "query-times"):
            assert f'<section id="{section}">' in page.text, section
        assert 'aria-label="OSTs by position"' in page.text
        assert 'aria-label="query time CDF"' in page.text
        job_page = c.get(f"/jobs/{web_db.job}")  # the map beside the job's OST x time heatmap
        assert job_page.status_code == 200
        assert 'aria-label="OSTs by position"' in job_page.text
        user = web_db.auth(web_db.user)
        assert c.get("/api/admin/sysview/modes", headers=user).status_code == 403


def test_query_times_with_and_without_the_cache(server, web_db):
    """Beacon Fig. 13 on the server's own requests: the first page view computes, the next
    ones come from the plot cache and are faster."""
    with httpx.Client(base_url=server, timeout=120, headers=web_db.auth("root")) as c:
        before = c.get("/api/admin/sysview/query-times").json()
        # a view no other test asks for (the server is shared; the browser tests may have
        # opened the others first): computed once, then cached
        fresh = "/admin/sysviews?min_bytes=123457"
        assert c.get(fresh).status_code == 200
        for _ in range(5):
            c.get(fresh)
        after = c.get("/api/admin/sysview/query-times").json()
    assert after["computed"]["n"] - before["computed"]["n"] == 1
    assert after["cached"]["n"] - before["cached"]["n"] >= 5
    assert after["computed"]["max_s"] > after["cached"]["p50_s"]
    assert after["cached"]["seconds"] == sorted(after["cached"]["seconds"])


def test_min_bytes_over_http(server, web_db, sim_db):
    """`min_bytes` on the API and the page leaves out the jobs the workload says moved less."""
    truth = sim_db.truth["jobs"].values()
    totals = sorted(t["read_bytes"] + t["write_bytes"] for t in truth)
    # a threshold in a gap between two jobs' totals, near the median, clear of rounding
    i = next(
        k for k in range(len(totals) // 2, len(totals) - 1) if totals[k + 1] > 1.05 * totals[k]
    )
    thr = int((totals[i] * totals[i + 1]) ** 0.5)
    want = Counter(t["io_mode"] for t in truth if t["read_bytes"] + t["write_bytes"] >= thr)
    assert 0 < sum(want.values()) < len(totals)
    with httpx.Client(base_url=server, timeout=120, headers=web_db.auth("root")) as c:
        modes = c.get("/api/admin/sysview/modes", params={"min_bytes": thr}).json()
        assert modes["min_bytes"] == thr
        assert {m["mode"]: m["jobs"] for m in modes["modes"] if m["jobs"]} == dict(want)
        ch = c.get("/api/admin/sysview/corehours", params={"min_bytes": thr}).json()
        assert sum(k["jobs"] for k in ch["classes"]) == sum(want.values())
        for bad in ("lots", "-1", "1e9", ""):
            for path in ("/api/admin/sysview/modes", "/admin/sysviews"):
                r = c.get(path, params={"min_bytes": bad})
                assert r.status_code == 422, (path, bad)
        page = c.get("/admin/sysviews", params={"min_bytes": thr})
        assert page.status_code == 200
        assert f'name="min_bytes" min="0" step="1" value="{thr}"' in page.text
        for mode, n in want.items():
            assert f'<td>{mode}</td><td class="n">{n} (' in page.text, mode
        assert "left out" in page.text
        plain = c.get("/admin/sysviews").text
        assert 'value="0"' in plain and "left out." not in plain
