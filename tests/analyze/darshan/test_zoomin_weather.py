"""File-system weather in the 5 s before a job: OST traffic and OSS/MDS CPU from the store."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from iolens.analyze.darshan.zoomin.weather import ost_index, weather_before
from iolens.model.schema import COMPONENTS, METRICS, SERVER_SAMPLES
from iolens.store import DuckDBStore

T0 = datetime(2024, 3, 1, 12, 0, 0)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[DuckDBStore]:
    """Three OSTs (OSS oss0 serves 0 and 2, oss1 serves 1) sampled every 5 s, ending on T0,
    OST k moving (k + 1) MB per sample; oss0 30 % busy, oss1 10 %, the MDS 60 %."""
    s = DuckDBStore(tmp_path / "w.duckdb")
    samples, metrics = [], []
    for k in range(-6, 4):
        ts = T0 + timedelta(seconds=5 * k)
        for o in range(3):
            samples.append(
                {
                    "ts": ts,
                    "interval_s": 5.0,
                    "kind": "ost",
                    "component_id": f"lustre-OST{o:04x}",
                    "job_id": None,
                    "read_bytes": (o + 1) * 10**6,
                    "write_bytes": 0,
                }
            )
        # a job's own share must not count as weather
        samples.append(
            {
                "ts": ts,
                "interval_s": 5.0,
                "kind": "ost",
                "component_id": "lustre-OST0000",
                "job_id": "7",
                "read_bytes": 10**12,
                "write_bytes": 0,
            }
        )
        for host, kind, busy in (
            ("oss0", "oss", 30.0),
            ("oss1", "oss", 10.0),
            ("mds0", "mds", 60.0),
        ):
            for field, v in (
                ("user", busy * 0.6),
                ("system", busy * 0.4),
                ("idle", 100 - busy - 5),
                ("iowait", 5.0),
            ):
                metrics.append(
                    {
                        "ts": ts,
                        "interval_s": 5.0,
                        "kind": kind,
                        "component_id": host,
                        "job_id": None,
                        "metric": f"cpu_{field}_jiffies",
                        "value": v,
                    }
                )
    s.append("server_samples", pa.Table.from_pylist(samples, schema=SERVER_SAMPLES))
    s.append("metrics", pa.Table.from_pylist(metrics, schema=METRICS))
    s.append(
        "components",
        pa.Table.from_pylist(
            [
                {"component_id": f"lustre-OST{o:04x}", "kind": "ost", "parent": f"oss{o % 2}"}
                for o in range(3)
            ],
            schema=COMPONENTS,
        ),
    )
    yield s
    s.close()


def test_all_osts_and_servers(store: DuckDBStore) -> None:
    w = weather_before(store, T0)
    assert w == pytest.approx(
        {"oss_cpu_pct": 20.0, "mds_cpu_pct": 60.0, "ost_io_mb": 2.0, "osts": 3}
    )


def test_job_osts_by_darshan_index_pick_their_oss(store: DuckDBStore) -> None:
    w = weather_before(store, T0, osts=[1])
    assert w is not None
    assert w["ost_io_mb"] == pytest.approx(2.0) and w["oss_cpu_pct"] == pytest.approx(10.0)
    w = weather_before(store, T0, osts=["lustre-OST0000", 2])
    assert w is not None
    assert w["ost_io_mb"] == pytest.approx(2.0) and w["oss_cpu_pct"] == pytest.approx(30.0)


def test_samples_count_by_their_overlap_with_the_window(store: DuckDBStore) -> None:
    """A start 2.5 s into a sample: half of two samples each; a 10 s window: two samples."""
    w = weather_before(store, T0 + timedelta(seconds=2.5), osts=[0])
    assert w is not None and w["ost_io_mb"] == pytest.approx(1.0)
    w = weather_before(store, T0, osts=[0], window_s=10.0)
    assert w is not None and w["ost_io_mb"] == pytest.approx(2.0)


def test_no_data_is_none(store: DuckDBStore) -> None:
    assert weather_before(store, T0 - timedelta(days=1)) is None
    w = weather_before(store, T0, osts=[99])
    assert w is not None and w["ost_io_mb"] is None  # CPU is known, that OST is not


def test_ost_index() -> None:
    assert ost_index("lustre-OST000a") == 10
    assert ost_index("scratch-OST0100") == 256
    assert ost_index("oss3") is None
