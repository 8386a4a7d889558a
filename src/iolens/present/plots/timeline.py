"""The job view: every (rank, file) I/O interval and the covering set over time.

As the zoom-in paper's Figures 6, 7, 9 and 21: light lines are each rank's activity on
each file, dark lines the covering set (the part of the I/O time each member alone
covers). A shared record (rank -1) covers all ranks, so it is drawn as a band across them,
as the paper's "blue rectangular regions".
"""

from __future__ import annotations

from matplotlib.collections import LineCollection, PatchCollection
from matplotlib.patches import Rectangle

from iolens.analyze.darshan.zoomin.covering import CoveringSet
from iolens.model.darshan import DarshanJob
from iolens.present.plots._svg import figure, to_svg

LIGHT = "#9ecae1"
DARK = "#08306b"
#: Above this many intervals the light lines are embedded as an image, keeping the SVG small.
RASTER_ABOVE = 5000


def covering_set_timeline(job: DarshanJob, cover: CoveringSet, title: str | None = None) -> str:
    """SVG of the job's I/O intervals (group id `intervals`, shared bands `shared`) and its
    covering set (`cover`, shared members `cover-shared`)."""
    fig = figure(8.0, 4.0)
    ax = fig.add_subplot()
    nranks = max([1, job.nprocs, *(i.rank + 1 for i in cover.intervals)])
    lo, hi = -0.5, nranks - 0.5
    own = [i for i in cover.intervals if i.rank >= 0]
    shared = [i for i in cover.intervals if i.rank < 0]
    lines = LineCollection(
        [[(i.start, i.rank), (i.end, i.rank)] for i in own],
        colors=LIGHT,
        linewidths=1.5,
        gid="intervals",
        rasterized=len(own) > RASTER_ABOVE,
    )
    ax.add_collection(lines)
    ax.add_collection(
        PatchCollection(
            [Rectangle((i.start, lo), i.length, hi - lo) for i in shared],
            facecolor=LIGHT,
            edgecolor="none",
            alpha=0.35,
            gid="shared",
        )
    )
    c_own = [c for c in cover.cover if c.interval.rank >= 0]
    c_shared = [c for c in cover.cover if c.interval.rank < 0]
    ax.add_collection(
        LineCollection(
            [[(c.cover_start, c.interval.rank), (c.cover_end, c.interval.rank)] for c in c_own],
            colors=DARK,
            linewidths=3.0,
            gid="cover",
        )
    )
    ax.add_collection(
        PatchCollection(
            [Rectangle((c.cover_start, lo), c.covered, hi - lo) for c in c_shared],
            facecolor=DARK,
            edgecolor="none",
            alpha=0.6,
            gid="cover-shared",
        )
    )
    t1 = max([i.end for i in cover.intervals] or [1.0])
    ax.set_xlim(0.0, t1 * 1.02 if t1 > 0 else 1.0)
    ax.set_ylim(lo - 0.5, hi + 0.5)
    ax.set_xlabel("seconds since job start")
    ax.set_ylabel("rank")
    files = len({c.interval.file for c in cover.cover})
    ax.set_title(
        title
        or f"job {job.job_id}: {len(cover.intervals)} (rank, file) intervals; covering set "
        f"{len(cover.cover)} intervals on {files} files, {cover.io_time:.1f} s of I/O",
        fontsize=9,
    )
    return to_svg(fig)
