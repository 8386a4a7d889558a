"""`iolens report --html`, `iolens explain`, `iolens findings` against the simulated store."""

from __future__ import annotations

import json
import re

from iolens.analyze.catalog import catalog
from iolens.store import DuckDBStore
from tests.conftest import run_cli


def _findings_in_store(path) -> list[dict]:
    with DuckDBStore(path, read_only=True) as store:
        return store.query(
            "SELECT subject_id, code, severity FROM findings WHERE subject_kind = 'job'"
        ).to_pylist()


def test_findings_json_lists_what_the_store_holds(sim_db):
    stored = _findings_in_store(sim_db.path)
    r = run_cli("findings", "--db", str(sim_db.path), "--json")
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout)
    assert sorted((f["job_id"], f["code"]) for f in rows) == sorted(
        (f["subject_id"], f["code"]) for f in stored
    )
    # most severe first
    rank = {"critical": 0, "warning": 1, "info": 2}
    assert [rank[f["severity"]] for f in rows] == sorted(rank[f["severity"]] for f in rows)
    one = rows[0]["code"]
    r = run_cli("findings", "--db", str(sim_db.path), "--json", "--code", one)
    assert {f["code"] for f in json.loads(r.stdout)} == {one}


def test_findings_rejects_an_unknown_severity(sim_db):
    r = run_cli("findings", "--db", str(sim_db.path), "--severity", "loud")
    assert r.returncode == 2
    assert "Traceback" not in r.stderr


def test_explain_every_known_code_and_reject_unknown():
    docs = catalog()
    assert {"IOL001", "IOL002"} <= set(docs)
    for code, doc in docs.items():
        assert doc.title and doc.symptom and doc.what, code
    r = run_cli("explain", "iol002", "--json")
    assert r.returncode == 0, r.stderr
    got = json.loads(r.stdout)
    assert got["code"] == "IOL002" and "setstripe" in got["what"]
    r = run_cli("explain", "NOPE01")
    assert r.returncode == 2 and "unknown finding code" in r.stderr
    assert "Traceback" not in r.stderr


def test_html_report_is_self_contained_and_complete(sim_db, tmp_path):
    stored = _findings_in_store(sim_db.path)
    job_id = max(
        {f["subject_id"] for f in stored}, key=lambda j: sum(f["subject_id"] == j for f in stored)
    )
    out = tmp_path / "r.html"
    r = run_cli("report", job_id, "--db", str(sim_db.path), "--html", str(out))
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert f"Job {job_id}" in page
    for f in stored:
        if f["subject_id"] == job_id:
            assert f'id="{f["code"]}"' in page
    # plots are inline SVG with drawn marks (matplotlib paths, plain-SVG bars); nothing is
    # fetched from the network
    svgs = re.findall(r"<svg.*?</svg>", page, flags=re.S)
    assert len(svgs) >= 2 and all("<path" in s or "<rect" in s for s in svgs)
    assert not re.search(r'(src|href)="(https?:)?//', page)


def test_html_report_unknown_job_and_unwritable_target(sim_db, tmp_path):
    r = run_cli("report", "no-such-job", "--db", str(sim_db.path), "--html", str(tmp_path / "x"))
    assert r.returncode == 2 and "no-such-job" in r.stderr and "Traceback" not in r.stderr
    stored = _findings_in_store(sim_db.path)
    bad = tmp_path / "missing-dir" / "r.html"
    r = run_cli("report", stored[0]["subject_id"], "--db", str(sim_db.path), "--html", str(bad))
    assert r.returncode == 2 and "cannot write" in r.stderr
