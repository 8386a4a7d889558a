"""`iolens report JOB_ID --html FILE`: one self-contained HTML page per job (and
`iolens darshan LOG --html FILE`: the same page for logs diagnosed without a store).

Everything is inline (CSS, SVG plots), so the file can be mailed, attached to a ticket or
opened on an air-gapped login node. The same data as `iolens job ID --json`, plus the
plots, the Darshan modules and factors, and each finding's documentation.
"""

from __future__ import annotations

import functools
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, PackageLoader, select_autoescape

from iolens.model.darshan_own import job_metadata, log_write_hints
from iolens.present.plots import job as plots

if TYPE_CHECKING:
    from iolens.present.darshan_logs import JobDiagnosis
    from iolens.store.base import Store

#: Darshan's request-size buckets (POSIX_SIZE_READ_0_100 ... _1G_PLUS) and their inclusive upper
#: bounds, as darshan-common.h assigns them
SIZE_BUCKETS = (
    ("0_100", 100),
    ("100_1K", 1 << 10),
    ("1K_10K", 10 << 10),
    ("10K_100K", 100 << 10),
    ("100K_1M", 1 << 20),
    ("1M_4M", 4 << 20),
    ("4M_10M", 10 << 20),
    ("10M_100M", 100 << 20),
    ("100M_1G", 1 << 30),
    ("1G_PLUS", None),
)


def size_bars(sizes: tuple[list[str], list[float], list[float]], width: float = 640.0) -> str:
    """The request-size histogram as plain SVG (a few ms; matplotlib takes ~100)."""
    from iolens.present.web import svg

    labels, reads, writes = sizes
    return svg.bars(
        labels,
        [("read", svg.READ, reads), ("write", svg.WRITE, writes)],
        ylabel="requests",
        label="request sizes",
        width=width,
    )


@functools.cache
def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("iolens.present", "templates"),
        autoescape=select_autoescape(["html"]),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["bytes"] = human_bytes
    env.filters["rate"] = lambda v: human_bytes(v) + "/s" if v else "-"
    env.filters["snippets"] = snippets
    env.filters["job_metadata"] = job_metadata
    env.filters["log_write_hints"] = lambda meta: _hints_text(log_write_hints(meta))
    return env


def _hints_text(hints: dict[str, str]) -> str:
    return ";".join(f"{k}={v}" for k, v in hints.items())


def human_bytes(v: float | None) -> str:
    if v is None:
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(v) < 1024 or unit == "TiB":
            return f"{v:.0f} {unit}" if unit == "B" else f"{v:.1f} {unit}"
        v /= 1024
    return str(v)


def snippets(text: str) -> str:
    """Backtick spans become <code>, after escaping (the filter returns safe markup)."""
    from markupsafe import Markup, escape

    parts = str(escape(text)).split("`")
    out = [p if i % 2 == 0 else f"<code>{p}</code>" for i, p in enumerate(parts)]
    return Markup("".join(out))


def render(store: Store, job_id: str) -> str:
    """The report page of one job; NotFound for an unknown job."""
    from iolens.analyze import report
    from iolens.analyze.catalog import catalog
    from iolens.present import views
    from iolens.store.darshan import load_jobs

    full = report.build(store, job_id, with_series=True)
    job = views.job(store, job_id, built=full)
    logs = list(load_jobs(store, job_id))
    docs = catalog()
    figures: list[tuple[str, str]] = []
    if full.series is not None and len(full.series.read):
        t0 = plots.epoch(job["start"]) or full.series.origin
        phases = [(plots.epoch(p["start"]) - t0, plots.epoch(p["end"]) - t0) for p in job["phases"]]
        figures.append(
            (
                "Bytes moved per second of the job (1-s bins, I/O phases shaded)",
                plots.bandwidth_timeline(
                    full.series.origin - t0, full.series.read, full.series.write, phases
                ),
            )
        )
    sizes = _size_histogram(store, job_id, logs)
    if sizes:
        figures.append(("Request sizes", size_bars(sizes)))
    figures += _darshan_figures(logs)
    factors = store.query("SELECT * FROM job_factors WHERE job_id = ?", [job_id]).to_pylist()
    job["findings"] = _documented(job["findings"], docs)
    return _page(job, figures, logs, factors[0] if factors else None)


def _documented(findings: list[dict[str, Any]], docs: dict[str, Any]) -> list[dict[str, Any]]:
    """The findings with their rule's documentation and their evidence as text."""
    out = []
    for f in findings:
        f = dict(f, doc=docs.get(f["code"]))
        f["evidence_json"] = json.dumps(f["evidence"], indent=1, sort_keys=True, default=str)
        out.append(f)
    return out


def _page(
    job: dict[str, Any], figures: list[tuple[str, str]], logs: list[Any], factors: Any
) -> str:
    """The one report template, for a stored job and for logs diagnosed without a store."""
    return (
        _env()
        .get_template("report.html")
        .render(
            job=job,
            figures=figures,
            logs=logs,
            factors=factors,
            generated=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        )
    )


def render_darshan(diag: JobDiagnosis, titles: dict[str, str]) -> str:
    """The report page of Darshan logs diagnosed without a store (`iolens darshan --html`):
    the same page as a stored job's, with what the logs say (no phases, no layers)."""
    from iolens.analyze.catalog import catalog

    rep = diag.to_dict(titles)
    docs = catalog()
    logs = [r.job for r in diag.logs]
    main = max(diag.logs, key=lambda r: r.bytes_read + r.bytes_written)
    exe = rep["exe"][0].split()[0].rsplit("/", 1)[-1] if rep["exe"] and rep["exe"][0] else None
    findings = _documented(rep["findings"], docs)
    job = {
        "job_id": rep["job_id"],
        "app": exe,
        "user": f"uid {rep['uid']}",
        "start": rep["start"],
        "end": rep["end"],
        "runtime_s": rep["run_time_s"],
        "nprocs": rep["nprocs"],
        "read_bytes": rep["bytes_read"],
        "write_bytes": rep["bytes_written"],
        "io_time_s": rep["io_time_s"],
        "files": sum(len(r.job.names) for r in diag.logs),
        "findings": findings,
    }
    figures: list[tuple[str, str]] = []
    sizes = _counter_sizes(logs)
    if sizes and sum(sizes[1]) + sum(sizes[2]):
        figures.append(("Request sizes", size_bars(sizes)))
    figures += _darshan_figures(logs)
    return _page(job, figures, logs, main.factors)


def _counter_sizes(logs: list[Any]) -> tuple[list[str], list[float], list[float]] | None:
    """Requests per size bucket from Darshan's POSIX histograms; None without them."""
    labels = [b for b, _ in SIZE_BUCKETS]
    reads, writes = [0.0] * len(labels), [0.0] * len(labels)
    found = False
    for log in logs:
        posix = log.counters("POSIX")
        for i, (b, _) in enumerate(SIZE_BUCKETS):
            for col, acc in ((f"POSIX_SIZE_READ_{b}", reads), (f"POSIX_SIZE_WRITE_{b}", writes)):
                if col in posix:
                    acc[i] += float(posix[col].sum())
                    found = True
    return (labels, reads, writes) if found else None


def _size_histogram(
    store: Store, job_id: str, logs: list[Any]
) -> tuple[list[str], list[float], list[float]] | None:
    """Requests per size bucket: Darshan's own counters when there are any, else client_io."""
    counted = _counter_sizes(logs)
    labels, reads, writes = counted or ([b for b, _ in SIZE_BUCKETS], [0.0] * 10, [0.0] * 10)
    found = counted is not None
    if not found:
        rows = store.query(
            "SELECT op, size, sum(count) AS n FROM client_io WHERE job_id = ? "
            "AND op IN ('read', 'write') GROUP BY op, size",
            [job_id],
        ).to_pylist()
        for r in rows:
            i = next(
                (
                    k
                    for k, (_, hi) in enumerate(SIZE_BUCKETS)
                    if hi is None or (r["size"] or 0) <= hi
                )
            )
            (reads if r["op"] == "read" else writes)[i] += float(r["n"])
            found = True
    return (labels, reads, writes) if found and (sum(reads) + sum(writes)) else None


def _darshan_figures(logs: list[Any]) -> list[tuple[str, str]]:
    """The zoom-in job view: the sweep-line covering set of each log, when it can be drawn."""
    from iolens.analyze.darshan.zoomin import covering_set
    from iolens.present.plots import covering_set_timeline

    out = []
    for log in logs:
        cover = covering_set(log)
        if cover.cover:
            out.append(
                (
                    f"I/O covering set ({log.exe.split()[0].rsplit('/', 1)[-1] or 'log'})",
                    covering_set_timeline(log, cover),
                )
            )
    return out
