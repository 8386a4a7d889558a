"""The per-job report of Beacon section 3.3, built from every layer at once.

Client records give the job's own view (bytes, ops, processes, mode, time series); the
topology maps its nodes to forwarders and its files to OSTs; server samples attributed to
the job give the bytes each layer actually moved, which is how amplification shows up.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.analyze import bandwidth
from iolens.analyze.catalog import titles
from iolens.analyze.iomode import MINOR_FILE_SHARE, classify
from iolens.analyze.jobreport import JobReport, Series
from iolens.analyze.timeseries import spread
from iolens.model.schema import (
    DATA_OPS,
    LAYER_LEVELS,
    MDS_OPS,
    UPPER_LAYERS,
    layer_level_sql,
)
from iolens.model.system_files import STREAM_IDS
from iolens.store import queries
from iolens.store.base import Store, registered

BIN_S = 1.0  # resolution of the time series plotted (never of a bandwidth: `bandwidth.py`)


def series_of(records: pa.Table) -> Series:
    t0 = records.column("t0").to_numpy()
    t1 = records.column("t1").to_numpy()
    if len(t0) == 0:
        empty = np.zeros(0)
        return Series(0.0, empty, empty, empty, empty)
    origin = float(np.floor(t0.min()))
    nbins = int(np.ceil((t1.max() - origin) / BIN_S)) + 1
    op = records.column("op").to_numpy(zero_copy_only=False)
    nbytes = (records.column("size").to_numpy() * records.column("count").to_numpy()).astype(float)
    count = records.column("count").to_numpy().astype(float)

    def of(mask: np.ndarray, amount: np.ndarray) -> np.ndarray:
        return spread(t0[mask], t1[mask], amount[mask], origin, BIN_S, nbins)

    is_data = np.isin(op, DATA_OPS)
    return Series(
        origin,
        of(op == "read", nbytes),
        of(op == "write", nbytes),
        of(is_data, count),
        of(np.isin(op, MDS_OPS), count),
    )


TOP_FILES = 10


def _top_files(fid: np.ndarray, process: np.ndarray, nbytes: np.ndarray) -> list[dict[str, Any]]:
    """The busiest data files: id, bytes and sharing processes (layouts are added later)."""
    if len(fid) == 0:
        return []
    files, idx = np.unique(fid, return_inverse=True)
    per_file = np.bincount(idx, weights=nbytes)
    top = np.argsort(-per_file, kind="stable")[:TOP_FILES]
    return [
        {
            "file_id": int(files[i]),
            "bytes": int(per_file[i]),
            "procs": len(np.unique(process[idx == i])),
        }
        for i in top
    ]


def build(store: Store, job_id: str, with_series: bool = False) -> JobReport:
    """The report of one job; NotFound for an unknown job."""
    queries.job(store, job_id)
    return build_many(store, [job_id], with_series=with_series)[0]


# Jobs per bulk query of client records: bounds the records held in memory at once.
CHUNK_JOBS = 256
_MDS_OPS_SQL = ", ".join(f"'{o}'" for o in MDS_OPS)
_IO_OPS_SQL = f"'read', 'write', {_MDS_OPS_SQL}"
#: Client layers in the order of their codes in _RECORDS_SQL (anything else: "other").
CLIENT_LAYERS = ("posix", "stdio", "mpiio", "hdf5", "pnetcdf")
_LAYER_CODE_SQL = (
    "CASE layer "
    + " ".join(f"WHEN '{n}' THEN {i}" for i, n in enumerate(CLIENT_LAYERS))
    + f" ELSE {len(CLIENT_LAYERS)} END"
)
_UPPER_SQL = "(" + ", ".join(f"'{n}'" for n in UPPER_LAYERS) + ")"
_LEVEL_SQL = layer_level_sql()
#: LAYER_LEVELS by layer code (the last entry: "other").
_LEVEL_OF_CODE = np.array([*(LAYER_LEVELS[n] for n in CLIENT_LAYERS), 0])
# Seconds inside the record's calls (the tracer's own per-call timing); rows without it
# (none of iolens's sources leave it out) count their span.
_DUR_SQL = "coalesce(dur_ns / 1e9, (epoch_us(t_end) - epoch_us(t_start)) / 1e6)"
# A traced job's I/O is that on its own files. The system files every process reads (a
# library's tables, /proc, /sys: what Darshan leaves out by default, and what never reaches
# the parallel file system) would otherwise pass for files all ranks share, and hwloc's
# scan of /sys and /proc for ~900 metadata ops per MPI rank (`_iolens_skip`: the traced
# jobs' system files, see `build_many`). Who did I/O on which files also leaves out the
# standard streams.
_STREAMS_SQL = ", ".join(str(i) for i in sorted(STREAM_IDS))
_NOT_SYSTEM_SQL = "({c}job_id, {c}file_id) NOT IN (SELECT (job_id, file_id) FROM _iolens_skip)"
_JOB_FILE_SQL = f"file_id NOT IN ({_STREAMS_SQL}) AND {_NOT_SYSTEM_SQL.format(c='')}"
# Every client record of the chunk's jobs, and whether it counts towards the totals:
# an MPI-IO call and the POSIX calls it causes describe the same I/O, so each file's
# reads, writes and metadata ops count from one layer (queries.counted_layer_ctes).
_COUNTED_JOIN, _COUNTED = queries.counted_sql("c")
_RECORDS_SQL = f"""
WITH {queries.counted_layer_ctes("_iolens_chunk")}
SELECT c.job_id, c.file_id,
       CASE WHEN op = 'read' THEN 0 WHEN op = 'write' THEN 1
            WHEN op IN ({_MDS_OPS_SQL}) THEN 2 ELSE 3 END AS op,
       {_LAYER_CODE_SQL} AS layer,
       (size * count)::DOUBLE AS nbytes, count::DOUBLE AS count,
       epoch_us(t_start) / 1e6 AS t0, epoch_us(t_end) / 1e6 AS t1,
       {_COUNTED} AS counted, hash(c.node, c.pid) AS process, {_DUR_SQL} AS dur
FROM client_io c JOIN _iolens_chunk USING (job_id) {_COUNTED_JOIN}
WHERE {_NOT_SYSTEM_SQL.format(c="c.")}
ORDER BY c.job_id
"""
_HAS_UPPER_SQL = (
    f"SELECT 1 FROM client_io JOIN _iolens_chunk USING (job_id) WHERE layer IN {_UPPER_SQL} LIMIT 1"
)
# The same without MPI-IO/HDF5/PnetCDF records in the chunk: every record counts.
_FLAT_RECORDS_SQL = f"""
SELECT job_id, file_id,
       CASE WHEN op = 'read' THEN 0 WHEN op = 'write' THEN 1
            WHEN op IN ({_MDS_OPS_SQL}) THEN 2 ELSE 3 END AS op,
       {_LAYER_CODE_SQL} AS layer,
       (size * count)::DOUBLE AS nbytes, count::DOUBLE AS count,
       epoch_us(t_start) / 1e6 AS t0, epoch_us(t_end) / 1e6 AS t1, true AS counted,
       hash(node, pid) AS process, {_DUR_SQL} AS dur
FROM client_io JOIN _iolens_chunk USING (job_id)
WHERE {_NOT_SYSTEM_SQL.format(c="")} ORDER BY job_id
"""
_FLAT_PAIRS_SQL = f"""
SELECT job_id, hash(node, pid) AS process, file_id, sum(size * count)::DOUBLE AS nbytes
FROM client_io JOIN _iolens_chunk USING (job_id)
WHERE op IN ('read', 'write') AND {_JOB_FILE_SQL}
GROUP BY ALL ORDER BY job_id
"""
# Bytes per (process, data file): all the I/O mode and the busiest files need. Who shares
# a file is the application's view: the records of a file's outermost layer (HDF5 over
# MPI-IO over POSIX; collective buffering leaves the POSIX I/O to a few aggregators).
_PAIRS_SQL = f"""
WITH d AS (
  SELECT job_id, node, pid, file_id, size * count AS b, {_LEVEL_SQL} AS lv
  FROM client_io JOIN _iolens_chunk USING (job_id)
  WHERE op IN ('read', 'write') AND {_JOB_FILE_SQL}
  QUALIFY lv = max(lv) OVER (PARTITION BY job_id, file_id))
SELECT job_id, hash(node, pid) AS process, file_id, sum(b)::DOUBLE AS nbytes
FROM d GROUP BY ALL ORDER BY job_id
"""
_PER_JOB_SQL = {
    "layers": "SELECT job_id, kind, sum(read_bytes) AS r, sum(write_bytes) AS w, "
    "sum(md_ops) AS md FROM server_samples JOIN _iolens_ids USING (job_id) "
    "GROUP BY ALL ORDER BY kind",
    "io": "SELECT job_id, count(DISTINCT node) AS nodes, count(DISTINCT (node, pid)) AS procs, "
    "list(DISTINCT node ORDER BY node) AS node_names "
    f"FROM client_io JOIN _iolens_ids USING (job_id) WHERE op IN ({_IO_OPS_SQL}) "
    f"AND {_JOB_FILE_SQL} GROUP BY job_id",
    "forwarders": "SELECT job_id, list(DISTINCT forwarder ORDER BY forwarder) AS fwd FROM "
    "(SELECT DISTINCT job_id, node FROM client_io JOIN _iolens_ids USING (job_id) "
    f" WHERE op IN ({_IO_OPS_SQL}) AND {_JOB_FILE_SQL}) "
    "JOIN forwarding ON node = compute_node GROUP BY job_id",
    # Each job's data files: how many, how many without a known layout, and the OSTs of
    # the others (see `_job_osts`); a dataset's files view (the newest row of each file)
    # is read for these files only
    "data_files": "WITH df AS (SELECT DISTINCT job_id, file_id FROM client_io JOIN _iolens_ids "
    f"USING (job_id) WHERE op IN ('read', 'write') AND {_JOB_FILE_SQL}), "
    "lay AS (SELECT file_id, any_value(osts) AS osts FROM files "
    "WHERE file_id IN (SELECT file_id FROM df) GROUP BY file_id) "
    "SELECT df.job_id, count(*) AS n, "
    "count(*) FILTER (WHERE coalesce(len(lay.osts), 0) = 0) AS blind, "
    "flatten(list(lay.osts) FILTER (WHERE lay.osts IS NOT NULL)) AS osts "
    "FROM df LEFT JOIN lay USING (file_id) GROUP BY df.job_id",
    "sampled_osts": "SELECT DISTINCT job_id, component_id AS ost FROM server_samples "
    "JOIN _iolens_ids USING (job_id) WHERE kind = 'ost'",
    "phases": "SELECT p.* FROM job_phases p JOIN _iolens_ids USING (job_id) ORDER BY job_id, phase",
}


def _grouped(store: Store, sql: str, key: str = "job_id") -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in store.query(sql).to_pylist():
        out.setdefault(r[key], []).append(r)
    return out


def _job_osts(
    files: dict[str, list[dict[str, Any]]], sampled: dict[str, list[dict[str, Any]]]
) -> dict[str, list[dict[str, Any]]]:
    """Each job's OSTs, sorted: its data files' stripes plus those whose jobstats name it;
    with how many data files it has, how many of them have no known layout, and whether
    jobstats name it (what the `osts` gap needs)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for job_id in files.keys() | sampled.keys():
        row = (files.get(job_id) or [{"n": 0, "blind": 0, "osts": []}])[0]
        names = set(row["osts"] or []) | {r["ost"] for r in sampled.get(job_id, [])}
        out[job_id] = [
            {
                "osts": sorted(names),
                "data_files": int(row["n"]),
                "without_layout": int(row["blind"]),
                "jobstats": job_id in sampled,
            }
        ]
    return out


def _split(table: pa.Table) -> tuple[dict[str, np.ndarray], dict[str, tuple[int, int]]]:
    """Columns of a job-sorted table and each job's row range."""
    cols = {n: table.column(n).to_numpy() for n in table.column_names if n != "job_id"}
    ids = table.column("job_id").to_numpy(zero_copy_only=False)
    if len(ids) == 0:
        return cols, {}
    cut = np.nonzero(ids[1:] != ids[:-1])[0] + 1
    return cols, {
        str(ids[a]): (int(a), int(b))
        for a, b in zip(np.r_[0, cut], np.r_[cut, len(ids)], strict=True)
    }


def build_many(
    store: Store,
    job_ids: list[str],
    with_series: bool = False,
    on_job: Callable[[str], None] | None = None,
) -> list[JobReport]:
    """Reports of many jobs from a handful of bulk queries (unknown ids are skipped);
    `on_job` is called as each job's report is done (a progress bar's step).

    Per-job queries cost milliseconds each in fixed overhead, and a day of a 1,024-node
    cluster has ~1,000 jobs, so everything is fetched for all jobs at once and grouped by
    job in SQL; only the per-record work (time series, I/O mode) runs per job, in numpy.
    """
    ids = pa.table({"job_id": pa.array(job_ids, pa.string())})
    with registered(store, "_iolens_ids", ids):
        skip = bandwidth.system_files(store, "_iolens_ids")
    with registered(store, "_iolens_skip", skip):
        with registered(store, "_iolens_ids", ids):
            jobs = {
                r["job_id"]: r
                for r in store.query(
                    "SELECT j.* FROM jobs j JOIN _iolens_ids USING (job_id)"
                ).to_pylist()
            }
            extra = {k: _grouped(store, sql) for k, sql in _PER_JOB_SQL.items()}
            extra["files"] = extra["data_files"]
            extra["osts"] = _job_osts(extra.pop("data_files"), extra.pop("sampled_osts"))
            extra["findings"] = _grouped(
                store,
                _FINDINGS_SQL.format(join="JOIN _iolens_ids ON subject_id = job_id"),
                "subject_id",
            )
        reports: list[JobReport] = []
        tops: list[tuple[JobReport, list[dict[str, Any]]]] = []
        facts: dict[str, dict[str, Any]] = {}  # per job, for the topology gaps
        known = [j for j in job_ids if j in jobs]
        for i in range(0, len(known), CHUNK_JOBS):
            chunk = known[i : i + CHUNK_JOBS]
            chunk_ids = pa.table({"job_id": pa.array(chunk, pa.string())})
            with registered(store, "_iolens_chunk", chunk_ids):
                # Most jobs never call MPI-IO or HDF5: skip the layer bookkeeping for them.
                layered = store.query(_HAS_UPPER_SQL).num_rows > 0
                rec, rec_at = _split(store.query(_RECORDS_SQL if layered else _FLAT_RECORDS_SQL))
                pairs, pair_at = _split(store.query(_PAIRS_SQL if layered else _FLAT_PAIRS_SQL))
                logged = bandwidth.from_store(store, "_iolens_chunk")
            for job_id in chunk:
                a, b = rec_at.get(job_id, (0, 0))
                c, d = pair_at.get(job_id, (0, 0))
                rep, top = _report(
                    jobs[job_id],
                    {k: v[a:b] for k, v in rec.items()},
                    {k: v[c:d] for k, v in pairs.items()},
                    with_series,
                    logged.get(job_id) or _traced_bandwidth({k: v[a:b] for k, v in rec.items()}),
                )
                facts[job_id] = _attach(rep, {k: v.get(job_id, []) for k, v in extra.items()})
                reports.append(rep)
                tops.append((rep, top))
                if on_job:
                    on_job(job_id)
    _topology_gaps(store, reports, facts)
    # Layouts of the busiest files only, all jobs at once.
    layouts = queries.file_layouts(store, sorted({t["file_id"] for _, top in tops for t in top}))
    for rep, top in tops:
        rep.top_files = [
            {
                "file_id": t["file_id"],
                "path": layouts.get(t["file_id"], {}).get("path"),
                "bytes": t["bytes"],
                "read_bytes": t["read_bytes"],
                "write_bytes": t["write_bytes"],
                "procs": t["procs"],
                "osts": layouts.get(t["file_id"], {}).get("osts", []),
            }
            for t in top
        ]
    return reports


def _attach(rep: JobReport, extra: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The per-job figures that came from grouped queries; returns what the topology gaps
    need: the job's I/O nodes and how its OST list was found."""
    for r in extra["layers"]:
        rep.layers[r["kind"]] = {
            "read_bytes": int(r["r"] or 0),
            "write_bytes": int(r["w"] or 0),
            "md_ops": int(r["md"] or 0),
        }
    io = (extra["io"] or [{"nodes": 0, "procs": 0, "node_names": []}])[0]
    rep.io_nodes, rep.io_procs = int(io["nodes"]), int(io["procs"])
    rep.forwarders = (extra["forwarders"] or [{"fwd": []}])[0]["fwd"]
    osts = (extra["osts"] or [{"osts": [], "data_files": 0, "without_layout": 0}])[0]
    rep.osts = osts["osts"]
    rep.files = int((extra["files"] or [{"n": 0}])[0]["n"])  # data files
    rep.findings = [_finding_json(r) for r in extra["findings"]]
    rep.phases = [_phase_json(r) for r in extra["phases"]]
    return {"nodes": io["node_names"] or [], "osts": osts}


def _topology_gaps(
    store: Store, reports: list[JobReport], facts: dict[str, dict[str, Any]]
) -> None:
    """Each report's `gaps`: the OST list without layouts or jobstats, I/O nodes without a
    forwarder in the map, forwarders and OSTs without a peak (their load levels). Looked
    up for all jobs at once."""
    from iolens.analyze import topology as topo

    nodes = {n for f in facts.values() for n in f["nodes"]}
    unmapped = set(topo.unmapped_nodes(store, nodes))
    used = {c for r in reports for c in (*r.forwarders, *r.osts)}
    no_peak = set(topo.without_peak(store, used, "peak_bw"))
    for rep in reports:
        f = facts.get(rep.job_id, {"nodes": [], "osts": {"data_files": 0}})
        o = f["osts"]
        n, blind = o.get("data_files", 0), o.get("without_layout", 0)
        if n and not rep.osts:
            rep.gaps.append(
                topo.Missing(
                    "osts",
                    (),
                    f"OST list unknown: none of the job's {n} data files has a known Lustre "
                    "layout, and no OST jobstats name the job",
                    topo.REMEDY_LAYOUTS,
                ).row()
            )
        elif blind and not o.get("jobstats"):
            rep.gaps.append(
                topo.Missing(
                    "osts",
                    (),
                    f"OST list may be incomplete: {blind} of the job's {n} data files have no "
                    "known layout, and no OST jobstats name the job",
                    topo.REMEDY_LAYOUTS,
                ).row()
            )
        lost = [x for x in f["nodes"] if x in unmapped]
        if lost:
            rep.gaps.append(
                topo.Missing(
                    "forwarders",
                    tuple(lost),
                    f"forwarder of {len(lost)} of the job's {len(f['nodes'])} I/O nodes "
                    "unknown: not in the forwarding map, so their forwarders are not listed",
                    topo.REMEDY_FORWARDING,
                ).row()
            )
        lacking = [c for c in (*rep.forwarders, *rep.osts) if c in no_peak]
        if lacking:
            rep.gaps.append(
                topo.Missing(
                    "load_levels",
                    tuple(lacking),
                    f"peak bandwidth unknown for {len(lacking)} of the job's forwarders and "
                    "OSTs: their load levels (and the 30 %-of-peak rule) cannot be computed",
                    topo.REMEDY_PEAKS,
                ).row()
            )


_FINDINGS_SQL = (
    'SELECT code, name, severity, subject_kind, subject_id, "start", "end", evidence, '
    "recommendation, target, gain FROM findings {join} WHERE subject_kind = 'job' "
    "ORDER BY TRY_CAST(json_extract_string(gain, '$.seconds') AS DOUBLE) DESC NULLS LAST, "
    "CASE severity WHEN 'critical' THEN 0 WHEN 'warning' THEN 1 ELSE 2 END, code"
)


def _finding_json(r: dict[str, Any]) -> dict[str, Any]:
    out = dict(r)
    out["title"] = titles().get(r["code"], r["name"])  # the rules' one-line summaries
    out["evidence"] = json.loads(r["evidence"]) if r["evidence"] else {}
    out["gain"] = json.loads(r["gain"]) if r.get("gain") else None
    for k in ("start", "end"):
        out[k] = out[k].isoformat() + "Z" if out[k] else None
    return out


def _phase_json(r: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in r.items() if k != "job_id"}
    for k in ("start", "end"):
        out[k] = out[k].isoformat() + "Z" if out[k] else None
    out["duration_s"] = (r["end"] - r["start"]).total_seconds()
    return out


def _report(
    job: dict[str, Any],
    rec: dict[str, np.ndarray],
    pairs: dict[str, np.ndarray],
    with_series: bool,
    bw: bandwidth.Bandwidth | None = None,
) -> tuple[JobReport, list[dict[str, Any]]]:
    """What needs the job's client records, computed per job in numpy.

    `bw` is the job's bandwidth: from its Darshan counters (`bandwidth.from_store`), else
    from its client records' own call durations (`_traced_bandwidth`, the default).
    """
    layers = _io_layers(rec)
    spans, span_bytes = _app_spans(rec)
    start, end = job["start"], job["end"]
    runtime = (end - start).total_seconds() if start and end else None
    bw = (bw or _traced_bandwidth(rec)).clipped(runtime)
    rec = {k: v[rec["counted"]] for k, v in rec.items()}  # each I/O once: its lowest layer
    op, nbytes, count = rec["op"], rec["nbytes"], rec["count"]
    is_read, is_write, is_md = op == 0, op == 1, op == 2
    is_data = is_read | is_write
    series = _series(rec["t0"], rec["t1"], op, nbytes, count)
    data_ops = int(count[is_data].sum())
    io_time = bw.io_time_s
    # op rates stay per second of activity (what a server sees), not per slowest rank
    active_s = float(series.active.sum() * BIN_S)
    data_s = float(((series.read > 0) | (series.write > 0) | (series.ops > 0)).sum() * BIN_S)
    compute = {
        "read_bytes": int(nbytes[is_read].sum()),
        "write_bytes": int(nbytes[is_write].sum()),
        "md_ops": int(count[is_md].sum()),
    }
    rep = JobReport(
        job_id=job["job_id"],
        user=job["user"],
        app=job["app"],
        state=job["state"],
        start=start,
        end=end,
        runtime_s=runtime,
        nodes=len(job["nodes"] or []),
        nprocs=job["nprocs"],
        io_mode=classify(pairs["process"], pairs["file_id"], pairs["nbytes"], job["nprocs"]),
        read_bytes=compute["read_bytes"],
        write_bytes=compute["write_bytes"],
        read_ops=int(count[is_read].sum()),
        write_ops=int(count[is_write].sum()),
        read_bw_avg=bw.read_bw,
        write_bw_avg=bw.write_bw,
        iops_avg=data_ops / data_s if data_s > 0 else 0.0,
        md_ops=compute["md_ops"],
        md_ops_rate=compute["md_ops"] / active_s if active_s > 0 else 0.0,
        io_time_s=io_time,
        io_procs=0,
        io_nodes=0,
        files=0,
        avg_request=float(nbytes[is_data].sum() / data_ops) if data_ops else 0.0,
        forwarders=[],
        osts=[],
        layers={"compute": compute},
        top_files=[],
        series=series if with_series else None,
        node_list=list(job["nodes"] or []),
        io_layers=layers,
        bandwidth=_bandwidth_json(bw),
        read_span_s=spans[0],
        write_span_s=spans[1],
        read_bw_span=span_bytes[0] / spans[0] if spans[0] > 0 else 0.0,
        write_bw_span=span_bytes[1] / spans[1] if spans[1] > 0 else 0.0,
    )
    top = _top_files(pairs["file_id"], pairs["process"], pairs["nbytes"])
    _split_bytes(top, rec["file_id"], op, nbytes)
    return rep, top


def _traced_bandwidth(rec: dict[str, np.ndarray]) -> bandwidth.Bandwidth:
    """The job's bandwidth from its client records' call durations (every layer: the
    definition picks each file's outermost one; the records hold no system files)."""
    code = rec["layer"]
    names = np.array([*CLIENT_LAYERS, "other"], dtype=object)[np.minimum(code, len(CLIENT_LAYERS))]
    return bandwidth.of_calls(
        rec["process"], rec["file_id"], names, rec["op"], rec["nbytes"], rec["dur"],
        rec["t0"], rec["t1"],
    )  # fmt: skip


def _bandwidth_json(bw: bandwidth.Bandwidth) -> dict[str, Any]:
    return {
        "definition": bw.described(),
        "layer": bw.layer,
        "read_bytes": bw.read_bytes,
        "write_bytes": bw.write_bytes,
        "read_time_s": bw.read_time_s,
        "write_time_s": bw.write_time_s,
        "io_time_s": bw.io_time_s,
        "read_bw": bw.read_bw,
        "write_bw": bw.write_bw,
        "bw": bw.bw,
    }


def _split_bytes(
    top: list[dict[str, Any]], fid: np.ndarray, op: np.ndarray, nbytes: np.ndarray
) -> None:
    """Read and write bytes of each top file, counted at its lowest layer (`bytes` is the
    application's view: the MPI-IO layer's, for files it wrote through MPI-IO)."""
    for t in top:
        m = fid == t["file_id"]
        t["read_bytes"] = int(nbytes[m & (op == 0)].sum())
        t["write_bytes"] = int(nbytes[m & (op == 1)].sum())


def _io_layers(rec: dict[str, np.ndarray]) -> dict[str, dict[str, int]]:
    """Bytes and ops per client layer, every record counted in its own layer."""
    out: dict[str, dict[str, int]] = {}
    layer, op, nbytes, count = rec["layer"], rec["op"], rec["nbytes"], rec["count"]
    for code in np.unique(layer):
        m = layer == code
        name = CLIENT_LAYERS[code] if code < len(CLIENT_LAYERS) else "other"
        out[name] = {
            "read_bytes": int(nbytes[m & (op == 0)].sum()),
            "write_bytes": int(nbytes[m & (op == 1)].sum()),
            "read_ops": int(count[m & (op == 0)].sum()),
            "write_ops": int(count[m & (op == 1)].sum()),
            "md_ops": int(count[m & (op == 2)].sum()),
        }
    return out


def _app_spans(rec: dict[str, np.ndarray]) -> tuple[tuple[float, float], tuple[int, int]]:
    """((read, write) seconds, (read, write) bytes) of the job's data files.

    Seconds run from the first op's start to the last op's end, at the outermost layer:
    the HDF5/PnetCDF calls, else the MPI-IO calls, when the job made them (they enclose the
    calls they cause below, and are what the program times), else the counted records.
    Data files are those the I/O mode looks at (MINOR_FILE_SHARE of the busiest file's
    bytes or more), so a log line or a config read at another time does not stretch the
    span. Bytes are those of the same calls (at an upper layer: what the program asked for).
    """
    spans, nbytes = [], []
    data = rec["op"] <= 1
    fid, size = rec["file_id"], rec["nbytes"]
    counted = rec["counted"]
    files, idx = np.unique(fid[data & counted], return_inverse=True)
    per_file = np.bincount(idx, weights=size[data & counted]) if len(files) else np.zeros(0)
    major = files[per_file >= MINOR_FILE_SHARE * per_file.max()] if len(files) else files
    on_data = np.isin(fid, major)
    level = _LEVEL_OF_CODE[np.minimum(rec["layer"], len(CLIENT_LAYERS))]
    for code in (0, 1):
        m = (rec["op"] == code) & on_data
        top = level[m].max() if m.any() else 0
        m = m & (level == top) if top > 0 else m & counted
        # the bytes of the calls the span is taken over: an MPI job's MPI-IO bytes, not
        # what its launcher read meanwhile (Open MPI's orted reads pci.ids, 2.7 MB a node)
        nbytes.append(int(size[m].sum()))
        spans.append(float(rec["t1"][m].max() - rec["t0"][m].min()) if m.any() else 0.0)
    return (spans[0], spans[1]), (nbytes[0], nbytes[1])


def _series(
    t0: np.ndarray, t1: np.ndarray, op: np.ndarray, nbytes: np.ndarray, count: np.ndarray
) -> Series:
    if len(t0) == 0:
        empty = np.zeros(0)
        return Series(0.0, empty, empty, empty, empty)
    origin = float(np.floor(t0.min()))
    nbins = int(np.ceil((t1.max() - origin) / BIN_S)) + 1
    amount, cnt = nbytes.astype(float), count.astype(float)

    def of(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
        return spread(t0[mask], t1[mask], values[mask], origin, BIN_S, nbins)

    return Series(
        origin, of(op == 0, amount), of(op == 1, amount), of(op <= 1, cnt), of(op == 2, cnt)
    )
