"""Plots of the zoom-in views as self-contained SVG strings, for the HTML report and the UI.

matplotlib draws on figures that are never shown (the Agg canvas, no pyplot state), so
these work in servers and threads and need no display or network.
"""

from iolens.present.plots.heatmap import correlation_heatmap
from iolens.present.plots.parallel import parallel_coordinates
from iolens.present.plots.timeline import covering_set_timeline

__all__ = ["correlation_heatmap", "covering_set_timeline", "parallel_coordinates"]
