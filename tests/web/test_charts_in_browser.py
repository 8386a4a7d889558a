"""Every chart kind, measured in real headless Chromium (issue 23): each colour a chart
draws is one its legend names, and no text label runs past the drawing's viewport (each
label's rendered box against the SVG's). The server-drawn kinds (heatmap, bars, graph,
strip, parallel coordinates) are checked on the served pages and on inputs that broke
them (a 55,992,391 peak, a two-hour heatmap with every level, long names); the uPlot
time series on a real traced 1-second job: its axis spans the job, not years, and every
axis's tick labels differ from each other."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from iolens.present.web import svg
from iolens.present.web.accounts import add_user
from iolens.store import DuckDBStore
from tests.traced import tracer_library
from tests.web.chromium import NEEDS_CHROMIUM

pytestmark = NEEDS_CHROMIUM

# Per server-drawn SVG: its legend's colours, the colours its marks are drawn in (cells,
# bars, dots: fill; lines of parallel coordinates: stroke), and the labels whose rendered
# box leaves the SVG's box (by more than half a pixel), with the overhang per side.
MEASURE = """() => Array.from(document.querySelectorAll('svg.plot')).map(s => {
  const box = s.getBoundingClientRect();
  const own = e => !e.closest('g.legend');
  const legend = Array.from(s.querySelectorAll('g.legend rect')).map(r => r.getAttribute('fill'));
  const marks = Array.from(s.querySelectorAll('rect[fill], circle[fill]')).filter(own)
    .map(e => e.getAttribute('fill'))
    .concat(Array.from(s.querySelectorAll('polyline[stroke]')).map(e => e.getAttribute('stroke')));
  const clipped = [];
  s.querySelectorAll('text').forEach(t => {
    if (!t.textContent.trim()) return;
    const b = t.getBoundingClientRect();
    const over = [box.left - b.left, box.top - b.top, b.right - box.right, b.bottom - box.bottom];
    if (Math.max(...over) > 0.5) clipped.push([t.textContent, over.map(Math.round)]);
  });
  return {label: s.getAttribute('aria-label'), legend: [...new Set(legend)],
          marks: [...new Set(marks)], clipped};
})"""


@pytest.fixture
def page(browser) -> Iterator[object]:
    ctx = browser.new_context(viewport={"width": 1360, "height": 900})
    ctx.set_default_timeout(120_000)
    try:
        yield ctx.new_page()
    finally:
        ctx.close()


def _measure(page) -> list[dict]:
    return page.evaluate(MEASURE)


def _faults(charts: list[dict]) -> list[str]:
    """What is wrong with each chart: colours no legend names, labels clipped."""
    out = []
    for c in charts:
        unnamed = set(c["marks"]) - set(c["legend"])
        if unnamed:
            out.append(f"{c['label']}: colours {sorted(unnamed)} not in its legend {c['legend']}")
        if c["clipped"]:
            out.append(f"{c['label']}: labels clipped {c['clipped']}")
    return out


def _alone(page, *figures: str) -> list[dict]:
    """The figures on a page of their own, at the width the site's pages give them."""
    body = "".join(f'<div class="figure" style="width:820px">{f}</div>' for f in figures)
    page.set_content(f"<!doctype html><html><body>{body}</body></html>")
    charts = _measure(page)
    assert len(charts) == len(figures)
    return charts


# --- each kind, on the inputs that broke it -------------------------------------------------

LEVELS = list(svg.LEVEL_COLOURS)


def test_heatmap_of_two_hours_names_every_level_it_draws(page):
    """Two hour-columns and four components, one per level: the old legend ran past the
    36-px-wide grid, so only "idle" and "low" showed beside red and orange cells."""
    comps = [f"lustre-OST000{i}" for i in range(4)]
    drawn = svg.heatmap(
        comps,
        ["09:00", "10:00"],
        lambda i, j: svg.LEVEL_COLOURS[LEVELS[i]],
        lambda i, j: LEVELS[i],
        legend=list(svg.LEVEL_COLOURS.items()),
        cell_w=36.0,
        label="ost load by hour",
    )
    (chart,) = _alone(page, drawn)
    assert set(chart["marks"]) == set(svg.LEVEL_COLOURS.values())
    assert _faults([chart]) == []
    # and what the legend names is on screen: every key's box inside the drawing
    texts = page.locator("svg.plot g.legend text").all_text_contents()
    assert texts == LEVELS


def test_bars_keep_the_peak_label_whole(page):
    """The MDS split's peak of 55,992,391 ops lost its first digit to a 62-px margin."""
    peak = 55_992_391.0
    drawn = svg.bars(
        ["09:00", "10:00", "11:00"],
        [("jobs", svg.READ, [peak, 1.0e6, 0.0]), ("other clients", svg.OTHER, [3e5, 2e5, 1e5])],
        ylabel="metadata ops per hour",
        label="MDS load split",
    )
    (chart,) = _alone(page, drawn)
    assert _faults([chart]) == []
    assert page.locator("svg.plot text", has_text="55,992,391").count() == 1


def test_bars_with_long_names_keep_them_whole(page):
    """Top users and applications: names longer than the room under the axis."""
    names = ["a-very-long-application-name", "io500-ior-easy-write", "x"]
    drawn = svg.bars(
        names,
        [("read", svg.READ, [5.0, 3.0, 1.0]), ("write", svg.WRITE, [2.0, 1.0, 0.5])],
        ylabel="GiB",
        label="top apps by I/O",
        fmt=lambda v: f"{v:,.1f} GiB",
    )
    (chart,) = _alone(page, drawn)
    assert _faults([chart]) == []


def test_a_continuous_heatmap_draws_only_the_shades_its_legend_names(page):
    """The job's OST x time heatmap: a smooth ramp drew shades no key explained."""
    from iolens.present.web.job_views import IDLE

    rates = [[0.0, 1.0, 60.0], [120.0, 170.0, 250.0]]  # a fifth of 250 apart: every shade
    shade, legend = svg.steps(250.0, lambda v: f"{v:,.3g} MiB/s")
    drawn = svg.heatmap(
        ["OST0000", "OST0001"],
        ["12:00:00", "12:00:10", "12:00:20"],
        lambda i, j: shade(rates[i][j]) if rates[i][j] else IDLE,
        lambda i, j: f"{rates[i][j]}",
        legend=[("0", IDLE), *legend],
    )
    (chart,) = _alone(page, drawn)
    assert set(chart["marks"]) == {IDLE, *(c for _, c in legend)}
    assert _faults([chart]) == []


def test_graph_strip_and_parallel_name_their_colours(page):
    nodes = [
        ("100001", "100001 awp-with-a-long-name", "/jobs/100001", "#6baed6"),
        ("100002", "100002 hacc", "/jobs/100002", "#fb6a4a"),
        ("100003", "100003 ior", "/jobs/100003", "#fdae6b"),
    ]
    graph = svg.graph(
        nodes,
        [("100002", "100001", 30.0, "slowed"), ("100003", "100002", 5.0, "slowed")],
        legend=[("victim", "#6baed6"), ("culprit", "#fb6a4a"), ("both", "#fdae6b")],
    )
    strip = svg.strip([1.0, 2.0, 3.5], 9.0, fmt=lambda v: f"{v:.1f}")
    par = svg.parallel(
        ["bandwidth", "datasize", "nprocs"],
        [("j1", [1.0, 2.0, 3.0], "#1f77b4"), ("j2", [3.0, 1.0, 2.0], "#ff7f0e")],
        legend=[("alice", "#1f77b4"), ("bob", "#ff7f0e")],
    )
    charts = _alone(page, graph, strip, par)
    assert [len(c["marks"]) for c in charts] == [3, 2, 2]
    assert _faults(charts) == []


# --- every server-drawn chart of the served pages ----------------------------------------

PAGES = [
    "/admin/load",
    "/admin/mds",
    "/admin/interference",
    "/admin/top",
    "/admin/switches",
    "/admin/factors",
    "/jobs/{job}",
]


def test_every_served_chart_names_its_colours_and_keeps_its_labels(server, web_db, page):
    page.goto(f"{server}/jobs?token={web_db.tokens['root']}")
    seen: dict[str, int] = {}
    faults = []
    for path in PAGES:
        url = server + path.format(job=web_db.job)
        assert page.goto(url).status == 200, url
        charts = _measure(page)
        seen[path] = len(charts)
        faults += [f"{path}: {f}" for f in _faults(charts)]
    assert faults == []
    # the pages that draw SVG charts drew them (nothing passes by drawing nothing)
    assert seen["/admin/load"] >= 3 and seen["/jobs/{job}"] >= 2, seen
    assert seen["/admin/mds"] >= 1 and seen["/admin/top"] == 2, seen


# --- the uPlot time series of a 1-second job ----------------------------------------------

AXES = """() => Array.from(document.querySelectorAll('div.chart')).map(el => {
  const u = el.uplot;
  return {x: [u.scales.x.min, u.scales.x.max],
          ticks: u.axes.map(a => (a._values || []).map(String))}; })"""


@pytest.fixture(scope="module")
def short_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str, str]]:
    """`dd` of 1 MiB under the real tracer (a job of a few ms), served: (url, token, job)."""
    from tests.loopback import free_port, start_server, stop

    d = tmp_path_factory.mktemp("short-job")
    (d / "src.dat").write_bytes(os.urandom(1 << 20))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env["IOLENS_LIBRARY"] = str(tracer_library())
    db = d / "short.duckdb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "iolens",
            "trace",
            "--db",
            str(db),
            "--job-id",
            "short-1",
            "--",
            "dd",
            f"if={d / 'src.dat'}",
            f"of={d / 'out.dat'}",
            "bs=64k",
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    with DuckDBStore(db) as store:
        token = add_user(store, "root", True)
    port = free_port()
    proc = start_server(db, port, d / "server.log", "--analyze-every", "0")
    try:
        yield f"http://127.0.0.1:{port}", token, "short-1"
    finally:
        stop(proc)


def test_a_short_job_is_drawn_on_its_own_seconds_with_distinct_ticks(short_job, page):
    url, token, job = short_job
    page.goto(f"{url}/jobs/{job}?token={token}")
    page.wait_for_selector("div.chart canvas")
    facts = page.request.get(f"{url}/api/jobs/{job}").json()
    t0 = datetime.fromisoformat(facts["start"].replace("Z", "+00:00")).timestamp()
    t1 = datetime.fromisoformat(facts["end"].replace("Z", "+00:00")).timestamp()
    assert t1 - t0 < 2.0  # the job under test is short
    axes = page.evaluate(AXES)
    assert axes
    for a in axes:
        lo, hi = a["x"]
        # the axis holds the job (its 1-s bins start at or before its start) and spans
        # about a minute, not the years uPlot gives a zero-width span
        assert lo <= t0 and hi >= t0, (a["x"], t0)
        assert hi - lo <= timedelta(minutes=5).total_seconds(), a["x"]
        assert datetime.fromtimestamp(lo, UTC).year == datetime.fromtimestamp(t0, UTC).year
        for ticks in a["ticks"]:
            assert len(set(ticks)) == len(ticks), ticks  # no two ticks read the same


# --- the LNet router heatmap on /admin/switches -------------------------------------------


@pytest.fixture(scope="module")
def routers_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """Captured Lustre 2.10 LNet stats of two routers and a compute node, imported with
    `iolens import lustre` (tests/analyze/test_routers.py's captures), served: (url, token)."""
    from tests.analyze.test_routers import ROUTED, captures
    from tests.conftest import run_cli
    from tests.loopback import free_port, start_server, stop

    d = tmp_path_factory.mktemp("routers-served")
    db = d / "routers.duckdb"
    for host in ROUTED:
        res = run_cli("import", "lustre", str(captures(d / "cap", host)), "--db", str(db),
                      "--host", host)  # fmt: skip
        assert res.returncode == 0, res.stderr
    with DuckDBStore(db) as store:
        token = add_user(store, "root", True)
    port = free_port()
    proc = start_server(db, port, d / "server.log", "--analyze-every", "0")
    try:
        yield f"http://127.0.0.1:{port}", token
    finally:
        stop(proc)


def test_router_heatmap_names_its_colours_and_keeps_its_labels(routers_served, page):
    from iolens.present.web.system_views import ROUTER_LEVELS
    from tests.analyze.test_routers import ROUTED

    url, token = routers_served
    page.goto(f"{url}/jobs?token={token}")
    assert page.goto(f"{url}/admin/switches").status == 200
    charts = {c["label"]: c for c in _measure(page)}
    heat = charts["LNet router load per minute"]
    assert "LNet router traffic" in charts
    assert _faults(list(charts.values())) == []
    # the shades drawn are the levels the routed bytes reach against the busiest minute
    top = max(max(v) for v in ROUTED.values())
    want = {
        svg.ramp(next(x for x in ROUTER_LEVELS if b / top <= x + 1e-12))
        for h, v in ROUTED.items()
        if sum(v)
        for b in v
    }
    assert set(heat["marks"]) == want and len(want) == len(ROUTER_LEVELS)
    texts = page.locator('svg.plot[aria-label="LNet router load per minute"] text')
    assert {"rtr1", "rtr2"} <= set(texts.all_text_contents())
