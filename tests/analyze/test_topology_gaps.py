"""What the topology does not say is said: the low-bandwidth rule without peaks, a job's
OSTs without layouts or jobstats, its forwarders without a forwarding map, its load
levels without peaks - as gaps with a remedy, and gone once the site provides them."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iolens.analyze import report
from iolens.analyze import topology as topo
from iolens.analyze.components import analyze_components, component_gaps
from iolens.analyze.components.low_bandwidth import LowBandwidth
from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.ids import file_id
from iolens.model.schema import CLIENT_IO, COMPONENTS, FILES, FORWARDING, JOBS, SERVER_SAMPLES
from iolens.present import views
from iolens.present.cli import render
from iolens.store import DuckDBStore

T0 = datetime(2025, 1, 6, 8, 0)


def components(rows: list[tuple[str, str, str | None, float | None]]) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {"component_id": c, "kind": k, "parent": p, "peak_bw": bw, "peak_ops": None}
            for c, k, p, bw in rows
        ],
        schema=COMPONENTS,
    )


@pytest.fixture
def store(tmp_path: Path):
    with DuckDBStore(tmp_path / "s.duckdb") as s:
        yield s


def ost_samples(comp: str, minutes: int = 90) -> list[dict[str, Any]]:
    return [
        {
            "ts": T0 + timedelta(seconds=t),
            "interval_s": 10.0,
            "kind": "ost",
            "component_id": comp,
            "read_bytes": 10**8,
            "read_ops": 100,
            "queue_len": 2.0,
        }
        for t in range(10, minutes * 60 + 1, 10)
    ]


def test_low_bandwidth_says_which_components_it_could_not_judge(store):
    rows = ost_samples("fs-OST0000") + ost_samples("fs-OST0001")
    load(store, Batch("t", server_samples=pa.Table.from_pylist(rows, schema=SERVER_SAMPLES)))
    load(store, Batch("site", components=components([("fs-OST0000", "ost", "oss1", 6e8)])))
    analyze_components(store, detectors=[LowBandwidth()])
    (gap,) = [g for g in component_gaps(store) if g["detector"] == "low_bandwidth"]
    assert gap["component_kind"] == "ost" and gap["components"] == ["fs-OST0001"]
    assert "peak bandwidth" in gap["missing"] and "iolens site topology" in gap["remedy"]
    assert "IO500" in gap["remedy"]
    load(store, Batch("site", components=components([("fs-OST0001", "ost", "oss1", 6e8)])))
    analyze_components(store, detectors=[LowBandwidth()])
    assert not [g for g in component_gaps(store) if g["detector"] == "low_bandwidth"]


def test_missing_topology_lists_unmapped_nodes_and_components_without_peaks(store):
    load(
        store,
        Batch(
            "site",
            components=components(
                [
                    ("c3", "compute", None, None),
                    ("f1", "forwarder", None, 2.5e9),
                    ("o1", "ost", "s1", None),
                ]
            ),
            forwarding=pa.Table.from_pylist(
                [{"compute_node": "c1", "forwarder": "f1"}], schema=FORWARDING
            ),
        ),
    )
    got = topo.missing_topology(
        store, nodes=["c1", "c2", "c3"], components=["f1", "o1", "o9"], needed_for="interference"
    )
    assert [(m.piece, m.components) for m in got] == [
        ("forwarding", ("c2",)),
        ("peak_bw", ("o1", "o9")),
    ]
    assert "interference" in got[0].missing and "[[forwarders]]" in got[0].remedy
    # c3 is known to mount Lustre directly: no forwarder is an answer, not a gap
    assert topo.unmapped_nodes(store, ["c3"]) == []
    assert topo.missing_topology(store, nodes=["c1"], components=["f1"]) == []
    assert [
        m.piece for m in topo.missing_topology(store, components=["f1"], peaks=("peak_ops",))
    ] == ["peak_ops"]


def test_nids_name_hosts(store, tmp_path: Path):
    from iolens.ingest.topology import load_topology

    site = tmp_path / "site.toml"
    site.write_text('[[aliases]]\nhosts = "c[1-2]"\naliases = "10.1.0.[1-2]@o2ib"\n')
    load_topology(store, site)
    got = topo.host_names(store, ["10.1.0.2@o2ib", "10.9.9.9@tcp", "c1"])
    assert got == {"10.1.0.2@o2ib": "c2", "10.9.9.9@tcp": "10.9.9.9@tcp", "c1": "c1"}


def job_batch(with_layout: bool) -> Batch:
    path = "/scratch/run/out.dat"
    fid = file_id(path)
    rows = [
        {
            "job_id": "42",
            "node": node,
            "rank": r,
            "pid": 100 + r,
            "layer": "posix",
            "op": "write",
            "file_id": fid,
            "offset": r << 20,
            "size": 1 << 20,
            "stride": 4 << 20,
            "count": 8,
            "t_start": T0,
            "t_end": T0 + timedelta(seconds=5),
            "dur_ns": 10**9,
        }
        for r, node in enumerate(["c1", "c1", "c2", "c2"])
    ]
    layout = {"stripe_size": 1 << 20, "osts": ["fs-OST0000", "fs-OST0001"]} if with_layout else {}
    job = {"job_id": "42", "user": "u", "app": "a", "nodes": ["c1", "c2"], "nprocs": 4, "start": T0}
    return Batch(
        "t",
        jobs=pa.Table.from_pylist([job], schema=JOBS),
        client_io=pa.Table.from_pylist(rows, schema=CLIENT_IO),
        files=pa.Table.from_pylist([{"file_id": fid, "path": path, **layout}], schema=FILES),
    )


def test_job_report_names_missing_topology_then_stops_when_given(store):
    load(store, job_batch(with_layout=False))
    rep = report.build(store, "42")
    assert rep.osts == [] and rep.forwarders == []
    gaps = {g["piece"]: g for g in rep.gaps}
    assert set(gaps) == {"osts", "forwarders"}
    assert "none of the job's 1 data files has a known Lustre layout" in gaps["osts"]["missing"]
    assert gaps["forwarders"]["components"] == ["c1", "c2"]
    # the JSON of `iolens job --json` and the CLI page carry it
    doc = views.job(store, "42")
    assert [g["piece"] for g in doc["gaps"]] == ["osts", "forwarders"]
    text = "\n".join(str(x) for x in render.job_report(doc).renderables)
    assert "Not known: OST list unknown" in text
    # the site loads its topology, the tracer's layout arrives: OSTs and forwarders known,
    # but one OST has no peak: its load level is the remaining gap
    load(store, job_batch(with_layout=True))
    load(
        store,
        Batch(
            "site",
            components=components(
                [
                    ("f1", "forwarder", None, 2.5e9),
                    ("fs-OST0000", "ost", "s1", 1e9),
                    ("fs-OST0001", "ost", "s1", None),
                ]
            ),
            forwarding=pa.Table.from_pylist(
                [{"compute_node": n, "forwarder": "f1"} for n in ("c1", "c2")], schema=FORWARDING
            ),
        ),
    )
    rep = report.build(store, "42")
    assert rep.osts == ["fs-OST0000", "fs-OST0001"] and rep.forwarders == ["f1"]
    assert [(g["piece"], g["components"]) for g in rep.gaps] == [("load_levels", ["fs-OST0001"])]
    load(store, Batch("site", components=components([("fs-OST0001", "ost", "s1", 1e9)])))
    assert report.build(store, "42").gaps == []


def test_web_job_page_says_what_is_unknown(store):
    """The job page marks the empty server lists `unknown` and says what to load."""
    from fastapi.testclient import TestClient

    from iolens.present.web.accounts import add_user
    from iolens.present.web.app import create_app

    load(store, job_batch(with_layout=False))
    token = add_user(store, "root", admin=True)
    with TestClient(create_app(store, [])) as client:
        page = client.get("/jobs/42", headers={"Authorization": f"Bearer {token}"})
    assert page.status_code == 200, page.text
    assert "Not known:</b> OST list unknown" in page.text
    assert "iolens site topology" in page.text
    assert '<span class="muted">unknown</span>' in page.text
