"""The per-job report of Beacon section 3.3, built from every layer at once.

Client records give the job's own view (bytes, ops, processes, mode, time series); the
topology maps its nodes to forwarders and its files to OSTs; server samples attributed to
the job give the bytes each layer actually moved, which is how amplification shows up.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.analyze.iomode import classify
from iolens.analyze.timeseries import spread
from iolens.model.schema import DATA_OPS, MDS_OPS
from iolens.store import queries
from iolens.store.base import Store

BIN_S = 1.0  # resolution of bandwidth time series and of "peak" bandwidth


@dataclass
class Series:
    """Per-second time series of the job's client I/O."""

    origin: float  # epoch seconds of bin 0
    read: np.ndarray  # bytes per bin
    write: np.ndarray
    ops: np.ndarray  # data ops per bin
    md: np.ndarray  # metadata ops per bin

    @property
    def active(self) -> np.ndarray:
        return (self.read > 0) | (self.write > 0) | (self.ops > 0) | (self.md > 0)


@dataclass
class JobReport:
    job_id: str
    user: str
    app: str | None
    state: str | None
    start: datetime | None
    end: datetime | None
    runtime_s: float | None
    nodes: int
    nprocs: int | None
    io_mode: str | None
    read_bytes: int
    write_bytes: int
    read_ops: int
    write_ops: int
    read_bw_avg: float  # bytes/s over seconds with read activity
    read_bw_peak: float  # max bytes/s in one second
    write_bw_avg: float
    write_bw_peak: float
    iops_avg: float  # data ops/s over seconds with data activity
    md_ops: int  # ops that reach the metadata server
    md_ops_rate: float  # metadata ops/s over seconds with any I/O activity
    io_time_s: float  # seconds with any I/O activity
    io_procs: int
    io_nodes: int
    files: int
    avg_request: float  # bytes per data op
    forwarders: list[str]
    osts: list[str]
    layers: dict[str, dict[str, int]]
    top_files: list[dict[str, Any]]  # the busiest data files: path, bytes, procs, osts
    findings: list[dict[str, Any]] = field(default_factory=list)
    series: Series | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("series")
        for k in ("start", "end"):
            d[k] = d[k].isoformat() + "Z" if d[k] else None
        return d


def _span(values: np.ndarray, active: np.ndarray) -> tuple[float, float]:
    """(average over active bins, peak bin) of a per-bin amount, as per-second rates."""
    if not active.any():
        return 0.0, 0.0
    return float(values.sum() / (active.sum() * BIN_S)), float(values.max() / BIN_S)


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


def _top_files(
    fid: np.ndarray, process: np.ndarray, nbytes: np.ndarray, layouts: dict[int, dict[str, Any]]
) -> list[dict[str, Any]]:
    if len(fid) == 0:
        return []
    files, idx = np.unique(fid, return_inverse=True)
    per_file = np.bincount(idx, weights=nbytes)
    top = np.argsort(-per_file, kind="stable")[:TOP_FILES]
    out = []
    for i in top:
        mask = idx == i
        layout = layouts.get(int(files[i]), {})
        out.append(
            {
                "file_id": int(files[i]),
                "path": layout.get("path"),
                "bytes": int(per_file[i]),
                "procs": len(np.unique(process[mask])),
                "osts": layout.get("osts", []),
            }
        )
    return out


def build(store: Store, job_id: str, with_series: bool = False) -> JobReport:
    job = queries.job(store, job_id)
    rec = queries.client_io(store, job_id)
    op = rec.column("op").to_numpy(zero_copy_only=False)
    size = rec.column("size").to_numpy()
    count = rec.column("count").to_numpy()
    nbytes = size * count
    is_read, is_write = op == "read", op == "write"
    is_data = is_read | is_write
    node = rec.column("node").to_numpy(zero_copy_only=False)
    pid = rec.column("pid").to_numpy()
    process = (
        np.char.add(node.astype(str), np.char.add(":", pid.astype(str))) if len(node) else node
    )
    fid = rec.column("file_id").to_numpy()

    series = series_of(rec)
    active = series.active
    read_avg, read_peak = _span(series.read, series.read > 0)
    write_avg, write_peak = _span(series.write, series.write > 0)
    data_active = (series.read > 0) | (series.write > 0) | (series.ops > 0)
    data_ops = int(count[is_data].sum())
    io_time = float(active.sum() * BIN_S)

    io_nodes = sorted(set(node[is_data | np.isin(op, MDS_OPS)].tolist()))
    data_files = np.unique(fid[is_data]).tolist()
    layouts = queries.file_layouts(store, data_files)
    osts = sorted(
        {o for f in data_files for o in layouts.get(f, {}).get("osts", [])}
        | set(queries.osts_with_job_samples(store, job_id))
    )
    layers = {
        "compute": {
            "read_bytes": int(nbytes[is_read].sum()),
            "write_bytes": int(nbytes[is_write].sum()),
            "md_ops": int(count[np.isin(op, MDS_OPS)].sum()),
        }
    }
    layers.update(queries.layer_bytes(store, job_id))
    start, end = job["start"], job["end"]
    return JobReport(
        job_id=job_id,
        user=job["user"],
        app=job["app"],
        state=job["state"],
        start=start,
        end=end,
        runtime_s=(end - start).total_seconds() if start and end else None,
        nodes=len(job["nodes"] or []),
        nprocs=job["nprocs"],
        io_mode=classify(process[is_data], fid[is_data], nbytes[is_data], job["nprocs"]),
        read_bytes=layers["compute"]["read_bytes"],
        write_bytes=layers["compute"]["write_bytes"],
        read_ops=int(count[is_read].sum()),
        write_ops=int(count[is_write].sum()),
        read_bw_avg=read_avg,
        read_bw_peak=read_peak,
        write_bw_avg=write_avg,
        write_bw_peak=write_peak,
        iops_avg=data_ops / (data_active.sum() * BIN_S) if data_active.any() else 0.0,
        md_ops=layers["compute"]["md_ops"],
        md_ops_rate=layers["compute"]["md_ops"] / io_time if io_time else 0.0,
        io_time_s=io_time,
        io_procs=len(np.unique(process[is_data | np.isin(op, MDS_OPS)])) if len(process) else 0,
        io_nodes=len(io_nodes),
        files=len(data_files),
        avg_request=float(nbytes[is_data].sum() / data_ops) if data_ops else 0.0,
        forwarders=queries.forwarders_of(store, io_nodes),
        osts=osts,
        layers=layers,
        top_files=_top_files(fid[is_data], process[is_data], nbytes[is_data], layouts),
        findings=queries.findings_for(store, "job", job_id),
        series=series if with_series else None,
    )
