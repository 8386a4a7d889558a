"""The sweep-line covering set: known answers, minimality against brute force, real logs."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path

import pytest

from iolens.analyze.darshan.zoomin import covering_set, sweep
from iolens.analyze.darshan.zoomin.covering import Interval, cover_files, intervals
from iolens.analyze.darshan.zoomin.phases import io_phases
from tests.analyze.darshan.zoomin_logs import example, job, shared
from tests.golden import check_golden

CASES = Path(__file__).resolve().parents[2] / "cases" / "zoomin"


def _union(ivs: list[Interval]) -> float:
    total, reach = 0.0, float("-inf")
    for i in sorted(ivs, key=lambda i: i.start):
        if i.end <= reach:
            continue
        total += i.end - max(i.start, reach)
        reach = i.end
    return total


def test_figure_1() -> None:
    """Six files over 18 s, covered by File1, File2 and File5 (the paper's Figure 1)."""
    ivs = [
        Interval(0, 1, 0.0, 7.0),
        Interval(1, 2, 5.0, 13.0),
        Interval(2, 3, 1.0, 4.0),
        Interval(3, 4, 8.0, 12.0),
        Interval(4, 5, 12.0, 18.0),
        Interval(5, 6, 14.0, 17.0),
    ]
    cover = sweep(ivs)
    assert [c.interval.file for c in cover] == [1, 2, 5]
    assert [(c.cover_start, c.cover_end) for c in cover] == [(0, 7), (7, 13), (13, 18)]
    assert sum(c.covered for c in cover) == 18.0


def test_gaps_and_contained_intervals() -> None:
    ivs = [
        Interval(0, 1, 0.0, 2.0),
        Interval(0, 2, 0.5, 1.5),  # inside the first: never needed
        Interval(1, 3, 5.0, 6.0),  # after a gap
        Interval(1, 4, 5.5, 9.0),
        Interval(2, 5, 3.0, 3.0),  # zero length: ignored
    ]
    cover = sweep(ivs)
    assert [c.interval.file for c in cover] == [1, 3, 4]
    assert [(c.cover_start, c.cover_end) for c in cover] == [(0, 2), (5, 6), (6, 9)]


def test_ties_prefer_bytes_then_lower_rank() -> None:
    a, b, c = Interval(3, 1, 0, 5, 10), Interval(1, 2, 0, 5, 20), Interval(0, 3, 0, 5, 20)
    for order in itertools.permutations([a, b, c]):
        assert [x.interval for x in sweep(list(order))] == [c]


@pytest.mark.parametrize("seed", range(40))
def test_minimal_and_exact_against_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    ivs = []
    for k in range(rng.randint(1, 8)):
        s = rng.randint(0, 30)
        ivs.append(Interval(k, k, float(s), float(s + rng.randint(1, 10))))
    cover = sweep(ivs)
    chosen = [c.interval for c in cover]
    assert _union(chosen) == pytest.approx(_union(ivs))
    assert sum(c.covered for c in cover) == pytest.approx(_union(ivs))  # no overlap counted
    best = next(
        n
        for n in range(1, len(ivs) + 1)
        if any(
            _union(list(sub)) == pytest.approx(_union(ivs))
            for sub in itertools.combinations(ivs, n)
        )
    )
    assert len(cover) == best
    shuffled = ivs[:]
    rng.shuffle(shuffled)
    assert [c.interval for c in sweep(shuffled)] == chosen


def test_badost_golden() -> None:
    """sample-badost: 2048 ranks, one file each; the straggler OST 14 covers the I/O time.

    The cover splits time by activity (issue 21), so the time goes to the many files on OST
    14 that are still moving bytes, not to the one that happened to reach furthest."""
    j = job(example("sample-badost.darshan"))
    cs = covering_set(j)
    assert len(cs.intervals) == 2049  # 2048 private files + one shared input file
    assert cs.io_time == pytest.approx(_union(cs.intervals))
    files = cover_files(j, cs)
    assert files[0]["osts"] == [14]
    assert sum(f["cover_share"] for f in files if f["osts"] == [14]) > 0.95
    got = {
        "io_time": round(cs.io_time, 6),
        "cover_members": len(cs.cover),
        "cover": [
            {k: (round(v, 6) if isinstance(v, float) else v) for k, v in c.as_dict().items()}
            for c in cs.cover[:10]
        ],
        "files": [
            {k: (round(v, 6) if isinstance(v, float) else v) for k, v in f.items()}
            for f in files[:10]
        ],
    }
    check_golden(CASES / "badost_cover.json", json.loads(json.dumps(got)))


def test_example_shared_file_is_one_interval_for_all_ranks() -> None:
    j = job(example("example.darshan"))
    cs = covering_set(j)
    assert [(i.rank, i.path.rsplit("/", 1)[-1]) for i in cs.intervals] == [(-1, "vpicio.hdf5")]
    (f,) = cover_files(j, cs)
    assert f["ranks"] == 2048 and f["stripe_count"] == 24 and len(f["osts"]) == 24
    assert f["bytes"] == 2199023259968
    assert f["bandwidth"] == pytest.approx(f["bytes"] / f["io_time"])


def test_standard_streams_are_left_out() -> None:
    j = job(example("example.darshan"))
    assert all(i.path not in ("<STDOUT>", "<STDERR>") for i in intervals(j))


def test_dxt_gives_one_interval_per_rank() -> None:
    j = job(example("ior_hdf5_example.darshan"))
    counters = intervals(j, source="counters")
    dxt = intervals(j, source="dxt")
    shared_ids = {i.file for i in counters if i.rank == -1}
    per_rank = [i for i in dxt if i.file in shared_ids]
    assert per_rank and all(i.rank >= 0 for i in per_rank)
    assert {i.rank for i in per_rank} == set(j.dxt["rank"])


def test_metadata_only_records_use_open_to_close() -> None:
    j = job(shared("darshan-logs-generated", "mdtest-20k.darshan"))
    cs = covering_set(j)
    assert len(cs.intervals) == 20000
    assert cs.io_time > 0 and cs.io_time == pytest.approx(_union(cs.intervals))


def test_phases_from_dxt_and_counters() -> None:
    phases, source = io_phases(job(example("dxt.darshan")))
    assert source == "dxt" and len(phases) == 4
    assert all(a.end < b.start for a, b in itertools.pairwise(phases))
    phases, source = io_phases(job(example("example.darshan")))
    assert source == "counters" and len(phases) == 1 and phases[0].ranks == 2048
