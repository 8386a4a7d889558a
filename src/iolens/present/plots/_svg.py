"""A headless matplotlib figure and its SVG text."""

from __future__ import annotations

import io

import matplotlib
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure


def figure(width: float, height: float) -> Figure:
    """A figure on the Agg canvas: no pyplot, no global backend switch."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def to_svg(fig: Figure) -> str:
    """The figure as SVG: text kept as text, stable ids, no date (reproducible output)."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "iolens"}):
        fig.savefig(buf, format="svg", metadata={"Date": None})
    return buf.getvalue()
