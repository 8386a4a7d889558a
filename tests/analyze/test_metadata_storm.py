"""metadata_storm on what a real MDS exposes.

Golden replays: a login-node storm of 40 k getattr/s written into the real Lustre 2.10
MDS files of the HPE capture (`mds_captures.py`), once untagged and once as `find.1003`,
and the same traffic without the storm, each imported with `iolens import lustre` (the
real agent sources) and judged with `iolens anomalies --json`.

Hand-built stores: one scenario per rule of the detector (who sent the operations, which
overload signal, what is missing), with the same rows the `lustre_mds` source writes.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iolens.analyze.components import analyze_components, component_gaps
from iolens.analyze.components.metadata_storm import MetadataStorm
from iolens.analyze.jobids import save_job_scheme
from iolens.model.schema import COMPONENTS, SERVER_SAMPLES
from iolens.store import DuckDBStore
from tests.analyze.mds_captures import DDN_214, HPE_210, MDS_HOST, Series, write_series
from tests.conftest import run_cli

SLACK = timedelta(minutes=2)

# -- golden replays of real 2.10 MDS files ------------------------------------------------------


#: (capture, variant) -> write_series keywords. On the 2.14 MDS the clients name processes
#: outside jobs `%e:%u:%H`, as in that capture's own job_stats.
VARIANTS = {
    ("2.10", "untagged"): (HPE_210, {}),
    ("2.10", "find"): (HPE_210, {"storm_tag": "find.1003", "login_tag": "bash.1001"}),
    ("2.10", "healthy"): (HPE_210, {"storm": None, "login_tag": "bash.1001"}),
    ("2.14", "find"): (
        DDN_214,
        {"storm_tag": "find:1003:login01", "login_tag": "bash:1001:login01"},
    ),
    ("2.14", "healthy"): (DDN_214, {"storm": None, "login_tag": "bash:1001:login01"}),
}
STORMS = [k for k, (_c, kw) in VARIANTS.items() if "storm" not in kw]


@pytest.fixture(scope="module")
def replays(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], tuple[Series, dict]]:
    """Each variant imported through the real agent and judged by the CLI."""
    base = tmp_path_factory.mktemp("mds-replays")
    out = {}
    for (version, name), (capture, kw) in VARIANTS.items():
        series = write_series(base / version / name, capture, **kw)
        db = base / f"{version}-{name}.duckdb"
        res = run_cli("import", "lustre", str(series.path), "--db", str(db), "--host", MDS_HOST)
        assert res.returncode == 0, res.stderr
        res = run_cli("anomalies", "--db", str(db), "--json")
        assert res.returncode == 0, res.stderr
        out[(version, name)] = (series, json.loads(res.stdout))
    return out


def _storms(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["episodes"] if e["kind"] == "metadata_storm"]


def _t(iso: str) -> datetime:
    return datetime.fromisoformat(iso.removesuffix("Z"))


@pytest.mark.parametrize("key", STORMS, ids=["-".join(k) for k in STORMS])
def test_replayed_storm_is_one_episode_on_the_mdt_with_its_span(replays, key):
    series, doc = replays[key]
    (ep,) = _storms(doc)
    assert (ep["component_kind"], ep["component"]) == ("mdt", series.capture.mdt)
    assert series.storm is not None
    a, b = series.storm
    assert abs(_t(ep["start"]) - series.at(a)) <= SLACK
    assert abs(_t(ep["end"]) - series.at(b)) <= SLACK
    ev = ep["evidence"]
    assert ev["overload"] == "mds_queue" and ev["mds"] == MDS_HOST
    assert 10 <= ev["queue_len"] <= 14  # written as a mean of 12
    login = series.capture.login
    assert ev["clients"][0]["nid"] == login and ev["clients"][0]["share"] > 0.9
    assert ev["untagged_share"] > 0.9 and ev["operations"]["getattr"] > 0.9
    assert {j["job_id"] for j in ev["jobs"]} == {"4101", "4102"}
    assert login in ev["summary"]
    assert ep["severity"] == "critical"  # requests waited longer than they were served
    assert not [g for g in doc["not_assessed"] if g["detector"] == "metadata_storm"]


@pytest.mark.parametrize("version", ["2.10", "2.14"])
def test_replayed_storm_tagged_by_process_names_it(replays, version):
    _series, doc = replays[(version, "find")]
    (ep,) = _storms(doc)
    top = ep["evidence"]["processes"][0]
    assert (top["job_id"], top["process"], top["uid"]) == (
        VARIANTS[(version, "find")][1]["storm_tag"],
        "find",
        1003,
    )
    assert top["share"] > 0.9
    assert "find, uid 1003" in ep["evidence"]["summary"]
    if version == "2.14":
        assert top["host"] == "login01"


def test_replayed_untagged_storm_has_no_jobstats_entry(replays):
    _series, doc = replays[("2.10", "untagged")]
    (ep,) = _storms(doc)
    assert ep["evidence"]["processes"] == [] and ep["evidence"]["unaccounted_share"] > 0.9


@pytest.mark.parametrize("version", ["2.10", "2.14"])
def test_replayed_healthy_control_has_nothing(replays, version):
    _series, doc = replays[(version, "healthy")]
    assert doc["episodes"] == []
    assert not [g for g in doc["not_assessed"] if g["detector"] == "metadata_storm"]


# -- hand-built stores ------------------------------------------------------------------------

T0 = datetime(2025, 1, 6, 8, 0)
COMPUTE = "10.0.0.5@o2ib"
LOGIN_NID = "10.0.9.1@o2ib"


def _sample(t: int, kind: str, comp: str, job: str | None = None, **v: Any) -> dict[str, Any]:
    return {
        "ts": T0 + timedelta(seconds=t),
        "interval_s": 10.0,
        "kind": kind,
        "component_id": comp,
        "job_id": job,
        **v,
    }


def mdt_rows(
    *,
    mdt: str = "fs-MDT0000",
    mds: str | None = "mds1",
    busy: range = range(20, 45),
    job: float = 200.0,
    job_busy: float = 0.0,
    proc: float = 5.0,
    proc_busy: float = 0.0,
    loose_busy: float = 0.0,
    queue_busy: float = 12.0,
    job_id: str = "4101",
    proc_id: str = "find.1003",
    entries: bool = True,
    clients: bool = True,
    offset: int = 0,
    minutes: int = 60,
) -> list[dict[str, Any]]:
    """What lustre_mds reports every 10 s: MDT totals, job_stats entries, exports, MDS queue.

    Ops/s of a job (on COMPUTE), of a process outside any job and of clients without an
    entry (both on LOGIN_NID); during `busy` minutes the `_busy` rates are added and the
    MDS queue holds `queue_busy` requests."""
    rows = []
    for t in range(10 + offset, minutes * 60 + 1, 10):
        on = (t - 1) // 60 in busy
        j = job + (job_busy if on else 0.0)
        p = proc + (proc_busy if on else 0.0)
        loose = loose_busy if on else 0.0
        rows.append(_sample(t, "mdt", mdt, md_ops=int((j + p + loose) * 10)))
        if entries:
            rows.append(_sample(t, "mdt", mdt, job_id, md_ops=int(j * 10)))
            rows.append(_sample(t, "mdt", mdt, proc_id, md_ops=int(p * 10)))
        if clients:
            rows.append(_sample(t, "mdt_client", f"{mdt}:{COMPUTE}", md_ops=int(j * 10)))
            rows.append(
                _sample(t, "mdt_client", f"{mdt}:{LOGIN_NID}", md_ops=int((p + loose) * 10))
            )
        if mds is not None:
            q = queue_busy if on else 0.005
            rows.append(
                _sample(
                    t,
                    "mds",
                    mds,
                    queue_len=q,
                    wait_us=400.0 if q >= 1 else 60.0,
                    service_us=35.0,
                    active_threads=17.0 if q >= 1 else 1.5,
                )
            )
    return rows


def make_store(
    tmp_path: Path, rows: list[dict[str, Any]], components: list[dict[str, Any]] = ()
) -> DuckDBStore:
    store = DuckDBStore(tmp_path / "mds.duckdb")
    store.append("server_samples", pa.Table.from_pylist(rows, schema=SERVER_SAMPLES))
    if components:
        full = [{"parent": None, "peak_bw": None, "peak_ops": None, **c} for c in components]
        store.append("components", pa.Table.from_pylist(full, schema=COMPONENTS))
    return store


def storms(store: DuckDBStore) -> list[dict[str, Any]]:
    analyze_components(store, detectors=[MetadataStorm()])
    rows = store.query("SELECT * FROM anomalies ORDER BY start").to_pylist()
    for r in rows:
        r["evidence"] = json.loads(r["evidence"])
    return rows


def gaps(store: DuckDBStore) -> list[str]:
    return [g["missing"] for g in component_gaps(store) if g["detector"] == "metadata_storm"]


SCENARIOS = {
    # (rows, expected episodes)
    "storm-as-procname": (dict(proc_busy=40_000.0), 1),
    "storm-without-entry": (dict(loose_busy=40_000.0), 1),
    "job-driven-overload": (dict(job_busy=40_000.0), 0),  # the job's own finding, not a storm
    "light-login-use": (dict(proc_busy=2_000.0, queue_busy=0.005), 0),  # the MDS keeps up
    "busy-but-coping": (dict(proc_busy=40_000.0, queue_busy=0.3), 0),
}


@pytest.mark.parametrize(("kw", "expected"), SCENARIOS.values(), ids=SCENARIOS.keys())
def test_storm_needs_overload_and_untagged_clients(tmp_path, kw, expected):
    with make_store(tmp_path, mdt_rows(**kw)) as store:
        found = storms(store)
        assert gaps(store) == []
    assert len(found) == expected
    if expected:
        e = found[0]
        assert (e["component_kind"], e["component_id"]) == ("mdt", "fs-MDT0000")
        assert e["start"] == T0 + timedelta(minutes=20) and e["end"] == T0 + timedelta(minutes=45)
        ev = e["evidence"]
        assert ev["untagged_share"] > 0.95 and ev["clients"][0]["nid"] == LOGIN_NID
        assert ev["queue_len"] == 12.0 and ev["wait_us"] == 400.0
        assert e["severity"] == "critical"


def test_site_formats_decide_what_is_a_job(tmp_path):
    """`SLURM_JOB10:0:host` reads as a process by default; a site that says its jobid_name
    is `SLURM_JOB%j:%u:%H` makes it job 10, and the overload the job's own."""
    rows = mdt_rows(proc_busy=40_000.0, proc_id="SLURM_JOB10:0:es18kxe-co-client")
    with make_store(tmp_path, rows) as store:
        assert len(storms(store)) == 1
        save_job_scheme(store, ["SLURM_JOB%j:%u:%H"])
        assert storms(store) == []


def test_jobstats_off_is_a_gap_not_a_storm(tmp_path):
    with make_store(tmp_path, mdt_rows(loose_busy=40_000.0, entries=False)) as store:
        assert storms(store) == []
        (missing,) = gaps(store)
    assert "job_stats" in missing


def test_without_queue_the_site_peak_decides(tmp_path):
    rows = mdt_rows(loose_busy=40_000.0, mds=None)
    with make_store(tmp_path, rows) as store:
        assert storms(store) == []
        (missing,) = gaps(store)
        assert "req_qdepth" in missing and "peak_ops" in missing
    with make_store(
        tmp_path / "p", rows, [{"component_id": "fs-MDT0000", "kind": "mdt", "peak_ops": 45_000.0}]
    ) as store:
        (e,) = storms(store)
        assert gaps(store) == []
    assert e["evidence"]["overload"] == "peak_ops" and e["evidence"]["load"] == pytest.approx(
        0.89, abs=0.01
    )


def test_without_exports_the_client_is_not_named(tmp_path):
    with make_store(tmp_path, mdt_rows(proc_busy=40_000.0, clients=False)) as store:
        (e,) = storms(store)
        (missing,) = gaps(store)
    assert e["evidence"]["clients"] == [] and "exports" in missing
    assert e["evidence"]["processes"][0]["process"] == "find"


@pytest.mark.parametrize("topology", [True, False], ids=["by-parent", "by-agent-round"])
def test_each_mdt_is_judged_by_its_own_mds(tmp_path, topology):
    """Two MDS hosts, each with an MDT heavy with untagged operations; only mds1 queues.
    mds2's agent stamps 3 s later, so without topology the rounds still tell them apart."""
    rows = mdt_rows(mdt="fs-MDT0000", mds="mds1", proc_busy=30_000.0)
    rows += mdt_rows(mdt="fs-MDT0001", mds="mds2", proc_busy=30_000.0, queue_busy=0.01, offset=3)
    comps = (
        [
            {"component_id": "fs-MDT0000", "kind": "mdt", "parent": "mds1"},
            {"component_id": "fs-MDT0001", "kind": "mdt", "parent": "mds2"},
        ]
        if topology
        else []
    )
    with make_store(tmp_path, rows, comps) as store:
        found = storms(store)
        assert gaps(store) == []
    assert [(e["component_id"], e["evidence"]["mds"]) for e in found] == [("fs-MDT0000", "mds1")]


def test_an_mds_without_md_stats_is_a_gap(tmp_path):
    rows = [r for r in mdt_rows(loose_busy=40_000.0) if r["kind"] == "mds"]
    with make_store(tmp_path, rows) as store:
        assert storms(store) == []
        (missing,) = gaps(store)
    assert "md_stats" in missing


def test_names_come_from_real_records_when_the_site_has_them(tmp_path):
    """uid 1003 is carol because a Darshan log of her job recorded it; the login NID is
    login01 because the site topology lists it as an alias (the `component_aliases`
    table `iolens site topology` writes, schema version 6)."""
    from iolens.model.schema import COMPONENT_ALIASES, DARSHAN_LOGS, JOBS

    with make_store(tmp_path, mdt_rows(proc_busy=40_000.0)) as store:
        job = {"job_id": "77", "user": "carol", "app": "vpic", "nodes": ["c001"], "nprocs": 4}
        store.append("jobs", pa.Table.from_pylist([job], schema=JOBS))
        log = {"job_id": "77", "log_key": "darshan:x", "uid": 1003}
        store.append("darshan_logs", pa.Table.from_pylist([log], schema=DARSHAN_LOGS))
        alias = {"alias": LOGIN_NID, "component_id": "login01"}
        store.append("component_aliases", pa.Table.from_pylist([alias], schema=COMPONENT_ALIASES))
        (e,) = storms(store)
    ev = e["evidence"]
    assert ev["processes"][0]["user"] == "carol" and ev["clients"][0]["host"] == "login01"
    assert "client login01" in ev["summary"] and "find, uid 1003 (carol)" in ev["summary"]
