"""What the query commands show, as JSON-ready objects: shared by the CLI and the HTTP API.

`iolens jobs --json` and `GET /api/v1/jobs` must print the same thing, so both call these
functions and serialise with `render.to_json`; the CLI's human tables are drawn from the
same objects, whichever side computed them.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from iolens.errors import IolensError
from iolens.parse._common import is_digits
from iolens.store.base import Store

if TYPE_CHECKING:
    from iolens.analyze.jobreport import JobReport

_JOB_KEYS = (
    "job_id",
    "user",
    "app",
    "start",
    "end",
    "state",
    "io_mode",
    "nprocs",
    "read_bytes",
    "write_bytes",
    "read_bw_avg",
    "write_bw_avg",
    "md_ops",
    "findings",
)
_SPAN_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# Along the I/O path, as the report reads.
_LAYER_ORDER = ("compute", "forwarder", "ost", "mds")
#: `iolens job --json` lists this many access-pattern streams, and as many per-file rows
#: (most accesses first; both summed over every stream). An N-N job of 25,600 processes
#: would otherwise print 8 MB of JSON; `access_pattern_counts` says how many there are.
ACCESS_PATTERN_ROWS = 200


class AnalysisFailed(IolensError):
    """The per-job report could not be built from the job's data (`analysis_errors` keeps
    what the analyses said about it)."""

    def __init__(self, job_id: str, error: str) -> None:
        self.job_id = job_id
        super().__init__(f"job {job_id}: analysis failed: report: {error}")


def job_row(row: dict[str, Any]) -> dict[str, Any]:
    """One `iolens jobs --json` entry from a `queries.jobs` row (nodes become a count)."""
    return {"nodes": len(row.get("nodes") or []), **{k: row.get(k) for k in _JOB_KEYS}}


def jobs(store: Store, user: str | None = None, limit: int | None = None) -> list[dict[str, Any]]:
    """`iolens jobs --json`: jobs in start order with their cached summary figures."""
    from iolens.store import queries

    return [job_row(r) for r in queries.jobs(store, user=user, limit=limit)]


def job(
    store: Store, job_id: str, layers: bool = False, built: JobReport | None = None
) -> dict[str, Any]:
    """`iolens job ID --json`: the per-job report; NotFound for an unknown job.

    `layers` adds `layer_series`: the job's bytes and ops per 10-s bin at every layer of
    its path (compute, forwarder, ost, mds) and per component, aligned to its start.
    `built` is the job's report when the caller built it already (with series, for plots).
    """
    from iolens.analyze import report
    from iolens.analyze.jobs.access_pattern import survey
    from iolens.analyze.jobs.crosslayer import layer_series
    from iolens.store import queries

    try:
        rep = (built or report.build(store, job_id)).to_dict()
    except IolensError:
        raise
    except Exception as exc:  # the job's data breaks the report itself: say so, not a 500
        raise AnalysisFailed(job_id, f"{type(exc).__name__}: {exc}") from exc
    # Server layers come from a GROUP BY in no particular order: fix it, so the same job
    # prints the same JSON every time (and the same from --db and --server).
    order = {name: i for i, name in enumerate(_LAYER_ORDER)}
    rep["layers"] = dict(
        sorted(rep["layers"].items(), key=lambda kv: (order.get(kv[0], len(order)), kv[0]))
    )
    _file_systems(store, job_id, rep["top_files"])
    found = survey(store, job_id, ACCESS_PATTERN_ROWS)
    rep["access_patterns"] = found.streams
    rep["access_pattern_files"] = found.files
    rep["access_pattern_counts"] = {"streams": found.n_streams, "files": found.n_files}
    if layers:
        rep["layer_series"] = layer_series(store, job_id)
    rep["analysis_errors"] = [
        {**e, "message": f"analysis failed: {e['analysis']}: {e['error']}"}
        for e in queries.analysis_errors(store, job_id)
    ]
    # the straggler servers the analysis found (IOL007's evidence: the report is rebuilt
    # here without the diagnosis that finds them)
    for f in rep.get("findings") or []:
        if f.get("code") == "IOL007" and isinstance(f.get("evidence"), dict):
            rep["stragglers"] = f["evidence"].get("stragglers", [])
    rep["expectation"] = _expectation(store, job_id)
    return rep


def _expectation(store: Store, job_id: str) -> dict[str, Any] | None:
    """The job's place in its system's IO500 box (scaled to its nodes), when the store has
    IO500 runs of one system; None without runs, {"error"} when no box applies."""
    from iolens.analyze import expect

    try:
        if not store.query("SELECT 1 FROM io500_runs LIMIT 1").num_rows:
            return None
        return expect.place(store, job_id)
    except IolensError as exc:
        return {"error": str(exc)}


def _file_systems(store: Store, job_id: str, files: list[dict[str, Any]]) -> None:
    """Each file's `fs`: the type of its mount in the job's Darshan logs' mount tables
    (longest prefix), `lustre` for a file striped over Lustre OSTs, else None."""
    import json

    from iolens.model.mounts import LUSTRE, MountTable, is_lustre_target

    rows = store.query("SELECT mounts FROM darshan_logs WHERE job_id = ?", [job_id]).to_pylist()
    tables = [MountTable(tuple(m) for m in json.loads(r["mounts"] or "[]")) for r in rows]
    for f in files:
        osts = f.get("osts") or []
        if osts and all(is_lustre_target(o) for o in osts):
            f["fs"] = LUSTRE
            continue
        types = (t.fs_type(f.get("path") or "") for t in tables)
        f["fs"] = next((x for x in types if x is not None), None)


def parse_since(value: str | None, now: datetime | None = None) -> datetime | None:
    """ISO time (UTC unless it has an offset) or a span back from now: 30s, 15m, 2h, 7d.

    Naive UTC out, as stored; ValueError names the bad value.
    """
    if value is None:
        return None
    if value[-1:] in _SPAN_UNITS and is_digits(value[:-1].replace(".", "", 1)):
        now = now or datetime.now(UTC).replace(tzinfo=None)
        return now - timedelta(seconds=float(value[:-1]) * _SPAN_UNITS[value[-1]])
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"{value!r} is neither an ISO time nor a span like 2h") from None
    return t.astimezone(UTC).replace(tzinfo=None) if t.tzinfo else t


def series(
    store: Store,
    kind: str | None = None,
    component: str | None = None,
    metric: str | None = None,
    since: str | None = None,
    limit: int = 10_000,
) -> list[dict[str, Any]]:
    """`iolens series --json`: server-side samples in long form, oldest first."""
    from iolens.store import queries

    return queries.series(store, kind, component, metric, parse_since(since), limit)


def table_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`jobs` entries (as computed, or as parsed back from JSON) in the shape the human
    table reads: datetimes for start/end, and a node list of the right length."""
    return [
        {
            **r,
            "start": _time(r.get("start")),
            "end": _time(r.get("end")),
            "nodes": [""] * int(r.get("nodes") or 0),  # the table shows only the count
        }
        for r in rows
    ]


def _time(t: datetime | str | None) -> datetime | None:
    if isinstance(t, str):
        return datetime.fromisoformat(t.replace("Z", "+00:00")).replace(tzinfo=None)
    return t
