"""What the terminal shows (issue 23), with the real CLI on a small real simulation:
progress that advances step by step, plain progress lines when stderr is not a terminal
(a log, a pipe: `run_cli` captures it), `advise` on an unknown application failing with
a message, and `load` giving an MDS hour one level and a percentage that agree."""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from iolens.analyze.pipeline import analyze_jobs
from iolens.store import DuckDBStore
from tests.conftest import run_cli

LINE = re.compile(
    r"^iolens: (?P<what>.+?)(?: (?P<done>[\d,]+)/(?P<total>[\d,]+) \(\d+ %\))?, \d+ s"
)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, str]:
    """`iolens simulate --json` of 16 nodes for half an hour, its stderr captured (not a
    terminal), lines every 0.3 s: (store, its JSON summary, its stderr)."""
    db = tmp_path_factory.mktemp("terminal") / "small.duckdb"
    env = {**os.environ, "IOLENS_PROGRESS_EVERY": "0.3"}
    res = run_cli(
        "simulate", "--db", str(db), "--nodes", "16", "--hours", "0.5", "--seed", "4", "--json",
        env=env,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    return db, json.loads(res.stdout), res.stderr


def _counts(stderr: str) -> dict[str, list[tuple[int, int]]]:
    """(done, total) per step, in the order printed."""
    out: dict[str, list[tuple[int, int]]] = {}
    for line in stderr.splitlines():
        m = LINE.match(line)
        assert m, f"not a progress line: {line!r}"
        if m["total"]:
            done, total = (int(m[k].replace(",", "")) for k in ("done", "total"))
            out.setdefault(m["what"], []).append((done, total))
    return out


def test_progress_goes_to_a_log_as_plain_lines_that_advance(small):
    _db, summary, stderr = small
    assert stderr, "a 10-s command printed nothing on a captured stderr"
    counts = _counts(stderr)
    ingest = counts["ingesting"]
    # it advanced while it ran: counts between 0 and the total, never going back
    assert any(0 < d < t for d, t in ingest), ingest
    assert [d for d, _ in ingest] == sorted(d for d, _ in ingest)
    assert ingest[-1][0] == ingest[-1][1]  # its last line: all batches
    # the analysis ends on every job the simulation made
    rules = counts["analysing jobs: checking rules"]
    assert rules[-1] == (summary["jobs"], summary["jobs"])


def test_a_quick_command_prints_no_progress(small):
    db, _, _ = small
    res = run_cli("jobs", "--db", str(db), "--json", env={**os.environ})
    assert res.returncode == 0 and res.stderr == ""


def test_analysis_steps_advance_per_job(small, tmp_path):
    """The bar's callback sees each report built, then the bulk diagnosis, then each job's
    rules: it does not sit at 0/N until the end."""
    db, summary, _ = small
    copy = tmp_path / "copy.duckdb"
    shutil.copyfile(db, copy)
    if Path(f"{db}.wal").exists():
        shutil.copyfile(f"{db}.wal", f"{copy}.wal")
    seen: list[tuple[str, int, int]] = []
    step: Callable[[str, int, int], None] = lambda *a: seen.append(a)  # noqa: E731
    with DuckDBStore(copy) as store:
        ids = store.query("SELECT job_id FROM jobs ORDER BY job_id").column("job_id").to_pylist()
        analyze_jobs(store, ids, on_step=step)
    n = len(ids)
    assert n == summary["jobs"] and n > 1
    built = [d for s, d, t in seen if s == "building reports"]
    rules = [d for s, d, t in seen if s == "checking rules"]
    assert built == list(range(1, n + 1)) and rules == list(range(1, n + 1))
    stages = [s for s, _, _ in seen]
    assert stages.index("phases and interference") > stages.index("building reports")
    assert stages.index("checking rules") > stages.index("phases and interference")


def test_advise_on_an_unknown_application_fails_naming_it(small):
    db, _, _ = small
    apps = sorted({j["app"] for j in json.loads(run_cli("jobs", "--db", str(db), "--json").stdout)})
    for args in (("advise", "no-such-app"), ("advise", "no-such-app", "--json")):
        res = run_cli(*args, "--db", str(db))
        assert res.returncode != 0, args
        assert res.stdout == "", args  # nothing for a --json reader to take for an answer
        assert "no application 'no-such-app'" in res.stderr and apps[0] in res.stderr
        assert "Traceback" not in res.stderr
    known = run_cli("advise", apps[0], "--db", str(db), "--json")
    assert known.returncode == 0, known.stderr
    assert json.loads(known.stdout)["app"] == apps[0]


LEVELS = {"high": (0.9, float("inf")), "mid": (0.5, 0.9), "low": (0.1, 0.5), "idle": (0, 0.1)}


def test_load_gives_an_mds_hour_one_level_and_a_matching_percentage(small):
    db, _, _ = small
    res = run_cli("load", "--db", str(db), "--json")
    assert res.returncode == 0, res.stderr
    view = json.loads(res.stdout)
    cells = view["kinds"]["mds"]["cells"]
    mdts = {c["component_id"] for c in cells}
    assert len(mdts) == 1, mdts  # one MDT: its cells and the MDS hours are the same thing
    by_hour = {c["hour"]: c for c in cells}
    bins = view["mds"]["bins"]
    assert bins
    for b in bins:
        cell = by_hour[b["start"]]
        assert b["level"] == cell["level"], (b, cell)
        assert b["peak_load"] == pytest.approx(cell["load"], rel=1e-9), (b, cell)
        lo, hi = LEVELS[b["level"]]
        # the level's range holds the percentage shown ("idle" next to 101 % cannot happen)
        assert lo <= round(b["peak_load"], 9) and (b["peak_load"] <= hi or b["level"] == "high")
    table = run_cli("load", "--db", str(db))
    for b in bins:
        pct = f"{100 * b['peak_load']:.0f}% {b['level']}"
        assert pct in table.stdout, (pct, table.stdout[-800:])
