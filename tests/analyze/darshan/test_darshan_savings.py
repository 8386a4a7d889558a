"""Every Darshan finding that recommends a change estimates the seconds it would save
(issue 22 part 4), checked on real logs against their own timing counters read here with
PyDarshan (not with the code under test): the saving never exceeds the time the fixed
cost takes the slowest rank, the range holds the estimate, core-hours follow from nprocs,
and `diagnose` and `iolens darshan --json` order the findings by the saving."""

from __future__ import annotations

import json
from pathlib import Path

import darshan
import pandas as pd
import pytest

from iolens.analyze.darshan import diagnose
from tests.analyze.darshan.zoomin_logs import example, job, shared
from tests.conftest import run_cli

MACSIO = "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"
EXAMPLE_LOGS = ["sample-badost.darshan", "example.darshan", "dxt.darshan",
                "ior_hdf5_example.darshan", MACSIO]  # fmt: skip
SHARED_LOGS = [
    ("darshan-logs", "hdf5_diagonal_write_only", "hdf5_diagonal_write_half_ranks_dxt.darshan"),
]
PREFIX = {"POSIX": "POSIX", "MPI-IO": "MPIIO", "STDIO": "STDIO"}


def _logs() -> list[Path]:
    return [example(n) for n in EXAMPLE_LOGS]


def cost_bound(path: Path, module: str, kinds: list[str], run_time: float) -> float:
    """The most time the cost can take the job, from PyDarshan's records: per rank, the
    `kinds` seconds of its own records (the slowest rank's), plus every shared record's
    slowest-rank time whole; never more than the run time."""
    rep = darshan.DarshanReport(str(path), read_all=False)
    rep.mod_read_all_records(module)
    fc: pd.DataFrame = rep.records[module].to_df()["fcounters"]
    p = PREFIX[module]
    t = fc[[f"{p}_F_{k}_TIME" for k in kinds]].clip(lower=0).sum(axis=1)
    own = t[fc["rank"] >= 0].groupby(fc["rank"][fc["rank"] >= 0]).sum()
    sh = fc[fc["rank"] < 0]
    slow = f"{p}_F_SLOWEST_RANK_TIME"
    shared_s = float(sh[slow].clip(lower=0).sum()) if slow in sh else float(t[fc["rank"] < 0].sum())
    return min(run_time, float(own.max() if len(own) else 0.0) + shared_s)


def _check(path: Path) -> int:
    j = job(path)
    found = diagnose(j)
    secs = [f.gain["seconds"] if f.gain else -1.0 for f in found]
    order = [(f.code, s) for f, s in zip(found, secs, strict=True)]
    assert secs == sorted(secs, reverse=True), order
    n = 0
    for f in found:
        if f.gain is None:  # no saving: said why, or points to its root cause
            assert "saving" in f.evidence or "root_cause" in f.evidence, f.code
            continue
        g = f.gain
        lo, hi = g["range_s"]
        assert 0 <= lo <= g["seconds"] <= hi, (f.code, g)
        module, kinds = g["inputs"]["module"], g["inputs"]["times"].split("/")
        bound = cost_bound(path, module, kinds, float(j.run_time))
        assert hi <= bound * 1.005 + 1e-6, (path.name, f.code, hi, bound, g["model"])
        assert g["inputs"]["now_s"] <= bound * 1.005 + 1e-6, (f.code, g)
        assert g["cores"] == j.nprocs
        assert g["core_hours"] == pytest.approx(g["seconds"] * j.nprocs / 3600, rel=0.01)
        assert module in g["basis"] or PREFIX[module] in g["basis"], g["basis"]
        n += 1
    return n


def test_savings_on_the_example_logs_are_bounded_by_their_own_counters() -> None:
    assert sum(_check(p) for p in _logs()) >= 10  # most of these logs' findings get one


@pytest.mark.parametrize("parts", SHARED_LOGS)
def test_savings_on_shared_logs(parts: tuple[str, ...]) -> None:
    _check(shared(*parts))


def test_a_slow_ost_saves_most_of_the_data_time() -> None:
    """sample-badost: 2048 ranks writing through one slow OST; the rule's bandwidth factor
    (24.9x) applies to nearly all of the slowest rank's write time."""
    found = {f.code: f for f in diagnose(job(example("sample-badost.darshan")))}
    g = found["Z02"].gain
    bound = cost_bound(example("sample-badost.darshan"), "POSIX", ["READ", "WRITE"], 780.0)
    assert g["range_s"][1] > 0.9 * bound * (1 - 1 / 24.9)
    assert found["DP14"].gain is None and "recommends no change" in found["DP14"].evidence["saving"]


def test_iolens_darshan_json_orders_by_saving() -> None:
    res = run_cli("darshan", str(example("example.darshan")), "--json")
    assert res.returncode == 0, res.stderr
    found = json.loads(res.stdout)["jobs"][0]["findings"]
    secs = [(f["gain"] or {}).get("seconds", -1.0) for f in found]
    assert secs == sorted(secs, reverse=True) and secs[0] > 0, secs
