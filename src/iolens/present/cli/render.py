"""Human rendering of iolens objects with rich; JSON rendering for --json."""

from __future__ import annotations

import math
import os
import sys
from datetime import datetime
from typing import Any

from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from iolens.present.jsonout import to_json as to_json  # re-exported: many commands use it

SEVERITY_STYLE = {"critical": "bold red", "warning": "yellow", "info": "cyan"}


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    n = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if abs(n) < 1024 or unit == "PiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PiB"


def human_rate(n: float | None) -> str:
    return "-" if n is None else f"{human_bytes(n)}/s"


def human_time(t: datetime | str | None) -> str:
    if t is None:
        return "-"
    if isinstance(t, str):
        t = datetime.fromisoformat(t.replace("Z", ""))
    return t.strftime("%Y-%m-%d %H:%M:%S")


def jobs_table(rows: list[dict[str, Any]], title: str = "Jobs") -> Table:
    t = Table(title=title, header_style="bold", row_styles=["", "dim"], pad_edge=False)
    for col, justify in (
        ("job", "right"),
        ("user", "left"),
        ("app", "left"),
        ("nodes", "right"),
        ("start", "left"),
        ("min", "right"),
        ("state", "left"),
        ("mode", "left"),
        ("read", "right"),
        ("write", "right"),
        ("find.", "right"),
    ):
        t.add_column(col, justify=justify, no_wrap=True)  # type: ignore[arg-type]
    for r in rows:
        runtime = (
            (r["end"] - r["start"]).total_seconds() if r.get("end") and r.get("start") else None
        )
        start = r.get("start")
        t.add_row(
            r["job_id"],
            r["user"],
            r.get("app") or "-",
            str(len(r.get("nodes") or [])),
            start.strftime("%m-%d %H:%M") if start else "-",
            f"{runtime / 60:.0f}" if runtime else "-",
            (r.get("state") or "-")[:9],
            r.get("io_mode") or "-",
            human_bytes(r.get("read_bytes")),
            human_bytes(r.get("write_bytes")),
            str(r.get("findings") or 0),
        )
    return t


def job_report(rep: dict[str, Any]) -> Group:
    """The per-job report: summary, layers, files, findings."""
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_column(style="bold")
    head.add_column()
    runtime = rep.get("runtime_s")
    pairs = [
        ("user", rep["user"]),
        ("app", rep.get("app") or "-"),
        ("state", rep.get("state") or "-"),
        ("I/O mode", rep.get("io_mode") or "-"),
        ("start", human_time(rep.get("start"))),
        ("end", human_time(rep.get("end"))),
        ("runtime", f"{runtime / 60:.1f} min" if runtime else "-"),
        ("I/O time", human_seconds(rep["io_time_s"])),
        ("nodes / procs", f"{rep['nodes']} / {rep.get('nprocs') or '-'}"),
        ("I/O nodes / procs", f"{rep['io_nodes']} / {rep['io_procs']}"),
        ("read", f"{human_bytes(rep['read_bytes'])} in {rep['read_ops']:,} ops"),
        ("write", f"{human_bytes(rep['write_bytes'])} in {rep['write_ops']:,} ops"),
        ("read bandwidth", human_rate(rep["read_bw_avg"])),
        ("write bandwidth", human_rate(rep["write_bw_avg"])),
        ("IOPS avg", f"{rep['iops_avg']:,.0f}"),
        ("avg request", human_bytes(rep["avg_request"])),
        ("metadata ops", f"{rep['md_ops']:,}"),
        ("metadata ops/s", f"{rep['md_ops_rate']:,.1f}"),
        ("forwarders", ", ".join(rep["forwarders"]) or _unknown(rep, "forwarders")),
        ("OSTs", _short_list(rep["osts"]) if rep["osts"] else _unknown(rep, "osts")),
    ]
    for i in range(0, len(pairs), 2):
        a, b = pairs[i], pairs[i + 1] if i + 1 < len(pairs) else ("", "")
        head.add_row(a[0], str(a[1]), b[0], str(b[1]))

    layers = Table(title="Bytes seen at each layer", header_style="bold")
    for col in ("layer", "read", "write", "metadata ops"):
        layers.add_column(col, justify="left" if col == "layer" else "right")
    compute = rep["layers"].get("compute", {})
    for name in ("compute", "forwarder", "ost", "mds"):
        lay = rep["layers"].get(name)
        if not lay:
            continue
        ratio = ""
        if name == "ost" and compute.get("read_bytes"):
            amp = lay["read_bytes"] / compute["read_bytes"]
            ratio = f" ({amp:.1f}x)" if abs(amp - 1) > 0.05 else ""
        layers.add_row(
            name,
            human_bytes(lay["read_bytes"]) + ratio,
            human_bytes(lay["write_bytes"]),
            f"{lay['md_ops']:,}",
        )

    # The traced client's I/O interfaces (POSIX, stdio, MPI-IO, HDF5, PnetCDF), each with
    # its own calls: an HDF5 write and the POSIX writes under it both show.
    for name, lay in (rep.get("io_layers") or {}).items():
        layers.add_row(
            f"  traced {name}",
            human_bytes(lay["read_bytes"]),
            human_bytes(lay["write_bytes"]),
            f"{lay['md_ops']:,}",
        )

    files = Table(title="Busiest files", header_style="bold")
    for col in ("path", "fs", "bytes", "procs", "OSTs"):
        files.add_column(col, justify="left" if col in ("path", "fs", "OSTs") else "right")
    for f in rep["top_files"][:5]:
        files.add_row(
            f["path"] or str(f["file_id"]),
            f.get("fs") or "-",
            human_bytes(f["bytes"]),
            str(f["procs"]),
            _short_list(f["osts"]),
        )

    parts: list[Any] = [Group(head, _bandwidth_line(rep)), layers, files]
    for g in rep.get("gaps") or []:
        parts.append(Text(f"Not known: {g['missing']}. To fix: {g['remedy']}.", style="yellow"))
    for e in rep.get("analysis_errors") or []:
        parts.append(Text(f"{e['message']} (iolens {e['iolens_version']})", style="red"))
    if rep["findings"]:
        for f in rep["findings"]:
            style = SEVERITY_STYLE.get(f["severity"], "")
            body = Text(f["recommendation"])
            g = f.get("gain") or {}
            if g.get("seconds") is not None:
                lo, hi = g.get("range_s") or (g["seconds"], g["seconds"])
                body.append(
                    f"\nWould save ~{g['seconds']:,.3g} s ({lo:,.3g}-{hi:,.3g} s), "
                    f"{g['core_hours']:,.3g} core-hours: {g['model']}",
                    style="dim",
                )
            parts.append(
                Panel(
                    body,
                    title=Text(f"{f['code']} {f['name']} ({f['severity']})", style=style),
                    title_align="left",
                    border_style=style,
                )
            )
    else:
        parts.append(Text("No findings.", style="green"))
    return Group(
        Panel(Group(*parts[:1]), title=f"Job {rep['job_id']}", title_align="left"), *parts[1:]
    )


def _bandwidth_line(rep: dict[str, Any]) -> Text:
    """The job's one bandwidth with its definition, under the summary."""
    bw = rep.get("bandwidth") or {}
    if not bw.get("definition"):
        return Text("")
    return Text(
        f"bandwidth {human_rate(bw.get('bw'))} (both directions) = {bw['definition']}",
        style="dim",
    )


def human_seconds(s: float | None) -> str:
    """Seconds with three significant digits (a 40-ms job is not "0 s")."""
    return "-" if s is None else f"{s:.3g} s"


def _unknown(rep: dict[str, Any], piece: str) -> str:
    """An empty list's cell: "unknown" when a topology gap explains it, else "-" (none)."""
    return "unknown" if any(g["piece"] == piece for g in rep.get("gaps") or []) else "-"


def access_patterns(files: list[dict[str, Any]], most: int = 10, total: int | None = None) -> Table:
    """Sequential / strided / random accesses per file and op, over all its processes
    (SIOX FileSurveyor; per-process streams are in the JSON). `total`: rows in all, when
    `files` is already cut."""
    total = max(total or 0, len(files))
    shown = f"the {most} of {total:,} with most accesses" if total > most else "all"
    t = Table(title=f"Access patterns per file ({shown})", title_justify="left")
    for col in ("path", "op", "procs", "accesses", "sequential", "strided", "random", "pattern"):
        t.add_column(col, justify="left" if col in ("path", "op", "pattern") else "right")
    for f in files[:most]:
        pattern = f["pattern"]
        if pattern == "strided" and f["strides"]:
            pattern += f" {human_bytes(f['strides'][0]['stride'])}"
        t.add_row(
            f["path"],
            f["op"],
            f"{f['processes']:,}",
            f"{f['accesses']:,}",
            f"{f['sequential']:,}",
            f"{f['strided']:,}",
            f"{f['random']:,}",
            pattern,
        )
    return t


def _short_list(items: list[str], most: int = 6) -> str:
    if not items:
        return "-"
    return ", ".join(items[:most]) + (f" (+{len(items) - most} more)" if len(items) > most else "")


def _width(stream: Any) -> int | None:
    """Real terminals report their width; pipes and files get a roomy 120 columns."""
    if os.environ.get("COLUMNS"):
        return None
    return None if stream.isatty() else 120


def stdout_console() -> Console:
    return Console(highlight=False, width=_width(sys.stdout))


def stderr_console() -> Console:
    return Console(stderr=True, width=_width(sys.stderr))


SPARKS = " ▁▂▃▄▅▆▇█"


def sparkline(values: list[float], width: int = 48) -> str:
    """Values squeezed into `width` cells (summed per cell), scaled to their own max."""
    if not values:
        return ""
    cells = max(1, min(width, len(values)))
    per = len(values) / cells
    sums = [sum(values[int(i * per) : int((i + 1) * per)]) for i in range(cells)]
    top = max(sums) or 1.0
    return "".join(SPARKS[min(8, math.ceil(8 * v / top))] if v > 0 else " " for v in sums)


def layer_series(series: dict[str, Any]) -> Table:
    """The job's bytes over time at each layer: amplification or a stall shows at a glance."""
    t = Table(
        title=f"Bytes per layer over the job ({series['bin_s']}-s bins from {series['start']})",
        title_justify="left",
    )
    t.add_column("layer")
    t.add_column("op")
    t.add_column("total", justify="right")
    t.add_column("over time")
    for layer, metrics in series.get("layers", {}).items():
        for m in ("read_bytes", "write_bytes"):
            values = metrics.get(m) or []
            if sum(values) > 0:
                t.add_row(layer, m.split("_")[0], human_bytes(sum(values)), sparkline(values))
    return t
