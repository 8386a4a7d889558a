"""Small server-drawn SVG plots for the pages: heatmaps, bars, a graph, strips, parallel axes.

Time series are drawn in the browser with uPlot (zoom); everything categorical is drawn
here as plain SVG strings: no JavaScript, cheap to cache, and each cell or node can be a
link (a heatmap row to its OST, a graph node to its job). Every label is escaped.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from html import escape

#: Beacon's load levels, colour-coded the same on every page.
LEVEL_COLOURS = {"idle": "#e4e9ee", "low": "#a6d96a", "mid": "#fdae61", "high": "#d7191c"}
READ, WRITE, META, OTHER = "#1f77b4", "#d62728", "#7f7f7f", "#9467bd"
FONT = 'font-family="system-ui, sans-serif" font-size="11"'
#: Upper bound of one character's advance at FONT's size: the room a label is given, so no
#: label runs past the drawing's edge (the browser test measures the real extents).
CHAR_W = 7.0


def text_w(s: str) -> float:
    """The most a label can be wide, in px."""
    return CHAR_W * len(s)


def _legend(items: Sequence[tuple[str, str]], x: float, y: float) -> tuple[str, float]:
    """Swatches and names in a row from (x, y) (the swatch's top), and the row's right end.
    In a `g.legend`, so a reader (and the browser test) can tell keys from marks."""
    parts = []
    for name, c in items:
        parts.append(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="11" height="11" fill="{c}"/>'
            f'<text x="{x + 14:.1f}" y="{y + 9:.1f}">{escape(name)}</text>'
        )
        x += 14 + text_w(name) + 10
    return f'<g class="legend">{"".join(parts)}</g>', x


def steps(
    top: float, fmt: Callable[[float], str], n: int = 5
) -> tuple[Callable[[float], str], list[tuple[str, str]]]:
    """A continuous 0..top scale cut into `n` shades of `ramp`, and the legend of every
    shade: a cell's colour is always one the legend names (a smooth ramp would draw
    colours no key explains)."""
    top = top or 1.0

    def shade(v: float) -> str:
        k = min(n - 1, max(0, math.ceil(n * v / top) - 1))
        return ramp((k + 1) / n)

    legend = [(f"≤ {fmt(top * (k + 1) / n)}", ramp((k + 1) / n)) for k in range(n)]
    return shade, legend


def _a(href: str | None, inner: str) -> str:
    return f'<a href="{escape(href)}">{inner}</a>' if href else inner


def _svg(width: float, height: float, body: str, label: str) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" role="img" aria-label="{escape(label)}" class="plot" {FONT}>'
        f"{body}</svg>"
    )


def ramp(x: float) -> str:
    """White -> dark blue for a value in [0, 1] (heatmaps of rates)."""
    x = min(1.0, max(0.0, x))
    r = round(247 - x * (247 - 8))
    g = round(251 - x * (251 - 48))
    b = round(255 - x * (255 - 107))
    return f"#{r:02x}{g:02x}{b:02x}"


def diverging(x: float) -> str:
    """Blue (-1) -> white (0) -> red (+1), for correlations."""
    x = min(1.0, max(-1.0, x))
    if x >= 0:
        return f"#{255:02x}{round(255 - 200 * x):02x}{round(255 - 200 * x):02x}"
    return f"#{round(255 + 200 * x):02x}{round(255 + 200 * x):02x}{255:02x}"


def heatmap(
    rows: Sequence[str],
    cols: Sequence[str],
    colour: Callable[[int, int], str | None],
    title: Callable[[int, int], str],
    *,
    row_href: Callable[[int], str | None] | None = None,
    cell_href: Callable[[int, int], str | None] | None = None,
    label: str = "heatmap",
    col_every: int | None = None,
    legend: Sequence[tuple[str, str]] = (),
    cell_w: float | None = None,
) -> str:
    """A row x column grid of coloured cells; `colour` None leaves a cell blank."""
    left = 8 + max((text_w(r) for r in rows), default=28.0)
    n = max(1, len(cols))
    cw = cell_w or max(4.0, min(36.0, 760.0 / n))
    ch = 16.0 if len(rows) < 40 else 9.0
    top, bottom = 6.0, 34.0 + (18 if legend else 0)
    every = col_every or max(1, math.ceil(n / 12))
    shown = [cols[j] for j in range(0, len(cols), every)]
    # the last column label is centred on its column: room for its right half
    overhang = max((text_w(c) / 2 - cw / 2 for c in shown[-1:]), default=0.0)
    legend_svg, legend_end = _legend(legend, 8.0, top + ch * len(rows) + 22)
    width = max(left + cw * n + max(10.0, overhang + 4), legend_end if legend else 0.0)
    height = top + ch * len(rows) + bottom
    parts = []
    for i, name in enumerate(rows):
        y = top + i * ch
        text = (
            f'<text x="{left - 4:.1f}" y="{y + ch * 0.75:.1f}" text-anchor="end">'
            f"{escape(name)}</text>"
        )
        parts.append(_a(row_href(i) if row_href else None, text))
        for j in range(len(cols)):
            c = colour(i, j)
            if c is None:
                continue
            rect = (
                f'<rect x="{left + j * cw:.1f}" y="{y:.1f}" width="{cw - 0.6:.1f}" '
                f'height="{ch - 0.6:.1f}" fill="{c}"><title>{escape(title(i, j))}</title></rect>'
            )
            parts.append(_a(cell_href(i, j) if cell_href else None, rect))
    base = top + ch * len(rows)
    for j in range(0, len(cols), every):
        x = left + j * cw + cw / 2
        parts.append(
            f'<text x="{x:.1f}" y="{base + 13:.1f}" text-anchor="middle">{escape(cols[j])}</text>'
        )
    if legend:
        parts.append(legend_svg)
    return _svg(width, height, "".join(parts), label)


def bars(
    labels: Sequence[str],
    series: Sequence[tuple[str, str, Sequence[float]]],
    *,
    ylabel: str = "",
    label: str = "bar chart",
    fmt: Callable[[float], str] = lambda v: f"{v:,.0f}",
    log: bool = False,
    width: float = 780.0,
) -> str:
    """Grouped bars: `series` are (name, colour, values per label)."""
    n, k = max(1, len(labels)), max(1, len(series))
    series = [(n, c, [float(v or 0.0) for v in vs]) for n, c, vs in series]
    peak = max((v for _, _, vs in series for v in vs), default=0.0) or 1.0
    # Labels are rotated 35 degrees, their end at the bar: they reach down by sin(35) and
    # left by cos(35) of their length. The margins make room for the longest, and for
    # the peak's tick label (its digits, not a fixed 62 px).
    longest = max((text_w(str(s)) for s in labels), default=0.0)
    top, ph = 18.0, 170.0
    bottom = 16.0 + 0.574 * longest + 26.0
    left = max(62.0, 10.0 + text_w(fmt(peak)))
    legend_svg, legend_end = _legend([(s, c) for s, c, _ in series], left, top + ph + bottom - 14)
    width = max(width, legend_end)
    slot = (width - left - 10) / n
    left = max(left, 0.819 * text_w(str(labels[0])) - slot / 2 + 4) if labels else left
    slot = (width - left - 10) / n
    bw = max(2.0, slot * 0.8 / k)

    def h(v: float) -> float:
        if v <= 0:
            return 0.0
        if log:
            return ph * math.log10(1 + v) / math.log10(1 + peak)
        return ph * v / peak

    parts = [
        f'<line x1="{left}" y1="{top + ph}" x2="{width - 10}" y2="{top + ph}" stroke="#999"/>',
        f'<text x="4" y="{top - 6}">{escape(ylabel)}</text>',
        f'<text x="{left - 4}" y="{top + 8}" text-anchor="end">{escape(fmt(peak))}</text>',
        f'<text x="{left - 4}" y="{top + ph}" text-anchor="end">0</text>',
    ]
    for i, name in enumerate(labels):
        x0 = left + i * slot + slot * 0.1
        for s, (sname, colour, values) in enumerate(series):
            v = float(values[i]) if i < len(values) else 0.0
            hh = h(v)
            parts.append(
                f'<rect x="{x0 + s * bw:.1f}" y="{top + ph - hh:.1f}" width="{bw - 1:.1f}" '
                f'height="{hh:.1f}" fill="{colour}"><title>{escape(name)} {escape(sname)}: '
                f"{escape(fmt(v))}</title></rect>"
            )
        cx = left + i * slot + slot / 2
        parts.append(
            f'<text x="{cx:.1f}" y="{top + ph + 12}" text-anchor="end" '
            f'transform="rotate(-35 {cx:.1f} {top + ph + 12})">{escape(name)}</text>'
        )
    parts.append(legend_svg)
    return _svg(max(width, text_w(ylabel) + 8), top + ph + bottom, "".join(parts), label)


def graph(
    nodes: Sequence[tuple[str, str, str | None, str]],
    edges: Sequence[tuple[str, str, float, str]],
    *,
    label: str = "graph",
    legend: Sequence[tuple[str, str]] = (),
) -> str:
    """Nodes on a circle, arrows culprit -> victim with width by weight.

    `nodes`: (id, text, href, colour); `edges`: (from id, to id, weight, tooltip);
    `legend`: what each node colour means.
    """
    n = max(1, len(nodes))
    # room outside the circle for the widest label, centred over its node
    margin = max(60.0, max((text_w(t) / 2 + 8 for _, t, _, _ in nodes), default=0.0))
    size = max(520.0 if n < 30 else 720.0, 2 * margin + 300)
    cx = cy = size / 2
    r = size / 2 - margin
    pos = {
        node[0]: (cx + r * math.cos(2 * math.pi * i / n), cy + r * math.sin(2 * math.pi * i / n))
        for i, node in enumerate(nodes)
    }
    peak = max((w for *_, w, _ in edges), default=1.0) or 1.0
    parts = [
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="19" refY="5" markerWidth="10" '
        'markerHeight="10" markerUnits="userSpaceOnUse" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z" '
        'fill="#c0392b"/></marker></defs>'
    ]
    for a, b, w, tip in edges:
        if a not in pos or b not in pos:
            continue
        (x1, y1), (x2, y2) = pos[a], pos[b]
        parts.append(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="#c0392b" '
            f'stroke-opacity="0.7" stroke-width="{1 + 5 * w / peak:.1f}" '
            f'marker-end="url(#arrow)"><title>{escape(tip)}</title></line>'
        )
    for nid, text, href, colour in nodes:
        x, y = pos[nid]
        inner = (
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="9" fill="{colour}" stroke="#333">'
            f"<title>{escape(text)}</title></circle>"
            f'<text x="{x:.1f}" y="{y - 13:.1f}" text-anchor="middle">{escape(text)}</text>'
        )
        parts.append(_a(href, inner))
    if legend:
        key, end = _legend(legend, 8.0, size + 4)
        parts.append(key)
        return _svg(max(size, end), size + 20, "".join(parts), label)
    return _svg(size, size, "".join(parts), label)


EARLIER, THIS_RUN = "#6b8fb5", "#d62728"


def strip(values: Sequence[float], mark: float | None, *, fmt: Callable[[float], str]) -> str:
    """One metric over earlier runs: a dot per run on a line, this run's value in red."""
    width, height, pad = 260.0, 44.0, 8.0
    pool = [v for v in values if v is not None and math.isfinite(v)]
    if mark is not None:
        pool.append(mark)
    if not pool:
        return ""
    lo, hi = min(pool), max(pool)
    span = (hi - lo) or 1.0

    def x(v: float) -> float:
        return pad + (width - 2 * pad) * (v - lo) / span

    parts = [f'<line x1="{pad}" y1="13" x2="{width - pad}" y2="13" stroke="#ccc"/>']
    for v in values:
        parts.append(
            f'<circle cx="{x(v):.1f}" cy="13" r="3.5" fill="{EARLIER}" fill-opacity="0.6">'
            f"<title>{escape(fmt(v))}</title></circle>"
        )
    if mark is not None:
        parts.append(
            f'<rect x="{x(mark) - 2:.1f}" y="3" width="4" height="20" fill="{THIS_RUN}">'
            f"<title>this run: {escape(fmt(mark))}</title></rect>"
        )
    key = [("earlier runs", EARLIER)] + ([("this run", THIS_RUN)] if mark is not None else [])
    parts.append(_legend(key, pad, 29)[0])
    return _svg(width, height, "".join(parts), "this run against earlier runs")


def parallel(
    axes: Sequence[str],
    lines: Sequence[tuple[str, Sequence[float | None], str]],
    *,
    label: str = "parallel coordinates",
    legend: Sequence[tuple[str, str]] = (),
) -> str:
    """Parallel coordinates: each line (name, values per axis, colour), axes min-max scaled;
    `legend` says what the line colours stand for."""
    width, height, top, bottom = (
        800.0,
        300.0 + (18 if legend else 0),
        20.0,
        40.0 + (18 if legend else 0),
    )
    n = max(2, len(axes))
    step = (width - 60) / (n - 1)
    ranges = []
    for k in range(len(axes)):
        vals = [float(v[k]) for _, v, _ in lines if v[k] is not None and math.isfinite(v[k])]
        ranges.append((min(vals), max(vals)) if vals else (0.0, 1.0))
    parts = []
    for k, name in enumerate(axes):
        x = 30 + k * step
        parts.append(
            f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{height - bottom}" stroke="#888"/>'
            f'<text x="{x:.1f}" y="{height - bottom + 14}" text-anchor="middle">'
            f"{escape(name)}</text>"
        )
    for name, values, colour in lines:
        pts = []
        for k, v in enumerate(values):
            if v is None or not math.isfinite(v):
                continue
            lo, hi = ranges[k]
            y = height - bottom - (height - top - bottom) * ((v - lo) / ((hi - lo) or 1.0))
            pts.append(f"{30 + k * step:.1f},{y:.1f}")
        if len(pts) > 1:
            parts.append(
                f'<polyline points="{" ".join(pts)}" fill="none" stroke="{colour}" '
                f'stroke-opacity="0.55"><title>{escape(name)}</title></polyline>'
            )
    if legend:
        key, end = _legend(legend, 8.0, height - 16)
        parts.append(key)
        width = max(width, end)
    return _svg(width, height, "".join(parts), label)


def cdf(
    series: Sequence[tuple[str, str, Sequence[float]]],
    *,
    xlabel: str = "seconds",
    label: str = "CDF",
    width: float = 640.0,
) -> str:
    """Empirical CDFs on a log x axis: `series` are (name, colour, sorted positive values)."""
    left, top, bottom, right = 44.0, 10.0, 52.0, 12.0
    ph, pw = 170.0, width - left - right
    xs = [v for _, _, vs in series for v in vs if v > 0]
    lo = math.floor(math.log10(min(xs))) if xs else -3
    hi = max(lo + 1, math.ceil(math.log10(max(xs)))) if xs else 0

    def px(v: float) -> float:
        return left + pw * (math.log10(max(v, 10.0**lo)) - lo) / (hi - lo)

    def py(q: float) -> float:
        return top + ph * (1 - q)

    parts = [
        f'<line x1="{left}" y1="{py(0):.1f}" x2="{left + pw:.1f}" y2="{py(0):.1f}" stroke="#999"/>'
    ]
    for e in range(lo, hi + 1):
        x = px(10.0**e)
        tick = f"{10.0**e:g}"
        parts.append(f'<text x="{x:.1f}" y="{py(0) + 13:.1f}" text-anchor="middle">{tick}</text>')
    for q in (0.0, 0.5, 1.0):
        parts.append(f'<text x="{left - 4}" y="{py(q) + 4:.1f}" text-anchor="end">{q:g}</text>')
    parts.append(
        f'<text x="{left + pw / 2:.1f}" y="{py(0) + 27:.1f}" text-anchor="middle">'
        f"{escape(xlabel)} (log scale)</text>"
    )
    x_leg = left
    for name, colour, vs in series:
        pos = [v for v in vs if v > 0]
        if pos:
            pts = [f"{px(pos[0]):.1f},{py(0):.1f}"]
            for i, v in enumerate(pos):
                x = px(v)
                pts.append(f"{x:.1f},{py(i / len(pos)):.1f} {x:.1f},{py((i + 1) / len(pos)):.1f}")
            parts.append(
                f'<polyline fill="none" stroke="{colour}" stroke-width="1.6" '
                f'points="{" ".join(pts)}"><title>{escape(name)}</title></polyline>'
            )
        parts.append(
            f'<rect x="{x_leg:.1f}" y="{py(0) + 36:.1f}" width="11" height="11" fill="{colour}"/>'
            f'<text x="{x_leg + 14:.1f}" y="{py(0) + 45:.1f}">{escape(name)}</text>'
        )
        x_leg += 24 + 7 * len(name)
    return _svg(width, top + ph + bottom, "".join(parts), label)
