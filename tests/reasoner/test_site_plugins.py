"""The site TOML choosing plug-ins: `[analyze]` the findings `iolens analyze` runs, and
the tables the site config accepts. Data: a seeded simulation (16 nodes, 30 minutes,
seed 3); the ground truth is the same store analysed with every finding on."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from iolens.simulate import SimConfig, simulate
from iolens.store.duckdb_store import DuckDBStore
from iolens.store.site_config import load_site
from tests.conftest import run_cli


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, int]]:
    path = tmp_path_factory.mktemp("sim") / "s.duckdb"
    with DuckDBStore(path) as store:
        simulate(SimConfig(nodes=16, hours=0.5, seed=3)).load(store)
    res = run_cli("analyze", "--json", "--db", str(path))
    assert res.returncode == 0, res.stderr
    every = json.loads(res.stdout)["findings"]
    assert len(every) >= 2  # a selection must have something to leave out
    return path, every


def analyze(db: Path, tmp: Path, toml: str) -> dict[str, int]:
    copy = tmp / "copy.duckdb"
    shutil.copy(db, copy)
    site = tmp / "site.toml"
    site.write_text(toml)
    res = run_cli("analyze", "--json", "--db", str(copy), "--site-config", str(site))
    assert res.returncode == 0, res.stderr
    return json.loads(res.stdout)["findings"]


def test_disable_drops_exactly_that_finding(sim, tmp_path: Path) -> None:
    db, every = sim
    gone = max(every, key=every.__getitem__)
    got = analyze(db, tmp_path, f'[analyze]\ndisable = ["{gone}"]\n')
    assert got == {k: v for k, v in every.items() if k != gone}


def test_findings_runs_only_those(sim, tmp_path: Path) -> None:
    db, every = sim
    keep = min(every)
    got = analyze(db, tmp_path, f'[dataset]\nflush_s = 3\n\n[analyze]\nfindings = ["{keep}"]\n')
    assert got == {keep: every[keep]}


def test_unknown_finding_names_file_and_code(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text('[analyze]\nfindings = ["IOL999"]\n')
    res = run_cli("analyze", "--db", str(tmp_path / "none.duckdb"), "--site-config", str(site))
    assert res.returncode == 2
    err = res.stderr.strip()
    assert str(site) in err and "IOL999" in err and "IOL001" in err and "Traceback" not in err


def test_site_config_accepts_the_plugin_tables(tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text('[reasoner]\nring = 8\n\n[analyze]\ndisable = ["IOL006"]\n')
    cfg = load_site(site)
    assert cfg.reasoner == {"ring": 8} and cfg.analyze == {"disable": ["IOL006"]}
