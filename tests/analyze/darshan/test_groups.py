"""The numpy per-group figures (`analyze.darshan.groups`) against the pandas groupby they
replaced: the same numbers, to the bit, on random frames with the edge cases (no rows,
one row, NaN, ties, rows out of group order)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from iolens.analyze.darshan import groups
from iolens.analyze.darshan.drishti.common import per_file
from iolens.analyze.darshan.expert.x03_serialised_access import OVERLAP_COLUMNS, overlaps
from iolens.analyze.darshan.zoomin.files import FILE_COLUMNS, file_stats, layouts
from iolens.analyze.darshan.zoomin.records import COLUMNS, empty_like
from iolens.model.darshan import DarshanJob

# --- the pandas versions, as they were -------------------------------------------------


def busy_by_pandas(frame: pd.DataFrame, keys: list[str]) -> pd.Series:
    if not len(frame):
        return pd.Series(dtype=float)
    f = frame.sort_values([*keys, "start"], kind="stable")
    code = f.groupby(keys, sort=False).ngroup().to_numpy()
    s = f["start"].to_numpy(float)
    e = np.maximum(f["end"].to_numpy(float), s)
    reach = pd.Series(e).groupby(code).cummax().to_numpy()
    new = np.r_[True, code[1:] != code[:-1]] | np.r_[False, s[1:] > reach[:-1]]
    starts = np.flatnonzero(new)
    ends = np.r_[starts[1:] - 1, len(s) - 1]
    length = pd.Series(reach[ends] - s[starts]).groupby(code[starts]).sum()
    index = f.iloc[np.flatnonzero(np.r_[True, code[1:] != code[:-1]])][keys]
    return pd.Series(length.to_numpy(), index=pd.MultiIndex.from_frame(index))


def overlaps_pandas(frame: pd.DataFrame) -> pd.DataFrame:
    ranks = frame.groupby(["id", "op"])["rank"].transform("nunique")
    frame = frame[ranks >= 2]
    if not len(frame):
        return pd.DataFrame(columns=OVERLAP_COLUMNS)
    g = frame.groupby(["id", "op"])
    out = pd.DataFrame(
        {
            "ranks": g["rank"].nunique(),
            "ops": g["count"].sum() if "count" in frame else g.size(),
            "busy": busy_by_pandas(frame, ["id", "op", "rank"]).groupby(level=["id", "op"]).sum(),
            "union": busy_by_pandas(frame, ["id", "op"]),
            "span": g["end"].max() - g["start"].min(),
        }
    )
    out["overlap"] = ((out["busy"] - out["union"]) / out["busy"]).where(out["busy"] > 0, 0.0)
    return out.reset_index()


def per_file_pandas(df: pd.DataFrame, values: dict[str, pd.Series], how: str) -> pd.DataFrame:
    return pd.DataFrame({"id": df["id"], **values}).groupby("id").agg(how)


def file_stats_pandas(job: DarshanJob, recs: pd.DataFrame) -> pd.DataFrame:
    if not len(recs):
        return pd.DataFrame(columns=list(FILE_COLUMNS))
    r = recs.copy()
    r["shared"] = r["rank"] < 0
    r["rank_time"] = np.where(r["shared"], r["slowest_time"], r["io_time"])
    for col in ("write_start", "read_start"):
        r[col] = r[col].where(r[col] > 0)
    g = r.groupby("id", sort=False)
    out = pd.DataFrame(
        {
            "bytes": g["bytes"].sum(),
            "bytes_read": g["bytes_read"].sum(),
            "bytes_written": g["bytes_written"].sum(),
            "requests": g["requests"].sum(),
            "io_time": g["rank_time"].max(),
            "max_byte": g["max_byte"].max(),
            "shared": g["shared"].any(),
            "nrank": g["rank"].nunique(),
            "write_start": g["write_start"].min(),
            "write_end": g["write_end"].max(),
            "read_start": g["read_start"].min(),
            "read_end": g["read_end"].max(),
        }
    ).reset_index()
    out["id"] = out["id"].astype(np.uint64)
    out[["write_start", "read_start"]] = out[["write_start", "read_start"]].fillna(0.0)
    out["ranks"] = np.where(out["shared"], max(job.nprocs, 1), out["nrank"]).astype(np.int64)
    out["size"] = np.where(out["max_byte"] > 0, out["max_byte"] + 1, 0).astype(np.int64)
    t = out["io_time"].to_numpy(dtype=float)
    b = out["bytes"].to_numpy(dtype=float)
    out["bandwidth"] = np.divide(b, t, out=np.full(len(t), np.nan), where=t > 0)
    out["path"] = [job.names.get(int(i), "") for i in out["id"]]
    out = out.merge(layouts(job), on="id", how="left")
    out["osts"] = [list(o) if isinstance(o, list | tuple | np.ndarray) else [] for o in out["osts"]]
    out["stripe_count"] = out["stripe_count"].astype("Int64")
    out["stripe_size"] = out["stripe_size"].astype("Int64")
    out = out.sort_values(["bytes", "io_time"], ascending=False, kind="stable")
    return out[list(FILE_COLUMNS)].reset_index(drop=True)


# --- random inputs -----------------------------------------------------------------------


def dxt_rows(rng: np.random.Generator, n: int, nan: bool, count: bool) -> pd.DataFrame:
    """DXT-like rows: few files, ranks and ops so that groups repeat; rounded times so
    that starts tie; some ends before their starts."""
    start = np.round(rng.random(n) * 10, int(rng.integers(0, 3)))
    end = start + np.round(rng.random(n) * rng.choice([0.1, 3.0]), 2) - (rng.random(n) < 0.1)
    if nan and n:
        start[rng.integers(0, n)] = np.nan
        end[rng.integers(0, n)] = np.nan
    f = pd.DataFrame(
        {
            "module": "DXT_POSIX",
            "rank": rng.integers(0, 4, n),
            "id": rng.integers(1, 4, n).astype(np.uint64),
            "op": pd.Series(rng.choice(["read", "write"], n), dtype="str"),
            "count": rng.integers(1, 5, n),
            "start": start,
            "end": end,
        }
    )
    return f if count else f.drop(columns="count")


@pytest.mark.parametrize("seed", range(3))
def test_overlaps_equal_the_pandas_groupby(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for trial in range(60):
        n = int(rng.choice([0, 1, 2, int(rng.integers(3, 40))]))
        f = dxt_rows(rng, n, nan=trial % 5 == 0, count=trial % 3 > 0)
        want, got = overlaps_pandas(f), overlaps(f)
        if not len(want):
            assert not len(got) and list(got.columns) == OVERLAP_COLUMNS
            continue
        want["op"] = want["op"].astype(object)
        got["op"] = got["op"].astype(object)
        pd.testing.assert_frame_equal(got, want, check_exact=True)


def test_one_rank_per_file_has_no_overlap_rows() -> None:
    f = pd.DataFrame(
        {
            "rank": [0, 0, 1],
            "id": np.array([1, 1, 2], np.uint64),
            "op": ["write", "write", "write"],
            "start": [0.0, 1.0, 0.0],
            "end": [1.0, 2.0, 1.0],
        }
    )
    assert not len(overlaps(f))
    assert not len(overlaps(f.iloc[:0]))


@pytest.mark.parametrize("seed", range(2))
def test_union_seconds_equals_the_pandas_busy_time(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    for trial in range(60):
        n = int(rng.choice([0, 1, int(rng.integers(2, 60))]))
        f = dxt_rows(rng, n, nan=trial % 4 == 0, count=True)
        want = busy_by_pandas(f, ["id", "rank"])
        o = np.lexsort((f["start"].to_numpy(), f["rank"].to_numpy(), f["id"].to_numpy()))
        s = groups.starts_of(f["id"].to_numpy()[o], f["rank"].to_numpy()[o])
        got = groups.union_seconds(
            groups.codes_of(s, n), f["start"].to_numpy()[o], f["end"].to_numpy()[o]
        )
        np.testing.assert_array_equal(got, want.to_numpy())


def test_running_max_restarts_per_group_and_skips_nan() -> None:
    v = np.array([3.0, 1.0, np.nan, 5.0, 2.0, 1.0, np.nan])
    code = np.array([0, 0, 0, 0, 1, 1, 2])
    want = pd.Series(v).groupby(code).cummax().to_numpy()
    np.testing.assert_array_equal(groups.running_max(v, code), want)
    assert not len(groups.running_max(np.zeros(0), np.zeros(0, np.intp)))


@pytest.mark.parametrize("seed", range(2))
def test_per_file_equals_the_pandas_groupby(seed: int) -> None:
    rng = np.random.default_rng(200 + seed)
    for trial in range(60):
        n = int(rng.choice([0, 1, int(rng.integers(2, 50))]))
        ids = rng.integers(1, 6, n).astype(np.uint64)
        if trial % 3 == 0:
            ids = np.sort(ids)  # pandas' other summing path: ids in order
        df = pd.DataFrame({"id": ids, "rank": rng.integers(-1, 4, n)})
        df.index = rng.permutation(n) + 7  # a frame filtered from a larger one
        floats = rng.random(n) * 10.0 ** rng.integers(-3, 4, n)
        if trial % 4 == 0 and n:
            floats[rng.integers(0, n)] = np.nan
        values = {
            "ints": pd.Series(rng.integers(0, 2**40, n), index=df.index),
            "floats": pd.Series(floats, index=df.index),
        }
        for how in ("sum", "max"):
            pd.testing.assert_frame_equal(
                per_file(df, values, how), per_file_pandas(df, values, how), check_exact=True
            )


def test_per_file_wants_the_records_index() -> None:
    df = pd.DataFrame({"id": np.array([1, 2], np.uint64)})
    with pytest.raises(ValueError):
        per_file(df, {"x": pd.Series([1, 2], index=[5, 6])})


@pytest.mark.parametrize("seed", range(2))
def test_file_stats_equal_the_pandas_groupby(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    job = DarshanJob("1", 0, "a.out", 8, pd.Timestamp(0), pd.Timestamp(0), 1.0)
    job.names = {1: "/lus/a", 2: "/lus/b", 3: "/home/c"}
    job.lustre = pd.DataFrame(
        {"id": [1, 2], "stripe_size": [2**20, 2**22], "stripe_count": [1, 4], "osts": [[0], [1, 2]]}
    )
    for trial in range(60):
        n = int(rng.choice([0, 1, int(rng.integers(2, 30))]))
        recs = empty_like()
        if n:
            cols = {}
            for c in COLUMNS:
                dtype = recs[c].dtype
                if c == "module":
                    cols[c] = np.full(n, "POSIX", dtype=object)
                elif c == "id":
                    cols[c] = rng.integers(1, 5, n).astype(np.uint64)
                elif c == "rank":
                    cols[c] = rng.integers(-1, 4, n)
                elif dtype.kind == "i":
                    cols[c] = rng.integers(0, 3, n) * rng.integers(0, 2**33, n)
                else:  # times: some 0 (never happened), some tied
                    cols[c] = np.round(rng.random(n) * 5, 1) * (rng.random(n) < 0.7)
            recs = pd.DataFrame(cols)
            recs["bytes"] = recs["bytes_read"] + recs["bytes_written"]
            recs["requests"] = recs["reads"] + recs["writes"]
            recs["io_time"] = recs["read_time"] + recs["write_time"] + recs["meta_time"]
            if trial % 3 == 0:
                recs = recs.sort_values("id", kind="stable", ignore_index=True)
        pd.testing.assert_frame_equal(
            file_stats(job, recs), file_stats_pandas(job, recs), check_exact=True
        )
