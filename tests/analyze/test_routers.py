"""LNet router traffic (`route_bytes`) over time and between routers, on the captured
Lustre 2.10 `/proc/sys/lnet/stats` (tests/cases/collect/lnet_router/lustre-2.10-proc)
replayed through `iolens import lustre` with stated increases of its `route_length`."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from iolens.analyze.system import router_traffic
from iolens.store import DuckDBStore
from tests.conftest import run_cli

LNET = (
    Path(__file__).resolve().parents[1] / "cases" / "collect" / "lnet_router" / "lustre-2.10-proc"
)
STATS = "proc/sys/lnet/stats"
T0 = 1_709_294_400  # 2024-03-01T12:00:00Z, a minute boundary
STEP = 60
#: host -> bytes routed in each STEP after the first capture (a compute node routes none).
ROUTED = {
    "rtr1": [6_000_000_000, 9_000_000_000, 3_000_000_000],
    "rtr2": [600_000_000, 0, 1_200_000_000],
    "cn1": [0, 0, 0],
}
#: route_count increase per STEP on every router (messages of 1 MiB-ish).
MSGS = 1_000


def captures(base: Path, host: str) -> Path:
    """Four captures of `host`'s LNet stats, `ROUTED[host]` bytes apart."""
    fields = (LNET / STATS).read_text().split()
    routed, msgs = int(fields[9]), int(fields[5])
    for step in range(4):
        if step:
            routed += ROUTED[host][step - 1]
            msgs += MSGS if ROUTED[host][step - 1] else 0
        root = base / host / str(T0 + step * STEP)
        (root / STATS).parent.mkdir(parents=True)
        fields[9], fields[5] = str(routed), str(msgs)
        (root / STATS).write_text(" ".join(fields) + "\n")
    return base / host


@pytest.fixture(scope="module")
def routers_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("routers")
    db = tmp / "s.duckdb"
    for host in ROUTED:
        d = captures(tmp / "captures", host)
        res = run_cli("import", "lustre", str(d), "--db", str(db), "--host", host, "--json")
        assert res.returncode == 0, res.stderr
        assert json.loads(res.stdout)["batches"] == 4
    return db


def test_router_volumes_rates_and_imbalance(routers_db: Path) -> None:
    with DuckDBStore(routers_db, create=False) as store:
        view = router_traffic(store)
    assert view.missing is None
    by = {r.component_id: r for r in view.routers}
    assert list(by) == ["rtr1", "rtr2"]  # cn1 never routed: not a router
    volumes = {h: sum(v) for h, v in ROUTED.items() if sum(v)}
    for host, total in volumes.items():
        r = by[host]
        assert r.bytes == total
        assert r.peak_rate == pytest.approx(max(ROUTED[host]) / STEP)
        assert r.mean_rate == pytest.approx(total / (3 * STEP))
        assert r.msgs == MSGS * sum(1 for v in ROUTED[host] if v)
    # one-minute load over time: each capture interval is one minute
    assert view.minutes == [
        datetime.fromtimestamp(T0 + k * STEP, UTC).replace(tzinfo=None) for k in range(3)
    ]
    assert view.rates["rtr2"] == [pytest.approx(v / STEP) for v in ROUTED["rtr2"]]
    mean = sum(volumes.values()) / len(volumes)
    assert view.max_over_mean == pytest.approx(max(volumes.values()) / mean)
    assert view.total_bytes == sum(volumes.values())


def test_window_and_no_routers(routers_db: Path, tmp_path: Path) -> None:
    with DuckDBStore(routers_db, create=False) as store:
        second = router_traffic(
            store,
            start=datetime.fromtimestamp(T0 + STEP, UTC).replace(tzinfo=None),
            end=datetime.fromtimestamp(T0 + 2 * STEP, UTC).replace(tzinfo=None),
        )
    # rtr2 routed nothing in that minute but is still a router: idle beside a busy one
    assert {r.component_id: r.bytes for r in second.routers} == {
        "rtr1": ROUTED["rtr1"][1],
        "rtr2": 0,
    }
    assert second.max_over_mean == pytest.approx(2.0)
    empty = tmp_path / "e.duckdb"
    with DuckDBStore(empty, create=True) as store:
        view = router_traffic(store)
    assert view.routers == [] and "route_bytes" in (view.missing or "")


def test_the_switches_page_and_its_json_show_the_routers(routers_db: Path, tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    from iolens.present.web.accounts import add_user
    from iolens.present.web.app import create_app

    db = tmp_path / "web.duckdb"
    shutil.copyfile(routers_db, db)
    with DuckDBStore(db) as store:
        token = add_user(store, "root", True)
        client = TestClient(create_app(store))
        auth = {"Authorization": f"Bearer {token}"}
        html = client.get("/admin/switches", headers=auth).text
        api = client.get("/api/admin/routers", headers=auth).json()
    assert "LNet routers" in html and "rtr1" in html and "rtr2" in html
    assert [r["component_id"] for r in api["routers"]] == ["rtr1", "rtr2"]
    assert api["routers"][0]["bytes"] == sum(ROUTED["rtr1"])
