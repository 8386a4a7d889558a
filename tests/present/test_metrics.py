"""The exposition of `/metrics/site`: documented families, values, bounds, cache, failure."""

from __future__ import annotations

import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from prometheus_client.parser import text_string_to_metric_families

from iolens.model.schema import SERVER_SAMPLES
from iolens.present.metrics import (
    METRICS,
    MetricsConfig,
    SiteCollector,
    exposition,
    site_registry,
)
from iolens.store import DuckDBStore
from tests.present import site_store
from tests.present.site_store import MIB, T


@pytest.fixture
def path(tmp_path):
    return site_store.build(tmp_path / "s.duckdb")


class Reader:
    """Opens the store per read and counts reads, as the server's `Readers.reader` would."""

    def __init__(self, path, fail: bool = False) -> None:
        self.path, self.fail, self.reads = path, fail, 0

    @contextmanager
    def __call__(self):
        self.reads += 1
        if self.fail:
            raise OSError("disk gone")
        with DuckDBStore(self.path, create=False) as s:
            yield s


def scrape(collector: SiteCollector) -> dict[str, dict[tuple, float]]:
    text = exposition(site_registry(collector)).decode()
    out: dict[str, dict[tuple, float]] = {}
    for fam in text_string_to_metric_families(text):
        assert fam.type == "gauge" and fam.documentation, fam.name
        out[fam.name] = {tuple(sorted(s.labels.items())): s.value for s in fam.samples}
    return out


def test_every_family_is_declared_documented_and_typed(path):
    text = exposition(site_registry(SiteCollector(Reader(path)))).decode()
    for spec in METRICS:
        assert f"# HELP {spec.name} " in text and f"# TYPE {spec.name} gauge" in text
    names = {f.name for f in text_string_to_metric_families(text)}
    assert names == {s.name for s in METRICS}


def test_values_match_the_store(path):
    got = scrape(SiteCollector(Reader(path)))
    ost = (("component", "fs-OST0000"), ("kind", "ost"))
    assert got["iolens_component_read_bytes_per_second"][ost] == 10 * MIB
    assert got["iolens_component_write_requests_per_second"][ost] == 5.0
    assert got["iolens_component_service_time_seconds"][ost] == pytest.approx(1.5e-3)
    assert got["iolens_component_peak_bytes_per_second"][ost] == 6e8
    oss = (("component", "oss01"), ("kind", "oss"))
    assert got["iolens_component_queue_length"] == {oss: 3.5}
    assert got["iolens_component_wait_time_seconds"] == {oss: pytest.approx(2.5e-4)}
    mdt = (("component", "fs-MDT0000"), ("kind", "mdt"))
    assert got["iolens_component_metadata_ops_per_second"][mdt] == 50.0
    # Absent, not zero, where the source has no such figure (no bytes on an MDT).
    assert mdt not in got["iolens_component_read_bytes_per_second"]
    alice = (("job_id", "101"), ("user", "alice"))
    assert got["iolens_job_read_bytes_per_second"][alice] == 8 * MIB
    assert got["iolens_job_metadata_ops_per_second"][alice] == 15.0
    assert got["iolens_jobs_doing_io"] == {(): 5.0}
    storm = (("anomaly", "metadata_storm"), ("component", "fs-MDT0000"), ("kind", "mdt"),
             ("severity", "warning"))  # fmt: skip
    assert got["iolens_anomalies_active"][storm] == 1.0
    assert len(got["iolens_anomalies_active"]) == 2
    assert got["iolens_site_scrape_success"] == {(): 1.0}


def test_timestamps_are_unix_seconds_of_the_stored_utc(path):
    got = scrape(SiteCollector(Reader(path)))
    newest = got["iolens_samples_newest_timestamp_seconds"][()]
    assert newest == 1740996000.0  # 2025-03-03T10:00:00Z
    mdt = (("component", "fs-MDT0000"), ("kind", "mdt"))
    assert got["iolens_component_last_sample_timestamp_seconds"][mdt] == newest - 2


def test_job_series_stay_bounded_with_many_jobs(path):
    many = [
        {"ts": T, "interval_s": 10.0, "kind": "ost", "component_id": "fs-OST0000",
         "job_id": str(5000 + i), "read_bytes": (i + 1) * 4096, "write_bytes": 0,
         "read_ops": 1, "write_ops": 0}
        for i in range(500)
    ]  # fmt: skip
    with DuckDBStore(path, create=False) as s:
        s.append("server_samples", pa.Table.from_pylist(many, schema=SERVER_SAMPLES))
    got = scrape(SiteCollector(Reader(path), MetricsConfig(top_jobs=7)))
    series = got["iolens_job_read_bytes_per_second"]
    assert len(series) <= 2 * 7 + 2
    ids = {dict(k)["job_id"] for k in series}
    assert {"_other", "_untagged", "101"} <= ids
    assert got["iolens_jobs_doing_io"] == {(): 505.0}
    # Nothing is lost: the series add up to every job's bytes.
    total = sum(series.values()) + sum(got["iolens_job_write_bytes_per_second"].values())
    expected = (80 + 40 + 1 + 2 + 3) * MIB / 10 + sum((i + 1) * 4096 for i in range(500)) / 10
    assert total == pytest.approx(expected)
    # Only the declared labels, never a path.
    assert all(set(dict(k)) == {"job_id", "user"} for k in series)


def test_a_snapshot_is_reused_for_cache_s(path):
    reader = Reader(path)
    collector = SiteCollector(reader, MetricsConfig(cache_s=60))
    scrape(collector)
    with DuckDBStore(path, create=False) as s:
        s.execute("DELETE FROM server_samples")
    assert scrape(collector)["iolens_component_read_bytes_per_second"]  # cached
    assert reader.reads == 1
    fresh = SiteCollector(reader, MetricsConfig(cache_s=0))
    assert scrape(fresh)["iolens_component_read_bytes_per_second"] == {}
    assert reader.reads == 2


def test_new_samples_show_on_the_next_refresh(path):
    collector = SiteCollector(Reader(path), MetricsConfig(cache_s=0))
    scrape(collector)
    later = T + timedelta(seconds=10)
    row = {"ts": later, "interval_s": 10.0, "kind": "ost", "component_id": "fs-OST0000",
           "read_bytes": 0, "write_bytes": 30 * MIB, "read_ops": 0, "write_ops": 30}  # fmt: skip
    with DuckDBStore(path, create=False) as s:
        s.append("server_samples", pa.Table.from_pylist([row], schema=SERVER_SAMPLES))
    got = scrape(collector)
    ost = (("component", "fs-OST0000"), ("kind", "ost"))
    assert got["iolens_component_write_bytes_per_second"][ost] == 3 * MIB
    assert got["iolens_samples_newest_timestamp_seconds"][()] == 1740996010.0


def test_a_failing_store_says_so_and_exports_no_stale_values(path):
    reader = Reader(path)
    collector = SiteCollector(reader, MetricsConfig(cache_s=0))
    assert scrape(collector)["iolens_component_read_bytes_per_second"]
    reader.fail = True
    got = scrape(collector)
    assert got["iolens_site_scrape_success"] == {(): 0.0}
    assert got["iolens_component_read_bytes_per_second"] == {}


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool (Debian: prometheus) absent")
def test_promtool_finds_nothing_to_lint(path):
    text = exposition(site_registry(SiteCollector(Reader(path))))
    res = subprocess.run(["promtool", "check", "metrics"], input=text, capture_output=True)
    assert res.returncode == 0 and not res.stdout.strip(), res.stdout + res.stderr


def test_every_metric_and_setting_is_documented():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "monitoring.md").read_text()
    for spec in METRICS:
        row = next((line for line in doc.splitlines() if line.startswith(f"| `{spec.name}`")), "")
        assert row, f"{spec.name} has no row in docs/monitoring.md"
        assert row.split("|")[2].strip() == ", ".join(spec.labels), spec.name
    for name in MetricsConfig.model_fields:
        assert f"| `{name}` |" in doc, f"[web.metrics] {name} is not documented"


def test_concurrent_scrapes_read_the_store_once(path):
    reader = Reader(path)
    registry = site_registry(SiteCollector(reader, MetricsConfig(cache_s=60)))
    with ThreadPoolExecutor(8) as pool:
        texts = list(pool.map(lambda _: exposition(registry), range(16)))
    assert reader.reads == 1 and len(set(texts)) == 1
