"""The web UI's fixtures: the session's simulated store, analysed and given accounts."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from iolens.analyze.components import analyze_components
from iolens.model.schema import JOB_FACTORS
from iolens.present.web.accounts import add_user
from iolens.store import DuckDBStore

ARTIFACTS = Path(__file__).resolve().parents[2] / "build" / "test-artifacts" / "web"


@dataclass
class WebDB:
    path: Path
    tokens: dict[str, str]  # user name -> API token ("root" is the admin)
    user: str  # user A: owns `job`
    other: str  # user B
    job: str  # A's job with a finding that ran on a slow OST
    finding: str  # its finding code
    slow_ost: str
    a_jobs: list[str] = field(default_factory=list)
    b_jobs: list[str] = field(default_factory=list)
    episode_key: str = ""

    def copy(self, dst: Path) -> Path:
        shutil.copyfile(self.path, dst)
        if Path(f"{self.path}.wal").exists():
            shutil.copyfile(f"{self.path}.wal", f"{dst}.wal")
        return dst

    def auth(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}


def _pick(store: DuckDBStore) -> dict[str, Any]:
    """A job with a finding whose OSTs include one with a slow_ost episode during its run."""
    rows = store.query(
        """
        SELECT j.job_id, j."user", a.component_id, min(f.code) AS code
        FROM anomalies a
        JOIN server_samples s ON s.component_id = a.component_id AND s.job_id IS NOT NULL
             AND s.ts > a."start" AND (a."end" IS NULL OR s.ts <= a."end")
        JOIN jobs j ON j.job_id = s.job_id
        JOIN findings f ON f.subject_id = j.job_id AND f.subject_kind = 'job'
        WHERE a.kind = 'slow_ost'
        GROUP BY ALL ORDER BY j.job_id LIMIT 1
        """
    ).to_pylist()
    assert rows, "the simulation must have a job with a finding on a slow OST"
    return rows[0]


@pytest.fixture(scope="session")
def web_db(sim_db, tmp_path_factory: pytest.TempPathFactory) -> WebDB:
    from iolens.present.web.episode_views import episode_key

    path = tmp_path_factory.mktemp("web") / "web.duckdb"
    shutil.copyfile(sim_db.path, path)
    if Path(f"{sim_db.path}.wal").exists():
        shutil.copyfile(f"{sim_db.path}.wal", f"{path}.wal")
    with DuckDBStore(path) as store:
        analyze_components(store)
        pick = _pick(store)
        a = pick["user"]
        others = store.query(
            'SELECT "user", count(*) AS n FROM jobs WHERE "user" <> ? '
            "GROUP BY 1 ORDER BY n DESC, 1",
            [a],
        ).to_pylist()
        b = others[0]["user"]
        tokens = {
            a: add_user(store, a),
            b: add_user(store, b),
            "root": add_user(store, "root", True),
        }
        jobs_of = {
            u: store.query('SELECT job_id FROM jobs WHERE "user" = ? ORDER BY job_id', [u])
            .column("job_id")
            .to_pylist()
            for u in (a, b)
        }
        ep = store.query(
            'SELECT kind, component_id, "start" FROM anomalies WHERE component_id = ? '
            "AND kind = 'slow_ost' LIMIT 1",
            [pick["component_id"]],
        ).to_pylist()[0]
        # A few Darshan-style factor rows so the admins' factor page has something to draw.
        factors = [
            {
                "job_id": j,
                "user": a,
                "app": "ior" if i % 2 else "hacc",
                "bandwidth": 1e8 * (1 + i),
                "datasize": 2e9 * (1 + i % 3),
                "nprocs": 64.0 * (1 + i % 2),
                "nnodes": 4.0 * (1 + i % 2),
                "small_pct": 0.1 * (i % 5),
                "seq_pct": 0.9 - 0.05 * i,
                "ost_count": float(1 + i % 4),
            }
            for i, j in enumerate(jobs_of[a][:6])
        ]
        store.append("job_factors", pa.Table.from_pylist(factors, schema=JOB_FACTORS))
    return WebDB(
        path=path,
        tokens=tokens,
        user=a,
        other=b,
        job=pick["job_id"],
        finding=pick["code"],
        slow_ost=pick["component_id"],
        a_jobs=jobs_of[a],
        b_jobs=jobs_of[b],
        episode_key=episode_key(ep["kind"], ep["component_id"], ep["start"]),
    )


@pytest.fixture(scope="session")
def server(web_db, tmp_path_factory: pytest.TempPathFactory):
    """A real `iolens serve` on loopback, on its own copy of the store."""
    from tests.loopback import free_port, start_server, stop

    d = tmp_path_factory.mktemp("served-web")
    path = web_db.copy(d / "served.duckdb")
    port = free_port()
    proc = start_server(
        path, port, d / "server.log", "--analyze-every", "0", "--components-every", "0"
    )
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop(proc)


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Headless Debian Chromium (tests/web/chromium.py), one per test module."""
    from tests.web.chromium import launch

    playwright = pytest.importorskip("playwright.sync_api", reason="pip install playwright")
    with playwright.sync_playwright() as p:
        b = launch(p)
        try:
            yield b
        finally:
            b.close()
