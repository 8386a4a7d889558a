"""A real Prometheus scrapes a real `iolens serve` and answers PromQL with the store's figures.

The store is a short simulation loaded through the ingest path, cut at the moment its
busiest OST was busiest (the state a live server would hold then). Prometheus (Debian's
`prometheus`, `scripts/bootstrap.sh --test`) scrapes `/metrics/site` every second with the
metrics token from `[web.metrics] token_file`, as `docs/monitoring.md` tells a site to,
and once more without it (refused), and the public `/metrics`.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from iolens.simulate import SimConfig, simulate
from iolens.store import DuckDBStore
from tests.loopback import free_port, start_server, stop

PROMETHEUS = shutil.which("prometheus")
TOKEN = "scrape-9f8e7d6c5b4a"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        PROMETHEUS is None,
        reason="Prometheus is not installed (Debian: apt-get install prometheus; "
        "scripts/bootstrap.sh --test installs it)",
    ),
]

CONFIG = """\
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: iolens
    metrics_path: /metrics/site
    authorization:
      type: Bearer
      credentials_file: {token_file}
    static_configs:
      - targets: ["127.0.0.1:{port}"]
  - job_name: iolens-anonymous
    metrics_path: /metrics/site
    static_configs:
      - targets: ["127.0.0.1:{port}"]
  - job_name: iolens-server
    static_configs:
      - targets: ["127.0.0.1:{port}"]
"""


def _store_at_busiest_moment(path: Path) -> dict[str, Any]:
    """Simulate, then keep only the samples up to the busiest OST sample; return that row."""
    sim = simulate(SimConfig(nodes=128, hours=0.25, seed=1))
    with DuckDBStore(path) as store:
        sim.load(store)
        busiest = store.query(
            "SELECT component_id, ts, interval_s, read_bytes, write_bytes FROM server_samples "
            "WHERE kind = 'ost' AND job_id IS NULL "
            "ORDER BY read_bytes + write_bytes DESC, component_id LIMIT 1"
        ).to_pylist()[0]
        store.execute("DELETE FROM server_samples WHERE ts > ?", [busiest["ts"]])
    assert busiest["read_bytes"] + busiest["write_bytes"] > 0
    return busiest


def _query(prom: str, promql: str) -> list[dict[str, Any]]:
    res = httpx.get(f"{prom}/api/v1/query", params={"query": promql}, timeout=10)
    res.raise_for_status()
    body = res.json()
    assert body["status"] == "success", body
    return body["data"]["result"]


def _wait(prom: str, promql: str, log: Path, timeout: float = 60) -> list[dict[str, Any]]:
    """The first non-empty answer to `promql`, scrapes permitting."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if found := _query(prom, promql):
                return found
        except httpx.HTTPError:
            pass  # Prometheus still starting
        time.sleep(0.5)
    raise AssertionError(f"no answer to {promql} in {timeout} s:\n{log.read_text()[-3000:]}")


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    """(Prometheus URL, the busiest OST's sample, Prometheus' log)."""
    tmp_path = tmp_path_factory.mktemp("prometheus")
    busiest = _store_at_busiest_moment(tmp_path / "site.duckdb")
    token_file = tmp_path / "metrics.token"
    token_file.write_text(TOKEN + "\n")
    web = tmp_path / "web.toml"
    web.write_text(f'[web.metrics]\ntoken_file = "{token_file}"\ncache_s = 1\n')
    port = free_port()
    server = start_server(
        tmp_path / "site.duckdb", port, tmp_path / "serve.log", "--web-config", str(web),
        "--analyze-every", "0", "--components-every", "0",
    )  # fmt: skip
    config = tmp_path / "prometheus.yml"
    config.write_text(CONFIG.format(token_file=token_file, port=port))
    prom_port = free_port()
    log = tmp_path / "prometheus.log"
    with open(log, "wb") as out:
        prom = subprocess.Popen(
            [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
             f"--web.listen-address=127.0.0.1:{prom_port}"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        yield f"http://127.0.0.1:{prom_port}", busiest, log
    finally:
        prom.terminate()
        try:
            prom.wait(timeout=30)
        except subprocess.TimeoutExpired:
            prom.kill()
            prom.wait()
        stop(server)


def test_prometheus_answers_an_osts_throughput_as_the_store_says(scraped):
    prom, busiest, log = scraped
    ost = busiest["component_id"]
    sel = f'{{job="iolens",kind="ost",component="{ost}"}}'
    for metric, column in (("write", "write_bytes"), ("read", "read_bytes")):
        found = _wait(prom, f"iolens_component_{metric}_bytes_per_second{sel}", log)
        assert len(found) == 1
        got = float(found[0]["value"][1])
        assert got == pytest.approx(busiest[column] / busiest["interval_s"], rel=1e-9), metric
    # The whole file system's throughput is a sum over OSTs, as a dashboard computes it.
    total = _wait(prom, 'sum(iolens_component_write_bytes_per_second{kind="ost"})', log)
    assert float(total[0]["value"][1]) >= busiest["write_bytes"] / busiest["interval_s"]
    assert float(_wait(prom, 'iolens_site_scrape_success{job="iolens"}', log)[0]["value"][1]) == 1
    jobs = _wait(prom, 'count(iolens_job_write_bytes_per_second{job="iolens"})', log)
    assert float(jobs[0]["value"][1]) >= 2  # at least one job, plus the _other/_untagged rows


def test_prometheus_without_the_token_is_refused_and_server_counters_stay_public(scraped):
    prom, _, log = scraped
    _wait(prom, "up", log)
    deadline = time.monotonic() + 30
    while True:  # each target answers `up` after its first scrape
        up = {r["metric"]["job"]: float(r["value"][1]) for r in _query(prom, "up")}
        if len(up) == 3 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert up == {"iolens": 1.0, "iolens-anonymous": 0.0, "iolens-server": 1.0}
    targets = httpx.get(f"{prom}/api/v1/targets", timeout=10).json()["data"]["activeTargets"]
    refused = [t for t in targets if t["labels"]["job"] == "iolens-anonymous"]
    assert "401" in refused[0]["lastError"]
    assert _wait(prom, 'process_cpu_seconds_total{job="iolens-server"}', log)
    assert not _query(prom, '{job="iolens-server", __name__=~"iolens_component_.*"}')
