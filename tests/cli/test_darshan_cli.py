"""`iolens darshan LOG...`: a store-free diagnosis of one log or of one job's logs (issue 21).

Run the way a user runs it (`python -m iolens darshan ...`, a fresh process), on real logs
of ../shared/data/darshan-logs (skipped when absent). What it reports is checked against
the rules run in-process on the same log (`analyze.darshan.diagnose`, what `iolens import
darshan` stores) and against PyDarshan's counters; damaged logs must give one `error:`
line naming the file, exit status 2 and no traceback.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import darshan
import pytest

from iolens.analyze.darshan import diagnose
from iolens.ingest.darshan_reader import read_log
from tests.conftest import SHARED_DATA, run_cli

LOGS = SHARED_DATA / "darshan-logs"
HDF5 = LOGS / "hdf5_diagonal_write_only" / "hdf5_diagonal_write_half_ranks_dxt.darshan"
EMPTY = LOGS / "empty_log" / "empty_log.darshan"
DLIO = LOGS / "dlio_logs"
ABORT = Path(__file__).resolve().parents[1] / "ingest" / "data" / "darshan-crash"
ABORT = ABORT / "abort-namehash.darshan"
#: What a store-free one-log command must not load (the server's and the CLI's stack).
NOT_NEEDED = ("duckdb", "fastapi", "uvicorn", "typer", "pydantic", "jinja2", "sklearn",
              "scipy", "matplotlib", "rich")  # fmt: skip


def _need(p: Path) -> Path:
    if not p.exists():
        pytest.skip(f"{p} is not available")
    return p


def _json(*args: str) -> tuple[dict, subprocess.CompletedProcess[str]]:
    res = run_cli("darshan", *args, "--json")
    return json.loads(res.stdout), res


def _one_error_line(res: subprocess.CompletedProcess[str], path: Path, words: str) -> None:
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"error: {path}: ") and words in lines[0], lines[0]


def test_one_log_is_diagnosed_as_the_importer_diagnoses_it() -> None:
    log = _need(HDF5)
    got, res = _json(str(log))
    assert res.returncode == 0, res.stderr
    assert got["failed"] == []
    (job,) = got["jobs"]
    ref = read_log(log)
    assert job["job_id"] == ref.job_id and job["uid"] == ref.uid  # a number, never a name
    expected = {f.code: f.severity for f in diagnose(ref)}
    assert {f["code"]: f["severity"] for f in job["findings"]} == expected
    order = [["critical", "warning", "info"].index(f["severity"]) for f in job["findings"]]
    assert order == sorted(order)  # most severe first
    assert all(f["logs"] == 1 and f["title"] and f["recommendation"] for f in job["findings"])
    # the bytes are Darshan's own (POSIX, the layer that reaches the files), per PyDarshan
    rep = darshan.DarshanReport(str(log), read_all=False)
    rep.mod_read_all_records("POSIX")
    posix = rep.records["POSIX"].to_df()["counters"]
    assert job["bytes_written"] == posix["POSIX_BYTES_WRITTEN"].sum()
    assert job["bytes_read"] == posix["POSIX_BYTES_READ"].sum()
    (one,) = job["logs"]
    assert one["path"] == str(log) and one["modules"]["DXT_POSIX"]["records"] > 0
    assert one["bandwidth"] == pytest.approx(one["factors"]["bandwidth"])


def test_a_jobs_logs_are_one_diagnosis_with_each_finding_once() -> None:
    """DLIO's 24 logs of job 3116902 (one per Python process) gave 158 findings stored one
    per log; here they are one job, each finding once with the count of its logs."""
    logs = sorted(_need(DLIO).glob("*.darshan"))
    got, res = _json(str(DLIO))
    assert res.returncode == 0, res.stderr
    (job,) = got["jobs"]
    assert job["job_id"] == "3116902" and len(job["logs"]) == len(logs) == 24
    per_log = [{f.code for f in diagnose(read_log(p))} for p in logs]
    codes = [f["code"] for f in job["findings"]]
    assert len(codes) == len(set(codes)) == len(set().union(*per_log))
    assert sum(len(c) for c in per_log) == sum(f["logs"] for f in job["findings"]) > len(codes)
    for f in job["findings"]:
        assert f["logs"] == sum(f["code"] in c for c in per_log), f["code"]


def test_a_jobs_io_time_is_its_slowest_process_never_the_sum_of_its_logs() -> None:
    """DLIO's 24 logs ran side by side (24 Python processes, all within 160 s): the job's
    I/O time is what its slowest process spent (7.3 s), not the logs' sum the HTML page
    showed (89 s: with more processes, more than the run), and its bandwidth is its bytes
    over that time."""
    got, res = _json(str(_need(DLIO)))
    assert res.returncode == 0, res.stderr
    (job,) = got["jobs"]
    per_log = [log["io_time_s"] for log in job["logs"]]
    assert max(per_log) <= job["io_time_s"] + 1e-9
    assert job["io_time_s"] <= job["run_time_s"]
    assert job["io_time_s"] == pytest.approx(max(per_log)) and sum(per_log) > 10 * max(per_log)
    moved = job["bytes_read"] + job["bytes_written"]
    assert job["bandwidth"]["bytes_per_s"] == pytest.approx(moved / job["io_time_s"])
    for log in job["logs"]:  # each log's line is self-consistent too
        if log["io_time_s"]:
            b = log["bytes_read"] + log["bytes_written"]
            assert log["bandwidth"] == pytest.approx(b / log["io_time_s"])


def test_human_output_and_html(tmp_path: Path) -> None:
    log = _need(HDF5)
    page = tmp_path / "r.html"
    res = run_cli("darshan", str(log), "--html", str(page))
    assert res.returncode == 0, res.stderr
    codes = [f.code for f in diagnose(read_log(log))]
    assert f"job {read_log(log).job_id}" in res.stdout
    assert all(c in res.stdout for c in codes)
    html = page.read_text()
    assert html.startswith("<!doctype html>") and all(f'id="{c}"' in html for c in codes)
    assert "<svg" in html  # request sizes and the covering set, drawn inline


def test_imports_only_what_a_log_needs(tmp_path: Path) -> None:
    """No DuckDB, web stack, typer/pydantic or rich in a `--json` run: a fresh process
    costs what reading and diagnosing the log costs. Once the library's binding is cached
    (by the first run), not PyDarshan's package or the C-header parser either."""
    log = _need(HDF5)
    env = {**os.environ, "IOLENS_CACHE_DIR": str(tmp_path)}
    for first in (True, False):
        res = subprocess.run(
            [sys.executable, "-X", "importtime", "-m", "iolens", "darshan", str(log), "--json"],
            capture_output=True, text=True, timeout=300, env=env,
        )  # fmt: skip
        assert res.returncode == 0, res.stderr[-2000:]
        loaded = {ln.split("|")[-1].strip() for ln in res.stderr.splitlines() if "|" in ln}
        assert not {m for m in loaded if m.split(".")[0] in NOT_NEEDED}
        assert "pandas" in loaded and "iolens.analyze.darshan" in loaded  # read and diagnosed
        assert "iolens.analyze.findings" not in loaded  # the job rules: no Darshan titles
        assert "iolens.analyze.jobreport" not in loaded  # nor the job report (savings)
        parsed = {"pycparser", "darshan"} & {m.split(".")[0] for m in loaded}
        assert parsed if first else not parsed, parsed


def test_empty_log_is_one_error_line() -> None:
    res = run_cli("darshan", str(_need(EMPTY)))
    _one_error_line(res, EMPTY, "empty Darshan log: no module data")


def test_truncated_missing_and_crashing_logs_are_one_error_line_each(tmp_path: Path) -> None:
    log = _need(HDF5)
    cut = tmp_path / "cut.darshan"
    cut.write_bytes(log.read_bytes()[: log.stat().st_size // 2])
    _one_error_line(run_cli("darshan", str(cut)), cut, "truncated Darshan log")
    missing = tmp_path / "gone.darshan"
    _one_error_line(run_cli("darshan", str(missing)), missing, "no such file")
    crash = tmp_path / "abort.darshan"
    shutil.copy(ABORT, crash)  # libdarshan-util fails an assertion (SIGABRT) on it
    _one_error_line(run_cli("darshan", str(crash)), crash, "libdarshan-util crashed (SIGABRT)")


def test_a_bad_log_beside_good_ones_fails_alone(tmp_path: Path) -> None:
    log = _need(HDF5)
    cut = tmp_path / "cut.darshan"
    cut.write_bytes(log.read_bytes()[:100])
    got, res = _json(str(log), str(cut))
    assert res.returncode == 2
    assert [len(j["logs"]) for j in got["jobs"]] == [1]
    assert [f["path"] for f in got["failed"]] == [str(cut)]
    assert res.stderr.strip().splitlines() == [f"error: {cut}: {got['failed'][0]['error']}"]


def test_a_failing_rule_costs_its_log_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rule's bug is that log's one error line, not a traceback that loses the others."""
    from iolens.present import darshan_logs

    def broken(path: Path, job: object) -> None:
        raise ZeroDivisionError("float division by zero")

    log = _need(HDF5)
    monkeypatch.setattr(darshan_logs, "diagnose_log", broken)
    jobs, failed = darshan_logs.diagnose_logs([log])
    assert jobs == [] and [e.source for e in failed] == [str(log)]
    assert failed[0].message.startswith("diagnosis failed (ZeroDivisionError")
