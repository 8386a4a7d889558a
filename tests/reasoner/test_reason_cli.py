"""`iolens reason` on a stored job traced for real (one process of six slowed), and the
site TOML choosing the reasoner's plug-ins."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import run_cli
from tests.reasoner.conftest import NODES
from tests.reasoner.jobrun import SLOW_N, needs_nodes
from tests.reasoner.test_reasoner_traced import activities, host_wide
from tests.tracer.conftest import needs_cc

pytestmark = [needs_cc, needs_nodes]


def test_reason_json_names_the_slowed_process(stored: Path, one_slow) -> None:
    spool, procs = one_slow
    _, pids = activities(spool)
    res = run_cli("reason", "reason-job", "--json", "--db", str(stored))
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    slowed = next(p for p in procs if p.slowed)
    pid = pids[str(slowed.data)]
    assert got["nodes"] == len(NODES) and got["processes"] >= 6
    hit = [
        a
        for a in got["anomalies"]
        if any(e["pid"] == pid and e["node"] == "n2" for e in a["episodes"])
        and a["calls"] >= SLOW_N - 2
        and not host_wide(a, {"n2"})
    ]
    assert len(hit) == 1 and hit[0]["verdict"] == "process-local"
    assert hit[0]["where"].startswith(f"n2 pid {pid}")
    assert len(hit[0]["forwarded"]) == 32  # the default ring
    table = run_cli("reason", "reason-job", "--db", str(stored))
    assert table.returncode == 0 and f"n2 pid {pid}" in table.stdout


def test_unknown_job_is_one_line(stored: Path) -> None:
    res = run_cli("reason", "nope", "--db", str(stored))
    assert res.returncode != 0 and "job nope is not in" in res.stderr
    assert "Traceback" not in res.stderr


def test_site_config_picks_detectors_and_ring(stored: Path, tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text(
        "[retention]\nfull_days = 3\n\n[reasoner]\nring = 4\n\n"
        "[reasoner.detectors.throughput]\nk = 8\n"
    )
    res = run_cli("reason", "reason-job", "--json", "--db", str(stored), "--site-config", str(site))
    assert res.returncode == 0, res.stderr
    anoms = json.loads(res.stdout)["anomalies"]
    assert anoms and all(len(a["forwarded"]) == 4 for a in anoms)
    # only the throughput plug-in ran: every finding is its
    assert {w["detector"] for a in anoms for w in a["what"]} == {"throughput"}


def test_unknown_detector_names_file_and_plugin(stored: Path, tmp_path: Path) -> None:
    site = tmp_path / "site.toml"
    site.write_text("[reasoner.detectors.histogramm]\n")
    res = run_cli("reason", "reason-job", "--db", str(stored), "--site-config", str(site))
    assert res.returncode == 2
    err = res.stderr.strip()
    assert str(site) in err and "histogramm" in err and "latency" in err
    assert "Traceback" not in err
