"""Draw the boxes of expectation (the paper's Figures 3-10) with matplotlib, to SVG or PNG.

One panel per view (aggregate, write, read), bandwidth (GiB/s) across and metadata (kIOPS)
up, both logarithmic since easy and hard results differ by orders of magnitude. Each
system/API's union box is drawn solid, each run's own box dashed with its easy (circle) and
hard (square) corners; anomalous runs are red with a cross and their run id; a placed job
is a star inside the box its verdict was judged against: IO500's box scaled to the job's
node count (black, dash-dotted, labelled with the scale), since a job on fewer nodes than
IO500 used cannot expect IO500's aggregate numbers. SVG elements carry ids
(`box-<system>-<api>-<view>`, `run-<run id>-<view>`, `anomalous-<run id>-<view>`,
`job-<job id>-<view>`, `jobbox-<job id>-<view>`) and text stays text, so the file can be
checked and styled.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from iolens.analyze.expect.box import VIEWS
from iolens.errors import InputError

if TYPE_CHECKING:
    from matplotlib.figure import Figure

FORMATS = ("svg", "png", "pdf")
_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#e377c2", "#bcbd22")
ANOMALY = "#d62728"


def _gid(*parts: Any) -> str:
    return "-".join(re.sub(r"[^A-Za-z0-9_.:-]+", "_", str(p)) for p in parts)


def scale_label(job: dict[str, Any]) -> str:
    """What the job's box is: IO500's, or IO500's scaled to the job's node count."""
    sc = job.get("scale") or {}
    if sc.get("io500_nodes") and sc.get("factor", 1.0) < 1.0:
        return (
            f"box for job {job['job_id']}: IO500's x{sc['factor']:.3g} "
            f"({sc['job_nodes']} of {sc['io500_nodes']:g} nodes)"
        )
    return f"box for job {job['job_id']}: IO500's, unscaled"


def plot(data: dict[str, Any], path: str | Path) -> Path:
    """Write the figure of `data` (what `expectations()` returns) to `path`; the format
    follows the extension (.svg, .png or .pdf)."""
    import matplotlib

    path = Path(path)
    fmt = path.suffix.lower().lstrip(".")
    if fmt not in FORMATS:
        raise InputError(str(path), f"plot format must be one of {', '.join(FORMATS)}")
    with matplotlib.rc_context({"svg.fonttype": "none", "font.size": 8}):
        figure(data).savefig(path, format=fmt)
    return path


def figure(data: dict[str, Any]) -> Figure:
    """The matplotlib figure of `data`, its artists found by gid (see the module doc)."""
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    runs = data.get("runs", [])
    if not runs:
        raise InputError("expect", "no IO500 runs to plot: `iolens import io500` first")
    groups = data.get("boxes", [])
    colour = {(g["system"], g["api"]): _COLOURS[i % len(_COLOURS)] for i, g in enumerate(groups)}
    job = data.get("job")
    fig = Figure(figsize=(5.0 * len(VIEWS), 5.2), layout="constrained")
    axes = fig.subplots(1, len(VIEWS), squeeze=False)[0]
    for ax, view in zip(axes, VIEWS, strict=True):
        xs: list[float] = []
        ys: list[float] = []
        for g in groups:
            b = g.get(view)
            if not b:
                continue
            c = colour[(g["system"], g["api"])]
            rect = Rectangle(
                (b["bw_lo"], b["md_lo"]),
                b["bw_hi"] - b["bw_lo"],
                b["md_hi"] - b["md_lo"],
                fill=True,
                facecolor=c,
                alpha=0.12,
                edgecolor=c,
                linewidth=2.0,
            )
            rect.set_gid(_gid("box", g["system"], g["api"], view))
            ax.add_patch(rect)
            xs += [b["bw_lo"], b["bw_hi"]]
            ys += [b["md_lo"], b["md_hi"]]
        for r in runs:
            v = r["views"].get(view) or {}
            pts = [v.get(k) for k in ("easy_bw", "hard_bw", "easy_md", "hard_md")]
            if any(p is None for p in pts):
                continue
            eb, hb, em, hm = (float(p) for p in pts)
            bad = bool(r["anomalous"])
            c = ANOMALY if bad else colour.get((r["system"], r["api"]), _COLOURS[0])
            run_box = Rectangle(
                (min(eb, hb), min(em, hm)),
                abs(eb - hb),
                abs(em - hm),
                fill=False,
                edgecolor=c,
                linestyle="--",
                linewidth=0.8,
            )
            run_box.set_gid(_gid("runbox", r["run_id"], view))
            ax.add_patch(run_box)
            (easy,) = ax.plot([eb], [em], "o", color=c, markersize=5)
            (hard,) = ax.plot([hb], [hm], "s", color=c, markersize=5)
            easy.set_gid(_gid("run", r["run_id"], view, "easy"))
            hard.set_gid(_gid("run", r["run_id"], view, "hard"))
            if bad and (hb > eb or hm > em):  # inverted in this view: mark it
                (cross,) = ax.plot([hb], [hm], "x", color=ANOMALY, markersize=11, mew=2)
                cross.set_gid(_gid("anomalous", r["run_id"], view))
                note = ax.annotate(
                    f"{r['run_id']}: hard > easy",
                    (hb, hm),
                    textcoords="offset points",
                    xytext=(6, 6),
                    color=ANOMALY,
                    annotation_clip=False,
                )
                note.set_gid(_gid("anomalous-label", r["run_id"], view))
                note.set_in_layout(False)
            xs += [eb, hb]
            ys += [em, hm]
        jb = (job or {}).get("boxes", {}).get(view)
        if jb:
            scaled_box = Rectangle(
                (jb["bw_lo"], jb["md_lo"]),
                jb["bw_hi"] - jb["bw_lo"],
                jb["md_hi"] - jb["md_lo"],
                fill=False,
                edgecolor="black",
                linestyle="-.",
                linewidth=1.5,
            )
            scaled_box.set_gid(_gid("jobbox", job["job_id"], view))
            ax.add_patch(scaled_box)
            xs += [jb["bw_lo"], jb["bw_hi"]]
            ys += [jb["md_lo"], jb["md_hi"]]
        if job:
            pt = job.get("point") or {}
            bw = {"write": pt.get("write_bw"), "read": pt.get("read_bw")}.get(
                view, pt.get("bandwidth")
            )
            md = pt.get("md_rate")
            if bw:
                y = md if md else (min(ys) if ys else 1.0)
                (star,) = ax.plot([bw], [y], "*", color="black", markersize=14)
                star.set_gid(_gid("job", job["job_id"], view))
                label = ax.annotate(
                    f"job {job['job_id']}: {job.get('verdict') or '-'}",
                    (bw, y),
                    textcoords="offset points",
                    xytext=(6, -12),
                )
                label.set_in_layout(False)
                xs.append(bw)
                ys.append(y)
        ax.set_xscale("log")
        ax.set_yscale("log")
        if xs and ys:
            ax.set_xlim(min(xs) / 2, max(xs) * 2)
            ax.set_ylim(min(ys) / 2, max(ys) * 2)
        for axis, vals in ((ax.xaxis, xs), (ax.yaxis, ys)):
            narrow = bool(vals) and max(vals) / min(vals) < 100
            axis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0) if narrow else (1.0,)))
            axis.set_major_formatter(FuncFormatter(lambda v, _pos: f"{v:,g}"))
            axis.set_minor_formatter(NullFormatter())
        ax.set_xlabel(f"bandwidth ({data['units']['bandwidth']})")
        ax.set_ylabel(f"metadata rate ({data['units']['metadata']})")
        ax.set_title(f"IO500 box of expectation: {view}")
        ax.grid(True, which="both", linewidth=0.3, alpha=0.5)
    handles = [
        Rectangle(
            (0, 0),
            1,
            1,
            facecolor=colour[(g["system"], g["api"])],
            alpha=0.3,
            edgecolor=colour[(g["system"], g["api"])],
            label=f"{g['system']} / {g['api']}: {len(g['runs'])} run(s)",
        )
        for g in groups
    ]
    handles += [
        Line2D([], [], marker="o", linestyle="", color="grey", label="easy (best case)"),
        Line2D([], [], marker="s", linestyle="", color="grey", label="hard (worst case)"),
        Line2D(
            [],
            [],
            marker="x",
            linestyle="",
            color=ANOMALY,
            mew=2,
            label="hard beat easy: probable system fault",
        ),
    ]
    if job:
        if job.get("boxes"):
            handles.append(
                Rectangle(
                    (0, 0),
                    1,
                    1,
                    fill=False,
                    edgecolor="black",
                    linestyle="-.",
                    label=scale_label(job),
                )
            )
        handles.append(
            Line2D(
                [],
                [],
                marker="*",
                linestyle="",
                color="black",
                markersize=10,
                label=f"job {job['job_id']}",
            )
        )
    fig.legend(handles=handles, loc="outside lower center", ncols=3, fontsize=7)
    return fig
