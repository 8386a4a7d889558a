"""The client side of the simulated cluster: what the tracer and the scheduler record.

* client records in the tracer's compressed form: per process, one merged record per
  file and flush window (the tracer flushes its buffers every `FLUSH_S` seconds), with
  open/close records around each phase and metadata ops merged per directory;
* job records as the scheduler has them; file layouts as `lfs getstripe` shows them.

These tables go to the store directly for now (`Simulation.batches`); the servers' side
goes through real files and the real agent (`servers/`, `collection.py`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from iolens.model.ids import file_id
from iolens.model.schema import CLIENT_IO, FILES, JOBS
from iolens.simulate.engine import EngineResult, PhaseRun
from iolens.simulate.servers.activity import rank_progress
from iolens.simulate.topology import Topology
from iolens.simulate.workload import JobSpec

FLUSH_S = 10
US = 1_000_000


class Emitter:
    def __init__(self, topo: Topology, result: EngineResult, base_us: int) -> None:
        self.topo = topo
        self.result = result
        self.base_us = base_us

    # -- jobs and files -----------------------------------------------------------------
    def jobs_table(self) -> pa.Table:
        rows = {n: [] for n in JOBS.names}
        for run in self.result.jobs:
            s = run.spec
            rows["job_id"].append(s.job_id)
            rows["user"].append(s.user)
            rows["app"].append(s.app)
            rows["nodes"].append([self.topo.compute[i] for i in run.nodes])
            rows["nprocs"].append(s.nprocs)
            rows["start"].append(self.base_us + run.start * US)
            rows["end"].append(self.base_us + run.end * US)
            rows["state"].append(s.state)
            rows["source"].append("slurm")
        return pa.table(rows, schema=JOBS)

    def job_batch(self, run_index: int) -> tuple[pa.Table, pa.Table]:
        """Files and client records of one job."""
        run = self.result.jobs[run_index]
        spec = run.spec
        file_osts = run.phases[0].ost_of_file if run.phases else []
        paths = [f.path for f in spec.files]
        ids = np.array([file_id(p) for p in paths], np.int64)
        osts = [[self.topo.osts[o] for o in file_osts[i]] for i in range(len(paths))]
        extra_paths: list[str] = []
        extra_osts: list[list[str]] = []
        records: list[dict[str, np.ndarray]] = []
        for p in run.phases:
            if p.spec.kind == "meta":
                recs, created = self._meta_records(spec, p, ids)
                extra_paths += created
                extra_osts += [osts[int(p.spec.file_idx[0])]] * len(created)
            else:
                recs = self._data_records(spec, p, ids)
            records += recs
        files = pa.table(
            {
                "file_id": np.concatenate(
                    [ids, np.array([file_id(x) for x in extra_paths], np.int64)]
                ),
                "path": paths + extra_paths,
                "stripe_size": [f.stripe_size for f in spec.files] + [2**20] * len(extra_paths),
                "osts": osts + extra_osts,
            },
            schema=FILES,
        )
        return files, self._client_table(spec, run.first_node, records)

    # -- client records -----------------------------------------------------------------
    def _client_table(
        self, spec: JobSpec, first_node: int, records: list[dict[str, np.ndarray]]
    ) -> pa.Table:
        cols = {k: np.concatenate([r[k] for r in records]) for k in records[0]}
        rank = cols["rank"]
        n = len(rank)
        node_names = np.array(self.topo.compute[first_node : first_node + spec.nnodes])
        return pa.table(
            {
                "job_id": pa.array([spec.job_id] * n, pa.string()),
                "node": node_names[rank // spec.ppn],
                "rank": rank.astype(np.int32),
                "pid": (10_000 + rank).astype(np.int32),
                "layer": pa.array(["posix"] * n, pa.string()),
                "op": cols["op"],
                "file_id": cols["file_id"],
                "offset": cols["offset"],
                "size": cols["size"],
                "stride": cols["stride"],
                "count": cols["count"],
                "t_start": (self.base_us + cols["t0"] * US).astype("datetime64[us]"),
                "t_end": (self.base_us + cols["t1"] * US).astype("datetime64[us]"),
                "dur_ns": cols["dur_ns"],
            },
            schema=CLIENT_IO,
        )

    @staticmethod
    def _records(
        op: str,
        rank: np.ndarray,
        fid: np.ndarray,
        offset: np.ndarray,
        size: int,
        stride: int,
        count: np.ndarray,
        t0: np.ndarray,
        t1: np.ndarray,
        dur_ns: np.ndarray,
    ) -> dict[str, np.ndarray]:
        n = len(rank)
        return {
            "op": np.full(n, op, object),
            "rank": rank,
            "file_id": fid,
            "offset": offset,
            "size": np.full(n, size, np.int64),
            "stride": np.full(n, stride, np.int64),
            "count": count.astype(np.int64),
            "t0": t0,
            "t1": t1,
            "dur_ns": dur_ns,
        }

    def _chunks(self, p: PhaseRun, R: np.ndarray) -> tuple[np.ndarray, ...]:
        """Split each rank's per-second units into flush windows: (rank_i, count, t0, t1, busy)."""
        n, d = R.shape
        width = -(-d // FLUSH_S) * FLUSH_S
        padded = np.zeros((n, width), np.int64)
        padded[:, :d] = R
        win = padded.reshape(n, -1, FLUSH_S)
        counts = win.sum(axis=2)
        active = win > 0
        first = active.argmax(axis=2)
        last = FLUSH_S - 1 - active[:, :, ::-1].argmax(axis=2)
        busy = active.sum(axis=2)
        rank_i, chunk = np.nonzero(counts)
        t0 = p.start + chunk * FLUSH_S + first[rank_i, chunk]
        t1 = p.start + chunk * FLUSH_S + last[rank_i, chunk] + 1
        before = np.cumsum(counts, axis=1) - counts  # units done before each window
        return (
            rank_i,
            counts[rank_i, chunk],
            t0,
            t1,
            busy[rank_i, chunk] * 10**9,
            before[rank_i, chunk],
        )

    def _data_records(
        self, spec: JobSpec, p: PhaseRun, ids: np.ndarray
    ) -> list[dict[str, np.ndarray]]:
        s = p.spec
        R = rank_progress(p)
        rank_i, count, t0, t1, busy, before = self._chunks(p, R)
        fid = ids[s.file_idx]
        data = self._records(
            s.kind,
            s.ranks[rank_i],
            fid[rank_i],
            s.offset0[rank_i] + before * s.stride,
            s.size,
            s.stride,
            count,
            t0,
            t1,
            busy,
        )
        # One open before and one close after each rank's part of the phase.
        active = R > 0
        start = p.start + active.argmax(axis=1)
        end = p.start + R.shape[1] - active[:, ::-1].argmax(axis=1)
        n = len(s.ranks)
        ones, zeros = np.ones(n, np.int64), np.zeros(n, np.int64)
        opens = self._records(
            "open", s.ranks, fid, np.full(n, -1), 0, 0, ones, start, start, zeros + 20_000
        )
        closes = self._records(
            "close", s.ranks, fid, np.full(n, -1), 0, 0, ones, end, end, zeros + 10_000
        )
        return [opens, data, closes]

    def _meta_records(
        self, spec: JobSpec, p: PhaseRun, ids: np.ndarray
    ) -> tuple[list[dict[str, np.ndarray]], list[str]]:
        """mdtest-like phase: per file create+write, stat, close, unlink."""
        s = p.spec
        R = rank_progress(p)
        rank_i, count, t0, t1, busy, _before = self._chunks(p, R)
        dirs = ids[s.file_idx]
        out = []
        for op in ("open", "stat", "close", "unlink"):  # merged per directory (same op)
            out.append(
                self._records(
                    op,
                    s.ranks[rank_i],
                    dirs[rank_i],
                    np.full(len(rank_i), -1),
                    0,
                    0,
                    count,
                    t0,
                    t1,
                    busy // 8,
                )
            )
        # The small writes go to distinct files, so the tracer cannot merge them.
        created: list[str] = []
        w_rank, w_t, w_fid = [], [], []
        dir_paths = [spec.files[int(i)].path for i in s.file_idx]
        for r_local in range(len(s.ranks)):
            secs = np.repeat(np.arange(R.shape[1]), R[r_local])
            names = [f"{dir_paths[r_local]}/f{k:06d}" for k in range(len(secs))]
            created += names
            w_rank.append(np.full(len(secs), s.ranks[r_local]))
            w_t.append(p.start + secs)
            w_fid.append(np.array([file_id(x) for x in names], np.int64))
        wr, wt = np.concatenate(w_rank), np.concatenate(w_t)
        n = len(wr)
        out.append(
            self._records(
                "write",
                wr,
                np.concatenate(w_fid),
                np.zeros(n, np.int64),
                s.size,
                s.size,
                np.ones(n),
                wt,
                wt,
                np.full(n, 30_000),
            )
        )
        return out, created
