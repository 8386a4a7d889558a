"""The zoom-in plots render to SVG with one mark per interval, cell and job."""

from __future__ import annotations

import re

from iolens.analyze.darshan.zoomin import covering_set, job_factors
from iolens.analyze.darshan.zoomin.covering import CoveringSet, Interval, sweep
from iolens.analyze.darshan.zoomin.platform import application_view, correlation
from iolens.present.plots import correlation_heatmap, covering_set_timeline, parallel_coordinates
from tests.analyze.darshan.zoomin_logs import example, job


def paths_in(svg: str, gid: str) -> int:
    m = re.search(rf'<g id="{gid}">(.*?)</g>', svg, re.S)
    return 0 if m is None else m.group(1).count("<path")


def test_timeline_draws_every_interval_and_the_cover() -> None:
    """sample-badost: 2048 private intervals (light), one shared band, and the cover."""
    j = job(example("sample-badost.darshan"))
    cs = covering_set(j)
    svg = covering_set_timeline(j, cs)
    assert svg.startswith("<?xml") and "</svg>" in svg
    own = [i for i in cs.intervals if i.rank >= 0]
    assert paths_in(svg, "intervals") == len(own) == 2048
    assert paths_in(svg, "shared") == 1
    # the cover goes, stretch by stretch, to the file moving the most bytes and operations
    # (`weighted_cover`): many private files share it, each drawn once
    assert paths_in(svg, "cover") == sum(c.interval.rank >= 0 for c in cs.cover) > 2
    assert paths_in(svg, "cover-shared") == 1


def test_timeline_of_hand_made_intervals() -> None:
    j = job(example("example.darshan"))
    ivs = [Interval(0, 1, 0.0, 7.0), Interval(1, 2, 5.0, 13.0), Interval(2, 3, 1.0, 4.0)]
    svg = covering_set_timeline(j, CoveringSet(ivs, sweep(ivs)), title="three")
    assert paths_in(svg, "intervals") == 3 and paths_in(svg, "cover") == 2
    assert ">three<" in svg


def test_timeline_is_deterministic() -> None:
    j = job(example("example.darshan"))
    cs = covering_set(j)
    assert covering_set_timeline(j, cs) == covering_set_timeline(j, cs)


def test_heatmap_has_a_cell_per_defined_coefficient() -> None:
    data = [
        job_factors(job(example(n)))
        for n in (
            "example.darshan",
            "sample-badost.darshan",
            "dxt.darshan",
            "ior_hdf5_example.darshan",
        )
    ]
    m = correlation(data)
    svg = correlation_heatmap(m)
    defined = sum(v is not None for row in m["matrix"] for v in row)
    assert defined > 0 and svg.count('id="cell-') == defined
    assert ">BW<" in svg and "4 jobs" in svg


def test_parallel_coordinates_has_a_line_per_job() -> None:
    data = [
        job_factors(job(example(n)))
        for n in (
            "example.darshan",
            "sample-badost.darshan",
            "dxt.darshan",
            "ior_hdf5_example.darshan",
        )
    ]
    data.append(dict(data[0], job_id="extra", user="bob"))
    view = application_view(data)
    svg = parallel_coordinates(view)
    for r in data:
        assert f'id="job-{r["job_id"]}"' in svg
    assert svg.count('id="job-') == len(data)
    assert "user bob" in svg
    flat = parallel_coordinates(data, factors=("bandwidth", "datasize"), color_by="app")
    assert flat.count('id="job-') == len(data) and "app vpicio_uni" in flat
