"""A Lustre server's agent reports the targets it serves as topology, and a site's peaks
survive it: real 2.10 OSS and MDS captures, replayed as `iolens import lustre` does."""

from __future__ import annotations

import shutil
from pathlib import Path

from iolens.collect.replay import Replay
from iolens.ingest.load import load
from iolens.ingest.topology import load_topology
from iolens.store import open_store

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect"
OSS = CASES / "lustre_oss" / "hpe-2.10.1"
MDS = CASES / "lustre_mds" / "hpe-2.10.1"


def captures(base: Path, tree: Path, n: int = 3) -> Path:
    """`n` sample folders of the same real tree, a minute apart."""
    for i in range(n):
        shutil.copytree(
            tree,
            base / str(1_709_294_400 + 60 * i),
            ignore=shutil.ignore_patterns("*.md", "*.json"),
        )
    return base


def test_server_agents_report_their_targets_once_and_keep_site_peaks(tmp_path: Path):
    site = tmp_path / "site.toml"
    site.write_text(
        '[[oss]]\nname = "oss1"\ntargets = ["lustrefs-OST0000"]\ntarget_peak_bw = "1.8 GB/s"\n'
    )
    with open_store(str(tmp_path / "s.duckdb"), create=True) as store:
        load_topology(store, site)
        oss = Replay(captures(tmp_path / "oss", OSS), host="oss1", role="oss")
        batches = [b for _, b in oss.batches()]
        # the targets go in the first batch; later rounds with the same targets carry none
        assert [b.components is not None for b in batches] == [True, False, False]
        for b in batches:
            load(store, b)
        mds = Replay(captures(tmp_path / "mds", MDS), host="mds1", role="mds")
        for _, b in mds.batches():
            load(store, b)
        rows = {
            r["component_id"]: r
            for r in store.query("SELECT * FROM components ORDER BY component_id").to_pylist()
        }
    assert rows["lustrefs-OST0000"] == {
        "component_id": "lustrefs-OST0000",
        "kind": "ost",
        "parent": "oss1",
        "peak_bw": 1.8e9,  # the site's, not erased by the agent's row without a peak
        "peak_ops": None,
    }
    assert (
        rows["lustrefs-OST0002"]["parent"] == "oss1" and rows["lustrefs-OST0002"]["peak_bw"] is None
    )
    assert rows["oss1"]["kind"] == "oss" and rows["oss1"]["peak_bw"] == 1.8e9
    assert (
        rows["lustrefs-MDT0000"]["kind"] == "mdt" and rows["lustrefs-MDT0000"]["parent"] == "mds1"
    )
    assert rows["mds1"]["kind"] == "mds"
