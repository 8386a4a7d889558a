"""Turn simulated progress into what real collectors would have produced.

* client records in the tracer's compressed form: per process, one merged record per
  file and flush window (the tracer flushes its buffers every `FLUSH_S` seconds), with
  open/close records around each phase and metadata ops merged per directory;
* server samples as the node agents report them: per component per second, with the
  per-job share a forwarder (requests carry the client node) or Lustre jobstats give;
* job records as the scheduler has them; file layouts as `lfs getstripe` shows them.

Byte counts are integers carried through every step, so each job's bytes are identical at
the compute, forwarding and OST layers, except where thrashing amplifies backend reads.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from iolens.model.ids import file_id
from iolens.model.schema import CLIENT_IO, FILES, JOBS, SERVER_SAMPLES
from iolens.simulate.engine import MD_OPS_PER_FILE, THRASH_AMPLIFICATION, EngineResult, PhaseRun
from iolens.simulate.topology import Topology
from iolens.simulate.workload import JobSpec

FLUSH_S = 10
US = 1_000_000


@dataclass
class LayerTotals:
    """Dense [second, component] accumulators for the component-total samples."""

    fwd: dict[str, np.ndarray]
    ost: dict[str, np.ndarray]
    mds: np.ndarray
    switch: dict[str, np.ndarray]

    @classmethod
    def zeros(cls, seconds: int, topo: Topology) -> LayerTotals:
        def metrics(n: int) -> dict[str, np.ndarray]:
            return {
                m: np.zeros((seconds, n), np.int64)
                for m in ("read_bytes", "write_bytes", "read_ops", "write_ops", "md_ops")
            }

        return cls(
            metrics(len(topo.forwarders)),
            metrics(len(topo.osts)),
            np.zeros(seconds, np.int64),
            metrics(len(topo.switches)),
        )


def rank_progress(p: PhaseRun) -> np.ndarray:
    """Units each rank completed in each second of the phase: [rank, second], exact integers."""
    done = np.asarray(p.done)
    cum = np.cumsum(done) / p.units
    cum[-1] = 1.0
    per_rank = np.floor(p.spec.count[:, None] * cum[None, :] + 1e-9).astype(np.int64)
    per_rank[:, -1] = p.spec.count
    return np.diff(per_rank, axis=1, prepend=0)


class Emitter:
    def __init__(self, topo: Topology, result: EngineResult, base_us: int) -> None:
        self.topo = topo
        self.result = result
        self.base_us = base_us
        self.totals = LayerTotals.zeros(result.end + 1, topo)
        self._job_rows: dict[tuple[str, int], pa.Table] = {}

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

    def job_batch(self, run_index: int) -> tuple[pa.Table, pa.Table, pa.Table]:
        """Files, client records and per-job server samples of one job."""
        run = self.result.jobs[run_index]
        spec = run.spec
        file_osts = run.phases[0].ost_of_file if run.phases else []
        paths = [f.path for f in spec.files]
        ids = np.array([file_id(p) for p in paths], np.int64)
        osts = [[self.topo.osts[o] for o in file_osts[i]] for i in range(len(paths))]
        extra_paths: list[str] = []
        extra_osts: list[list[str]] = []
        records: list[dict[str, np.ndarray]] = []
        samples: list[pa.Table] = []
        for p in run.phases:
            if p.spec.kind == "meta":
                recs, created = self._meta_records(run.first_node, spec, p, ids)
                extra_paths += created
                extra_osts += [osts[int(p.spec.file_idx[0])]] * len(created)
            else:
                recs = self._data_records(run.first_node, spec, p, ids)
            records += recs
            samples.append(self._phase_samples(run.first_node, spec, p))
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
        return files, self._client_table(spec, run.first_node, records), pa.concat_tables(samples)

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
        self, first_node: int, spec: JobSpec, p: PhaseRun, ids: np.ndarray
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
        self._add_layer_totals(first_node, spec, p, R)
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
        self, first_node: int, spec: JobSpec, p: PhaseRun, ids: np.ndarray
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
        self._add_layer_totals(first_node, spec, p, R)
        return out, created

    # -- server side --------------------------------------------------------------------
    def _per_component(
        self, p: PhaseRun, R: np.ndarray, comp_of_rank: np.ndarray, n_comp: int
    ) -> np.ndarray:
        """Sum per-rank per-second values into [component, second]."""
        out = np.zeros((n_comp, R.shape[1]), np.int64)
        np.add.at(out, comp_of_rank, R)
        return out

    def _ost_split(self, p: PhaseRun, R_bytes: np.ndarray) -> np.ndarray:
        """Bytes per OST and second, splitting each rank's bytes over its file's stripes."""
        n_ost = len(self.topo.osts)
        out = np.zeros((n_ost, R_bytes.shape[1]), np.int64)
        stripes = [p.ost_of_file[int(f)] for f in p.spec.file_idx]
        widths = np.array([len(x) for x in stripes])
        for k in np.unique(widths):
            rows = np.nonzero(widths == k)[0]
            base, rem = np.divmod(R_bytes[rows], k)
            for j in range(k):
                ost = np.array([stripes[r][j] for r in rows])
                np.add.at(out, ost, base + (rem > j))
        return out

    def _phase_samples(self, first_node: int, spec: JobSpec, p: PhaseRun) -> pa.Table:
        """Per-job rows: forwarder (by client node), OST (jobstats) and MDS shares."""
        return self._job_rows.pop((spec.job_id, p.index))

    def _add_layer_totals(self, first_node: int, spec: JobSpec, p: PhaseRun, R: np.ndarray) -> None:
        s, topo, tot = p.spec, self.topo, self.totals
        d = R.shape[1]
        sl = slice(p.start, p.start + d)
        node = first_node + s.ranks // spec.ppn
        fwd_of_rank = topo.fwd_of_node[node]
        sw_of_rank = topo.switch_of_node[node]
        meta = s.kind == "meta"
        direction = "write" if meta else s.kind
        R_bytes = R * s.size
        md = np.zeros((len(s.ranks), d), np.int64)
        if meta:
            md += R * MD_OPS_PER_FILE
        else:  # the open and close around each rank's part of the phase
            active = R > 0
            md[np.arange(len(s.ranks)), active.argmax(axis=1)] += 1
            md[np.arange(len(s.ranks)), d - 1 - active[:, ::-1].argmax(axis=1)] += 1
        fwd_b = self._per_component(p, R_bytes, fwd_of_rank, len(topo.forwarders))
        fwd_o = self._per_component(p, R, fwd_of_rank, len(topo.forwarders))
        fwd_md = self._per_component(p, md, fwd_of_rank, len(topo.forwarders))
        sw_b = self._per_component(p, R_bytes, sw_of_rank, len(topo.switches))
        # Meta phases: each rank's created files live on its directory's OST.
        ost_b = self._ost_split(p, R_bytes)
        ost_o = self._ost_split(p, R)
        amp = np.asarray(p.amp, bool)
        if amp.any():
            num, den = THRASH_AMPLIFICATION
            ost_b[:, amp] = ost_b[:, amp] * num // den
            ost_o[:, amp] = ost_o[:, amp] * num // den
        mds_md = md.sum(axis=0)
        tot.fwd[f"{direction}_bytes"][sl] += fwd_b.T
        tot.fwd[f"{direction}_ops"][sl] += fwd_o.T
        tot.fwd["md_ops"][sl] += fwd_md.T
        tot.ost[f"{direction}_bytes"][sl] += ost_b.T
        tot.ost[f"{direction}_ops"][sl] += ost_o.T
        tot.switch[f"{direction}_bytes"][sl] += sw_b.T
        tot.mds[sl] += mds_md
        rows = [
            self._rows(
                "forwarder", topo.forwarders, spec.job_id, p.start, direction, fwd_b, fwd_o, fwd_md
            ),
            self._rows(
                "ost",
                topo.osts,
                spec.job_id,
                p.start,
                direction,
                ost_b,
                ost_o,
                np.zeros_like(ost_o),
            ),
            self._rows(
                "mds",
                [topo.mds],
                spec.job_id,
                p.start,
                direction,
                np.zeros((1, d), np.int64),
                np.zeros((1, d), np.int64),
                mds_md[None, :],
            ),
        ]
        self._job_rows[(spec.job_id, p.index)] = pa.concat_tables(rows)

    def _rows(
        self,
        kind: str,
        names: list[str],
        job_id: str | None,
        start: int,
        direction: str,
        b: np.ndarray,
        o: np.ndarray,
        md: np.ndarray,
    ) -> pa.Table:
        comp, sec = np.nonzero((b > 0) | (o > 0) | (md > 0))
        n = len(comp)
        zero = np.zeros(n, np.int64)
        other = "read" if direction == "write" else "write"
        cols = {
            "ts": (self.base_us + (start + sec + 1) * US).astype("datetime64[us]"),
            "interval_s": np.ones(n),
            "kind": pa.array([kind] * n, pa.string()),
            "component_id": np.array(names, object)[comp],
            "job_id": pa.array([job_id] * n, pa.string()),
            f"{direction}_bytes": b[comp, sec],
            f"{other}_bytes": zero,
            f"{direction}_ops": o[comp, sec],
            f"{other}_ops": zero,
            "md_ops": md[comp, sec],
            "wait_us": pa.nulls(n, pa.float64()),
            "service_us": pa.nulls(n, pa.float64()),
            "queue_len": pa.nulls(n, pa.float64()),
            "active_threads": pa.nulls(n, pa.float64()),
        }
        return pa.table(cols, schema=SERVER_SAMPLES)

    def totals_table(self) -> pa.Table:
        """Component totals every second, with queue and latency from the offered load."""
        r, topo, tot = self.result, self.topo, self.totals
        threads = float(topo.caps.forwarder_threads)
        seconds = len(r.fwd_load)
        tables = []

        def add(
            kind: str,
            names: list[str],
            m: dict[str, np.ndarray],
            load: np.ndarray,
            cap: np.ndarray,
            base_service_us: float,
        ) -> None:
            t_idx, c_idx = np.meshgrid(np.arange(seconds), np.arange(len(names)), indexing="ij")
            t_idx, c_idx = t_idx.ravel(), c_idx.ravel()
            rho = load[:seconds].ravel()
            service = base_service_us / cap[:seconds].ravel()
            queue = threads * np.maximum(0.0, rho - 1.0) + np.where(
                rho < 1.0, rho**2 / np.maximum(1e-3, 1.0 - rho), 0.0
            )
            queue = np.minimum(queue, 4096.0)
            n = len(t_idx)
            tables.append(
                pa.table(
                    {
                        "ts": (self.base_us + (t_idx + 1) * US).astype("datetime64[us]"),
                        "interval_s": np.ones(n),
                        "kind": pa.array([kind] * n, pa.string()),
                        "component_id": np.array(names, object)[c_idx],
                        "job_id": pa.nulls(n, pa.string()),
                        **{k: v[:seconds].ravel() for k, v in m.items()},
                        "wait_us": service * queue / threads,
                        "service_us": service,
                        "queue_len": queue,
                        "active_threads": threads * np.minimum(1.0, rho),
                    },
                    schema=SERVER_SAMPLES,
                )
            )

        add("forwarder", topo.forwarders, tot.fwd, r.fwd_load, r.fwd_cap, 1000.0)
        add("ost", topo.osts, tot.ost, r.ost_load, r.ost_cap, 2000.0)
        oss = {
            k: np.stack([v[:, topo.ost_oss == i].sum(axis=1) for i in range(len(topo.oss))], axis=1)
            for k, v in tot.ost.items()
        }
        oss_load = np.stack(
            [r.ost_load[:, topo.ost_oss == i].mean(axis=1) for i in range(len(topo.oss))], axis=1
        )
        oss_cap = np.stack(
            [r.ost_cap[:, topo.ost_oss == i].mean(axis=1) for i in range(len(topo.oss))], axis=1
        )
        add("oss", topo.oss, oss, oss_load, oss_cap, 2000.0)
        mds_md = tot.mds[:seconds] + np.round(r.storm_ops[:seconds]).astype(np.int64)
        zeros = np.zeros((seconds, 1), np.int64)
        add(
            "mds",
            [topo.mds],
            {
                "read_bytes": zeros,
                "write_bytes": zeros,
                "read_ops": zeros,
                "write_ops": zeros,
                "md_ops": mds_md[:, None],
            },
            r.mds_load[:, None],
            np.ones((seconds, 1)),
            100.0,
        )
        sw = {k: v for k, v in tot.switch.items()}
        add(
            "switch",
            topo.switches,
            sw,
            np.zeros((seconds, len(topo.switches))),
            np.ones((seconds, len(topo.switches))),
            1.0,
        )
        return pa.concat_tables(tables)
