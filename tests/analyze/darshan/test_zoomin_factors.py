"""Table I factors against figures computed independently from the logs' raw counters,
and the bandwidth against Darshan's own accumulator (libdarshan-util)."""

from __future__ import annotations

import importlib
import math
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from iolens.analyze.darshan.zoomin import FACTORS, factors_table, job_factors
from iolens.analyze.darshan.zoomin.factors import io_time, ost_load
from iolens.analyze.darshan.zoomin.records import STREAMS, data_records
from iolens.model.darshan import DarshanJob
from iolens.model.schema import JOB_FACTORS
from tests.analyze.darshan.zoomin_logs import example, job, shared

#: PyDarshan's binding of libdarshan-util: Darshan's own accumulator is the ground truth.
backend = importlib.import_module("darshan.backend.cffi_backend")

EXAMPLE_LOGS = [
    "example.darshan",
    "sample-badost.darshan",
    "dxt.darshan",
    "ior_hdf5_example.darshan",
    "shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan",
    "noposix.darshan",
]
SHARED_LOGS = [
    ("darshan-logs-generated", "ior-dxt-1m.darshan"),
    ("darshan-logs-generated", "mdtest-20k.darshan"),
    ("darshan-logs-generated", "micro-posix.darshan"),
    ("darshan-logs", "apmpi_apxc", "mpi-io-test.darshan"),
    (
        "darshan-logs",
        "dlio_logs",
        "snyder_python3_id3116902-2110483_12-19-66980-15861026832475351160_1.darshan",
    ),
    ("darshan-logs", "hdf5_diagonal_write_only", "hdf5_diagonal_write_bytes_range_dxt.darshan"),
    ("darshan-logs", "release_logs", "mpi-io-test-x86_64-3.5.0.darshan"),
    ("darshan-logs", "release_logs", "mpi-io-test-ppc64-3.0.0.darshan"),
]


def _log(spec: str | tuple[str, ...]) -> Path:
    return example(spec) if isinstance(spec, str) else shared(*spec)


ALL = EXAMPLE_LOGS + SHARED_LOGS


def _ids(spec: str | tuple[str, ...]) -> str:
    return spec if isinstance(spec, str) else spec[-1][:40]


# --- ground truth, from the raw counter frames with plain loops ----------------------


def _is_stream(j: DarshanJob, rid: int) -> bool:
    return j.names.get(int(rid), "") in STREAMS


def truth(j: DarshanJob) -> dict[str, float | None]:
    mods = [m for m in ("POSIX", "STDIO") if j.has(m)] or (["MPI-IO"] if j.has("MPI-IO") else [])
    pre = {"POSIX": "POSIX", "STDIO": "STDIO", "MPI-IO": "MPIIO"}
    size = 0.0
    meta = total = 0.0
    per_rank: dict[int, float] = {}
    any_shared = False
    for m in mods:
        c, f = j.counters(m).to_dict("records"), j.fcounters(m).to_dict("records")
        p = pre[m]
        for rc, rf in zip(c, f, strict=True):
            if _is_stream(j, rc["id"]):
                continue
            b = max(rc[f"{p}_BYTES_READ"], 0) + max(rc[f"{p}_BYTES_WRITTEN"], 0)
            size += b
            mt = max(rf[f"{p}_F_META_TIME"], 0.0)
            meta += mt
            total += mt + max(rf[f"{p}_F_READ_TIME"], 0.0) + max(rf[f"{p}_F_WRITE_TIME"], 0.0)
            if rc["rank"] < 0:
                any_shared = True
            else:
                per_rank[rc["rank"]] = per_rank.get(rc["rank"], 0.0) + b
    out: dict[str, float | None] = {
        "datasize": size,
        "nprocs": float(j.nprocs),
        "mtime_pct": 100.0 * meta / total if total > 0 else None,
    }
    mp = j.counters("MPI-IO").to_dict("records")
    coll = sum(
        max(r.get(k, 0), 0)
        for r in mp
        for k in (
            "MPIIO_COLL_READS",
            "MPIIO_COLL_WRITES",
            "MPIIO_SPLIT_READS",
            "MPIIO_SPLIT_WRITES",
        )
    )
    out["collective"] = 1.0 if coll > 0 else 0.0
    osts: set[int] = set()
    if j.lustre is not None:
        for row in j.lustre.to_dict("records"):
            osts.update(int(o) for o in row["osts"])
    out["ost_count"] = float(len(osts)) if osts else None
    px = j.counters("POSIX").to_dict("records")
    if px:
        bins = [k for k in px[0] if k.startswith("POSIX_SIZE_")]
        small = sum(max(r[k], 0) for r in px for k in bins if k.endswith(("_0_100", "_100_1K")))
        allr = sum(max(r[k], 0) for r in px for k in bins)
        out["small_pct"] = 100.0 * small / allr if allr else None
        seq = sum(max(r["POSIX_SEQ_READS"], 0) + max(r["POSIX_SEQ_WRITES"], 0) for r in px)
        ops = sum(max(r["POSIX_READS"], 0) + max(r["POSIX_WRITES"], 0) for r in px)
        out["seq_pct"] = 100.0 * seq / ops if ops else None
    if not any_shared and per_rank and sum(per_rank.values()) > 0:
        out["max_rank_io"] = max(per_rank.values()) / sum(per_rank.values())
    return out


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


@pytest.mark.parametrize("spec", ALL, ids=_ids)
def test_factors_match_raw_counters(spec: str | tuple[str, ...]) -> None:
    j = job(_log(spec))
    got = job_factors(j)
    for key, want in truth(j).items():
        assert _close(got[key], want), (key, got[key], want)
    for key in ("max_rank_io", "max_rank_req", "max_ost_io", "max_ost_req"):
        v = got[key]
        assert v is None or 0.0 < v <= 1.0 + 1e-12, (key, v)
    assert got["oss_cpu_pct"] is None and got["mds_cpu_pct"] is None and got["ost_io_mb"] is None


@pytest.mark.parametrize("spec", ALL, ids=_ids)
def test_bandwidth_is_darshans_by_slowest_estimate(spec: str | tuple[str, ...]) -> None:
    """Over the POSIX module alone, our I/O time and bandwidth are Darshan's accumulator's
    (to 1e-6: we count the few negative clock-jitter durations of dxt.darshan as 0), except
    that the I/O time never exceeds the run (issue 21: dxt.darshan's single process holds
    11,218 s of metadata time in a 1,469-s run)."""
    j = job(_log(spec))
    if not j.has("POSIX"):
        pytest.skip("no POSIX module")
    acc = backend.accumulate_records(
        {"counters": j.counters("POSIX"), "fcounters": j.fcounters("POSIX")}, "POSIX", j.nprocs
    )
    dm = acc.derived_metrics
    recs = data_records(j, ("POSIX",))
    t = io_time(j, recs)
    want = min(dm.agg_time_by_slowest, j.run_time) if j.run_time > 0 else dm.agg_time_by_slowest
    assert math.isclose(t, want, rel_tol=1e-6, abs_tol=1e-12)
    if 0 < t < j.run_time:
        mib_s = float(recs["bytes"].sum()) / 2**20 / t
        assert math.isclose(mib_s, dm.agg_perf_by_slowest, rel_tol=1e-6)


def test_bandwidth_is_bytes_over_io_time() -> None:
    j = job(example("sample-badost.darshan"))
    f = job_factors(j)
    assert f["bandwidth"] == pytest.approx(f["datasize"] / io_time(j))
    # the OST-14 straggler holds the job: its slowest rank spent 778.5 s in POSIX calls
    assert io_time(j, data_records(j, ("POSIX",))) == pytest.approx(778.49, abs=0.01)


def test_shared_records_use_fastest_and_slowest_rank_bytes() -> None:
    """MACSio's shared files: rank 0 is the slowest rank of all three and moves ~98 %."""
    j = job(example("shane_macsio_id29959_5-22-32552-7035573431850780836_1590156158.darshan"))
    c = j.counters("POSIX")
    assert (c["rank"] == -1).all() and (c["POSIX_SLOWEST_RANK"] == 0).all()
    total = float((c["POSIX_BYTES_READ"] + c["POSIX_BYTES_WRITTEN"]).sum())
    rank0 = float(c["POSIX_SLOWEST_RANK_BYTES"].sum())
    assert job_factors(j)["max_rank_io"] == pytest.approx(rank0 / total)


def test_shared_file_balanced_over_2048_ranks() -> None:
    f = job_factors(job(example("example.darshan")))
    assert f["max_rank_io"] == pytest.approx(1 / 2048)
    assert f["collective"] == 1.0
    assert f["ost_count"] == 24
    # one 2 TB file over 24 stripes of 1 MiB: every OST holds 1/24 of it, to one stripe
    assert f["max_ost_io"] == pytest.approx(1 / 24, rel=1e-5)


def test_ost_distribution_of_single_stripe_files() -> None:
    """sample-badost: 2048 single-OST files; per-OST bytes are exact sums of their files."""
    j = job(example("sample-badost.darshan"))
    c = j.counters("POSIX")
    lay = j.lustre.drop_duplicates("id").set_index("id")["osts"]
    want: dict[int, float] = {}
    for rid, b in zip(c["id"], c["POSIX_BYTES_WRITTEN"] + c["POSIX_BYTES_READ"], strict=True):
        o = int(lay[rid][0])
        want[o] = want.get(o, 0.0) + float(b)
    got = ost_load(j).set_index("ost")["bytes"].to_dict()
    assert got.keys() == want.keys()
    for o in want:
        assert got[o] == pytest.approx(want[o])
    f = job_factors(j)
    assert f["max_ost_io"] == pytest.approx(max(want.values()) / sum(want.values()))


def test_small_file_lands_on_its_first_ost() -> None:
    """A file smaller than one stripe has all its bytes on the first OST of its layout."""
    j = job(example("example.darshan"))
    c = j.modules["POSIX"].counters
    c.loc[:, "POSIX_MAX_BYTE_WRITTEN"] = 1000  # as if the file were 1 kB
    first = int(j.lustre["osts"].iloc[0][0])
    o = ost_load(j)
    assert o.set_index("ost")["bytes"][first] == pytest.approx(float(o["bytes"].sum()))


def test_nnodes_from_dxt_or_scheduler() -> None:
    with_dxt = job(example("ior_hdf5_example.darshan"))
    hosts = set(with_dxt.dxt["hostname"])
    assert job_factors(with_dxt)["nnodes"] == len(hosts)
    no_dxt = job(example("example.darshan"))
    assert job_factors(no_dxt)["nnodes"] is None
    assert job_factors(no_dxt, nodes=["nid1", "nid2", "nid2"])["nnodes"] == 2
    assert job_factors(no_dxt, nodes=512)["nnodes"] == 512


def test_weather_is_passed_through() -> None:
    w = {"oss_cpu_pct": 12.5, "mds_cpu_pct": 59.0, "ost_io_mb": None}
    f = job_factors(job(example("example.darshan")), w)
    assert (f["oss_cpu_pct"], f["mds_cpu_pct"], f["ost_io_mb"]) == (12.5, 59.0, None)


def test_app_and_user() -> None:
    f = job_factors(job(example("example.darshan")))
    assert f["app"] == "vpicio_uni" and f["user"] == str(job(example("example.darshan")).uid)
    assert job_factors(job(example("example.darshan")), user="alice", app="vpic")["user"] == "alice"


def test_empty_log_gives_nulls_not_errors() -> None:
    j = job(shared("darshan-logs", "empty_log", "empty_log.darshan"))
    f = job_factors(j)
    assert f["datasize"] == 0.0 and f["bandwidth"] is None and f["max_rank_io"] is None


def test_factors_table_matches_schema() -> None:
    rows = [job_factors(job(example(n))) for n in EXAMPLE_LOGS]
    t = factors_table(rows)
    assert t.schema.equals(JOB_FACTORS)
    assert t.num_rows == len(rows)
    assert set(FACTORS) | {"job_id", "user", "app", "bandwidth", "computed"} == set(t.column_names)
    assert t.column("computed").null_count == 0
    got = t.column("datasize").to_pylist()
    assert got == [r["datasize"] for r in rows]
    assert pa.compute.all(pa.compute.is_valid(t.column("job_id"))).as_py()


def test_factors_table_round_trips_through_the_store(tmp_path: Path) -> None:
    from iolens.store import DuckDBStore

    rows = [job_factors(job(example(n))) for n in EXAMPLE_LOGS[:3]]
    with DuckDBStore(tmp_path / "f.duckdb") as store:
        store.append("job_factors", factors_table(rows))
        back = store.query("SELECT job_id, datasize, max_rank_io FROM job_factors").to_pylist()
    assert sorted(r["job_id"] for r in back) == sorted(r["job_id"] for r in rows)
    by = {r["job_id"]: r for r in back}
    for r in rows:
        assert by[r["job_id"]]["datasize"] == r["datasize"]
        assert np.isclose(by[r["job_id"]]["max_rank_io"], r["max_rank_io"])
