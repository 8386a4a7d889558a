"""What a per-job report holds (Beacon section 3.3); `report.py` builds it from the store.

Apart from the builder so that the job rules, which read a report, do not depend on it:
the builder labels a job's stored findings with the rules' titles (`catalog`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

import numpy as np


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
    # The job's one bandwidth (`analyze/bandwidth.py`): bytes / I/O time of the slowest
    # rank, per direction (`bandwidth` below holds the figures and the definition).
    read_bw_avg: float  # bytes/s: read bytes / the slowest rank's read time
    write_bw_avg: float  # bytes/s: written bytes / the slowest rank's write time
    iops_avg: float  # data ops/s over the seconds with data activity (an op rate, as
    md_ops: int  # ops that reach the metadata server          the servers see it)
    md_ops_rate: float  # metadata ops/s over the seconds with any I/O activity
    io_time_s: float  # the slowest rank's I/O time (read + write + metadata), <= run time
    io_procs: int
    io_nodes: int
    files: int
    avg_request: float  # bytes per data op
    forwarders: list[str]
    osts: list[str]
    layers: dict[str, dict[str, int]]
    top_files: list[dict[str, Any]]  # the busiest data files: path, bytes, procs, osts
    findings: list[dict[str, Any]] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)  # I/O phases (job_phases)
    series: Series | None = None
    # Set by the pipeline for the history rule (IOL006): anomalous phases, neighbours,
    # culprits. Not part of the JSON report: the finding carries it as evidence.
    history: dict[str, Any] | None = None
    # The scheduler's node list (`nodes` is its length).
    node_list: list[str] = field(default_factory=list)
    # Client layers as traced (posix, stdio, mpiio, hdf5, pnetcdf): bytes and ops each layer saw. An
    # MPI-IO or HDF5 call and the calls it causes below describe the same bytes, so the
    # totals above count each file's data and metadata ops from one traced layer only.
    io_layers: dict[str, dict[str, int]] = field(default_factory=dict)
    # The bandwidth figures: definition (stated in every report), layer, bytes, the
    # slowest rank's read, write and I/O times, read_bw, write_bw and bw (both directions
    # over io_time_s: darshan-parser --perf's agg_perf_by_slowest).
    bandwidth: dict[str, Any] = field(default_factory=dict)
    # Throughput over the I/O span, pauses included: bytes of the data files / (end of the
    # last op - start of the first), across all processes, timed at the outermost traced
    # layer. Not the job's bandwidth: what a program that times its whole I/O loop prints
    # (the mini cluster's test programs compare against it). 0 without such I/O.
    read_span_s: float = 0.0
    write_span_s: float = 0.0
    read_bw_span: float = 0.0
    write_bw_span: float = 0.0
    # What the topology could not say about this job (`analyze/topology.py`): pieces
    # "osts", "forwarders", "load_levels", each with the components concerned, what is
    # missing and the remedy. Empty lists above mean "none" only when this is empty.
    gaps: list[dict[str, Any]] = field(default_factory=list)
    # Straggler servers within this job (`analyze/jobs/stragglers.py`, set by the
    # diagnosis): OSTs or forwarders that served it much slower than their peers, with
    # the I/O seconds it lost to each ("this job lost X s to OST n").
    stragglers: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("series")
        d.pop("history")
        for k in ("start", "end"):
            d[k] = d[k].isoformat() + "Z" if d[k] else None
        return d
