"""Raw tracer parts -> Arrow tables in the store's schemas (FILES, CLIENT_IO) plus
SUMMARIES, the tracer's per-file counters.

Times: records hold raw clock ticks; the header pairs one tick count with a UTC wall time
and gives the calibrated ns per tick, so wall = base_wall + (ticks - base_ticks) * ns/tick.
Metadata records use offset -1, size 0, stride 0, as the simulator does.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from iolens.model.ids import file_id
from iolens.model.schema import CLIENT_IO, FILES, OPS, TS
from iolens.tracefile import format as fmt
from iolens.tracefile.reader import RawTrace

assert set(fmt.OP_NAMES) == set(OPS), "tracer op codes out of step with the schema"

#: Per-file, per-layer counters (Darshan-like), present even when records were dropped.
#: Metadata ops merged into a directory record are counted under the directory.
SUMMARIES = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("rank", pa.int32()),
        pa.field("pid", pa.int32()),
        pa.field("layer", pa.string(), nullable=False),
        pa.field("file_id", pa.int64(), nullable=False),
        # one column per op of iolens.model.schema.OPS: successful calls
        *[pa.field(f"{op}_ops", pa.int64(), nullable=False) for op in fmt.OP_NAMES],
        pa.field("bytes_read", pa.int64(), nullable=False),
        pa.field("bytes_written", pa.int64(), nullable=False),
        # highest byte offset touched, null if none
        pa.field("max_byte_read", pa.int64()),
        pa.field("max_byte_written", pa.int64()),
        # sequential: started at or after the end of the previous access of that kind;
        # consecutive: started exactly there (Darshan's SEQ_/CONSEC_ counters)
        pa.field("seq_reads", pa.int64(), nullable=False),
        pa.field("seq_writes", pa.int64(), nullable=False),
        pa.field("consec_reads", pa.int64(), nullable=False),
        pa.field("consec_writes", pa.int64(), nullable=False),
        # access sizes in Darshan's 10 bins: 0-100, 100-1K, 1K-10K, 10K-100K, 100K-1M,
        # 1M-4M, 4M-10M, 10M-100M, 100M-1G, 1G+ bytes
        pa.field("read_size_hist", pa.list_(pa.int64(), fmt.HIST_BINS), nullable=False),
        pa.field("write_size_hist", pa.list_(pa.int64(), fmt.HIST_BINS), nullable=False),
        pa.field("t_first", TS),
        pa.field("t_last", TS),
        # time inside the calls, summed, nanoseconds
        pa.field("read_time_ns", pa.int64(), nullable=False),
        pa.field("write_time_ns", pa.int64(), nullable=False),
        pa.field("meta_time_ns", pa.int64(), nullable=False),
    ]
)


class Clock:
    """Tick -> UTC conversion for one file."""

    def __init__(self, raw: RawTrace) -> None:
        h = raw.header
        self.base_ticks = int(h["base_ticks"])
        self.base_wall_ns = int(h["base_wall_ns"])
        self.ns_per_tick = float(h["ns_per_tick"])
        if not 0 < self.ns_per_tick <= 1e6:  # NaN too: a damaged header, not a clock
            raise ValueError(f"clock calibration {self.ns_per_tick} ns per tick")

    def ns(self, ticks: np.ndarray) -> np.ndarray:
        """Durations in ticks -> ns; ValueError (a damaged file) beyond the int64 range."""
        ns = np.rint(ticks.astype(np.float64) * self.ns_per_tick)
        if len(ns) and not np.abs(ns).max() < 9.2e18:
            raise ValueError("clock ticks out of range")
        return ns.astype(np.int64)

    def wall_us(self, ticks: np.ndarray) -> np.ndarray:
        rel = ticks.astype(np.int64) - np.int64(self.base_ticks)
        ns = self.base_wall_ns + self.ns(rel)
        return (ns // 1000).astype("datetime64[us]")


def files_table(raw: RawTrace, used: np.ndarray) -> tuple[pa.Table, dict[int, int]]:
    """FILES rows for the file indexes in `used`, and index -> file_id.

    A file the tracer saw on Lustre has its stripe size and its OSTs (each once, in
    first-use order, `Layout.ost_names`); its OSTs stay null when the fs name that names
    them is unknown, and both stay null for files off Lustre.
    """
    ids = {i: file_id(raw.paths[i]) for i in sorted(set(used.tolist())) if i in raw.paths}
    layouts = [raw.layouts.get(i) for i in ids]
    table = pa.table(
        {
            "file_id": pa.array(list(ids.values()), pa.int64()),
            "path": pa.array([raw.paths[i] for i in ids], pa.string()),
            "stripe_size": pa.array(
                [lay.stripe_size or None if lay else None for lay in layouts], pa.int64()
            ),
            "osts": pa.array(
                [lay.ost_names() if lay else None for lay in layouts], pa.list_(pa.string())
            ),
        },
        schema=FILES,
    )
    return table, ids


def _lookup(ids: dict[int, int], idx: np.ndarray) -> np.ndarray:
    if not len(idx):
        return np.zeros(0, np.int64)
    keys = np.array(sorted(ids), np.int64)
    vals = np.array([ids[k] for k in sorted(ids)], np.int64)
    return vals[np.searchsorted(keys, idx.astype(np.int64))]


def _const(value: object, n: int, typ: pa.DataType) -> pa.Array:
    return pa.array([value] * n, typ)


def client_io_table(
    raw: RawTrace, ids: dict[int, int], job_id: str, rank: int | None, clock: Clock
) -> pa.Table:
    r = raw.records
    n = len(r)
    layers = np.array(fmt.LAYER_NAMES, object)[r["layer"]]
    ops = np.array(fmt.OP_NAMES, object)[r["op"]]
    return pa.table(
        {
            "job_id": _const(job_id, n, pa.string()),
            "node": _const(raw.host, n, pa.string()),
            "rank": _const(rank, n, pa.int32()),
            "pid": _const(int(raw.header["pid"]), n, pa.int32()),
            "layer": pa.array(layers, pa.string()),
            "op": pa.array(ops, pa.string()),
            "file_id": pa.array(_lookup(ids, r["file"]), pa.int64()),
            "offset": pa.array(r["offset"], pa.int64()),
            "size": pa.array(r["size"], pa.int64()),
            "stride": pa.array(r["stride"], pa.int64()),
            "count": pa.array(r["count"].astype(np.int64), pa.int64()),
            "t_start": pa.array(clock.wall_us(r["t_start"]), TS),
            "t_end": pa.array(clock.wall_us(r["t_end"]), TS),
            "dur_ns": pa.array(clock.ns(r["dur"]), pa.int64()),
        },
        schema=CLIENT_IO,
    )


def summaries_table(
    raw: RawTrace, ids: dict[int, int], job_id: str, rank: int | None, clock: Clock
) -> pa.Table:
    s = raw.summaries
    s = s[s["ops"].sum(axis=1) > 0]
    n = len(s)
    cols: dict[str, pa.Array] = {
        "job_id": _const(job_id, n, pa.string()),
        "node": _const(raw.host, n, pa.string()),
        "rank": _const(rank, n, pa.int32()),
        "pid": _const(int(raw.header["pid"]), n, pa.int32()),
        "layer": pa.array(np.array(fmt.LAYER_NAMES, object)[s["layer"]], pa.string()),
        "file_id": pa.array(_lookup(ids, s["file"]), pa.int64()),
    }
    for k, op in enumerate(fmt.OP_NAMES):
        cols[f"{op}_ops"] = pa.array(s["ops"][:, k].astype(np.int64), pa.int64())
    for c in ("bytes_read", "bytes_written"):
        cols[c] = pa.array(s[c].astype(np.int64), pa.int64())
    for c in ("max_byte_read", "max_byte_written"):
        v = s[c].astype(np.int64)
        cols[c] = pa.array(v, pa.int64(), mask=v < 0)
    for c in ("seq_reads", "seq_writes", "consec_reads", "consec_writes"):
        cols[c] = pa.array(s[c].astype(np.int64), pa.int64())
    for src, dst in (("hist_read", "read_size_hist"), ("hist_write", "write_size_hist")):
        flat = pa.array(s[src].astype(np.int64).ravel(), pa.int64())
        cols[dst] = pa.FixedSizeListArray.from_arrays(flat, fmt.HIST_BINS)
    for c in ("t_first", "t_last"):
        t = s[c]
        cols[c] = pa.array(clock.wall_us(t), TS, mask=t == 0)
    for src, dst in (
        ("time_read", "read_time_ns"),
        ("time_write", "write_time_ns"),
        ("time_meta", "meta_time_ns"),
    ):
        cols[dst] = pa.array(clock.ns(s[src]), pa.int64())
    return pa.table(cols, schema=SUMMARIES)
