"""`iolens import lustre DIR`: captured snapshots replayed through the agent into the store."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pytest

from iolens.collect.replay import Replay, find_samples, folder_time
from iolens.errors import InputError
from iolens.store import DuckDBStore
from tests.conftest import run_cli

CASES = Path(__file__).resolve().parents[1] / "cases" / "collect"
IB = CASES / "infiniband" / "mlx4-mlx5-hfi1"
LNET = CASES / "lnet_router" / "lustre-2.10-proc"
PORT = "sys/class/infiniband/mlx5_0/ports/1/counters/port_xmit_data"
LNET_STATS = "proc/sys/lnet/stats"
T0 = 1_709_294_400  # 2024-03-01T12:00:00Z
#: (folder name, seconds after T0, IB words sent since the previous folder, LNet bytes routed).
#: Three naming styles; their name order (epoch, dashed ISO, basic ISO) is not time order.
FOLDERS = [
    (str(T0), 0, 0, 0),
    ("20240301T120100Z", 60, 600_000, 6_000_000),
    ("2024-03-01T12:03:00Z", 180, 2_400_000, 36_000_000),
]


def make_dir(base: Path) -> Path:
    """Three captures of one forwarding node with known counter increases."""
    words, routed = int((IB / PORT).read_text()), 0
    for name, _dt, d_words, d_routed in FOLDERS:
        words, routed = words + d_words, routed + d_routed
        root = base / name
        shutil.copytree(IB, root, dirs_exist_ok=True)
        shutil.copytree(LNET, root, dirs_exist_ok=True)
        (root / PORT).write_text(f"{words}\n")
        fields = (root / LNET_STATS).read_text().split()
        fields[9] = str(routed)  # route_length
        (root / LNET_STATS).write_text(" ".join(fields) + "\n")
        (root / "PROVENANCE.md").unlink()
    (base / "capture.sh").write_text("#!/bin/sh\n")  # files beside the folders are ignored
    return base


def at(seconds: int) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC).replace(tzinfo=None)


def test_import_stores_the_known_rates_and_is_idempotent(tmp_path: Path) -> None:
    captures = make_dir(tmp_path / "captures")
    db = tmp_path / "s.duckdb"
    args = ("import", "lustre", str(captures), "--db", str(db), "--host", "fwd1", "--json")
    res = run_cli(*args)
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    with DuckDBStore(db, create=False) as store:
        tx = store.query(
            "SELECT ts, interval_s, value FROM metrics "
            "WHERE component_id = 'fwd1:mlx5_0:1' AND metric = 'tx_bytes' ORDER BY ts"
        ).to_pylist()
        routed = store.query(
            "SELECT ts, interval_s, value, kind FROM metrics "
            "WHERE component_id = 'fwd1' AND metric = 'route_bytes' ORDER BY ts"
        ).to_pylist()
        n_metrics = store.query("SELECT count(*) AS n FROM metrics").to_pylist()[0]["n"]
        n_samples = store.query("SELECT count(*) AS n FROM server_samples").to_pylist()[0]["n"]
        self_metrics = store.query("SELECT count(*) AS n FROM metrics WHERE kind = 'agent'")
    # Rates = delta / interval between consecutive folders, in time (not name) order.
    assert tx == [
        {"ts": at(60), "interval_s": 60.0, "value": 600_000 * 4 / 60},
        {"ts": at(180), "interval_s": 120.0, "value": 2_400_000 * 4 / 120},
    ]
    assert routed == [
        {"ts": at(60), "interval_s": 60.0, "value": 100_000.0, "kind": "forwarder"},
        {"ts": at(180), "interval_s": 120.0, "value": 300_000.0, "kind": "forwarder"},
    ]
    assert self_metrics.to_pylist() == [{"n": 0}]
    assert summary == {
        "host": "fwd1",
        "folders": 3,
        "batches": 3,
        "skipped": 0,
        "metrics": n_metrics,
        "server_samples": n_samples,
        "source_failures": {},
    }

    again = run_cli(*args)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == {
        **summary,
        "batches": 0,
        "skipped": 3,
        "metrics": 0,
        "server_samples": 0,
    }
    with DuckDBStore(db, create=False) as store:
        assert store.query("SELECT count(*) AS n FROM metrics").to_pylist()[0]["n"] == n_metrics


def test_bad_folder_name_is_a_clean_error(tmp_path: Path) -> None:
    captures = make_dir(tmp_path / "captures")
    (captures / "yesterday").mkdir()
    db = tmp_path / "s.duckdb"
    res = run_cli("import", "lustre", str(captures), "--db", str(db))
    assert res.returncode == 2
    assert "error:" in res.stderr and "yesterday" in res.stderr and "ISO-8601" in res.stderr
    assert "Traceback" not in res.stderr
    assert not db.exists()  # nothing was loaded, not even half the folders


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("1709294400", T0),
        ("1709294400.5", T0 + 0.5),
        ("2024-03-01T12:00:00Z", T0),
        ("20240301T120000Z", T0),
        ("2024-03-01T14:00:00+02:00", T0),
        ("2024-03-01T12:00:00", T0),  # no offset: UTC
        ("2024-03-01", None),  # a date alone is not a sample time
        ("snapshot-1", None),
        ("2024-13-01T12:00:00Z", None),
        ("", None),
    ],
)
def test_folder_time(name: str, expected: float | None) -> None:
    assert folder_time(name) == expected


def test_samples_sort_by_time_and_reject_duplicates(tmp_path: Path) -> None:
    for name in ("1709294460", "2024-03-01T12:00:00Z", ".snapshot"):
        (tmp_path / name).mkdir()
    assert [s.time for s in find_samples(tmp_path)] == [T0, T0 + 60]
    (tmp_path / "20240301T120100Z").mkdir()
    with pytest.raises(InputError, match="same time as"):
        find_samples(tmp_path)


def test_empty_dir_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no sample folders"):
        find_samples(tmp_path)


def test_host_from_capture_role_to_sources_and_failures_counted(tmp_path: Path) -> None:
    captures = make_dir(tmp_path / "captures")
    for name, *_ in FOLDERS:
        hostname = captures / name / "proc/sys/kernel/hostname"
        hostname.parent.mkdir(parents=True)
        hostname.write_text("lrouter3\n")
    (captures / FOLDERS[1][0] / LNET_STATS).write_text("truncated\n")
    replay = Replay(captures, role="router")
    batches = [b for _s, b in replay.batches()]
    assert replay.host == "lrouter3"
    assert replay.failures() == {"lnet_router": 1}
    last = batches[-1].metrics.to_pylist()
    kinds = {m["kind"] for m in last if m["component_id"] == "lrouter3"}
    assert kinds == {"router"}
    # The unreadable middle folder breaks nothing: the last one rates against the first.
    route = [m for m in last if m["metric"] == "route_bytes"]
    assert route[0]["value"] == pytest.approx(42_000_000 / 180)
    assert batches[0].key == f"agent:lrouter3:{T0 * 1_000_000}"
