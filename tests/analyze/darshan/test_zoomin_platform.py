"""Platform view (correlation matrix) and application view (jobs by app and user)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from iolens.analyze.darshan.zoomin import factors_table, job_factors
from iolens.analyze.darshan.zoomin.platform import (
    PLATFORM_FACTORS,
    application_view,
    bw_class,
    correlation,
)
from tests.analyze.darshan.zoomin_logs import example, job

NAMES = [
    "example.darshan",
    "sample-badost.darshan",
    "dxt.darshan",
    "ior_hdf5_example.darshan",
    "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan",
    "noposix.darshan",
]


def rows() -> list[dict[str, object]]:
    return [job_factors(job(example(n))) for n in NAMES]


def test_correlation_is_pearson_like_numpy() -> None:
    rng = np.random.default_rng(4)
    n = 30
    size = rng.lognormal(20, 2, n)
    data = [
        {
            "job_id": str(i),
            "datasize": size[i],
            "nprocs": float(rng.integers(1, 512)),
            "small_pct": float(rng.uniform(0, 100)),
            "bandwidth": size[i] * rng.uniform(0.5, 2),
        }
        for i in range(n)
    ]
    cols = ["datasize", "nprocs", "small_pct", "bandwidth"]
    got = correlation(data, cols)
    want = np.corrcoef(np.array([[r[c] for c in cols] for r in data]).T)
    assert got["n"] == n and got["method"] == "pearson" and got["columns"] == cols
    assert np.allclose(np.array(got["matrix"], dtype=float), want)
    assert got["pairs"] == [[n] * 4] * 4


def test_missing_values_use_pairwise_jobs() -> None:
    data = [
        {"datasize": 1.0, "ost_count": 1.0, "bandwidth": 2.0},
        {"datasize": 2.0, "ost_count": None, "bandwidth": 3.0},
        {"datasize": 3.0, "ost_count": 4.0, "bandwidth": 7.0},
        {"datasize": 4.0, "ost_count": 2.0, "bandwidth": 5.0},
    ]
    got = correlation(data, ["datasize", "ost_count", "bandwidth"])
    m = got["matrix"]
    full = [r for r in data if r["ost_count"] is not None]
    want = np.corrcoef([r["ost_count"] for r in full], [r["bandwidth"] for r in full])[0, 1]
    assert m[1][2] == pytest.approx(want)
    assert m[0][2] == pytest.approx(np.corrcoef([1, 2, 3, 4], [2, 3, 7, 5])[0, 1])
    assert got["pairs"][1][2] == 3 and got["pairs"][0][2] == 4


def test_real_jobs_and_undefined_coefficients() -> None:
    """Real factor rows (and their Arrow table): weather is null everywhere, so its
    coefficients are undefined (None), not an error."""
    r = rows()
    got = correlation(factors_table(r))
    assert got["columns"] == list(PLATFORM_FACTORS) and got["n"] == len(NAMES)
    cols = got["columns"]
    i = cols.index("mds_cpu_pct")
    assert all(v is None for v in got["matrix"][i])
    a, b = cols.index("datasize"), cols.index("bandwidth")
    ok = [x for x in r if x["bandwidth"] is not None]
    want = np.corrcoef([x["datasize"] for x in ok], [x["bandwidth"] for x in ok])[0, 1]
    assert got["matrix"][a][b] == pytest.approx(want)
    assert got["matrix"][a][a] == pytest.approx(1.0)
    assert pd.DataFrame(r)["datasize"].notna().sum() == got["pairs"][a][a]


def test_bandwidth_classes() -> None:
    assert bw_class(5e8) == "(0, 1] GB/s"
    assert bw_class(1e9) == "(0, 1] GB/s"
    assert bw_class(2.5e10) == "(10, 100] GB/s"
    assert bw_class(3e11) == ">100 GB/s"
    assert bw_class(None) is None and bw_class(math.nan) is None


def test_application_view_groups_by_app_and_user() -> None:
    data = rows()
    data += [dict(data[0], job_id="x1", user="alice"), dict(data[0], job_id="x2", user="alice")]
    view = application_view(data)
    keys = [(g["app"], g["user"]) for g in view]
    assert len(keys) == len(set(keys))
    vpic = [g for g in view if g["app"] == "vpicio_uni"]
    assert [g["user"] for g in vpic] == ["alice", data[0]["user"]]  # bigger group first
    alice = vpic[0]
    assert alice["jobs"] == 2 and [r["job_id"] for r in alice["rows"]] == ["x1", "x2"]
    assert alice["classes"] == {"(10, 100] GB/s": 2}
    assert alice["rows"][0]["max_rank_io"] == pytest.approx(1 / 2048)
    assert sum(g["jobs"] for g in view) == len(data)
    only = application_view(data, app="ior")
    assert {g["app"] for g in only} == {"ior"}
