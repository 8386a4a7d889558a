"""Write tracer files from Python, byte for byte in the format the C tracer writes.

    encode(trace) -> bytes             a TraceFile (decoded, or built here) as file bytes
    write(trace, spool) -> Path        ... written atomically under the tracer's file name
    process_trace(client_io, files)    one process's client records as a TraceFile, with
                                       the per-file summaries the tracer would have folded

What it is for: the simulator sends its client records through the real tracer format
and the real decoder (`decode`, `iolens import trace`, the agent's spool source), so the
path from a traced process to the store is the same for simulated and real jobs.

Times: the C tracer stores raw clock ticks and a calibration; this writer stores
nanoseconds as ticks (clock kind MONO, 1 ns per tick) counted from a base far enough
from zero that records before the process start stay positive, so every microsecond
timestamp decodes back exactly. What the decoded tables do not carry is chosen as the
tracer chooses it for a process with one thread: records are written in blocks of 1,024
(the tracer's chunk size) under the process id as thread id; the record flag that marks
metadata ops merged per directory is not set (the tables do not keep it, nothing reads
it); every file's parent is the entry of its directory when that is in the table.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import struct
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from iolens.errors import InputError
from iolens.model.ids import file_id
from iolens.model.schema import CLIENT_IO, FILES
from iolens.tracefile import format as fmt
from iolens.tracefile.layout import Layout
from iolens.tracefile.tables import SUMMARIES
from iolens.tracefile.trace import SUFFIX, TraceFile

__all__ = ["encode", "process_trace", "write"]

#: Tick of the base wall time: 2^62 ns leaves 146 years either side inside int64.
BASE_TICKS = 1 << 62
RECORDS_PER_SECTION = 1024  # the tracer's chunk: one RECORDS section per flushed chunk
OTHER = "<other>"
_OST_NAME = re.compile(r"^(?P<fs>.+)-OST(?P<idx>[0-9a-fA-F]{4,8})$")
_EPOCH = dt.datetime(1970, 1, 1)


def _ns(t: dt.datetime | None) -> int:
    return 0 if t is None else (t - _EPOCH) // dt.timedelta(microseconds=1) * 1000


def _ticks(us: np.ndarray, base_ns: int) -> np.ndarray:
    """Microsecond timestamps (datetime64[us] or int) -> ticks of this writer's clock."""
    ns = us.astype("datetime64[us]").astype(np.int64) * 1000
    return (ns - base_ns + BASE_TICKS).astype(np.uint64)


def _section(kind: int, payload: bytes, aux: int = 0) -> bytes:
    return struct.pack("<IIQ", kind, aux, len(payload)) + payload


def _padded(raw: bytes) -> bytes:
    return raw + b"\0" * ((-len(raw)) % 8)


# -- encoding ------------------------------------------------------------------------------


def encode(trace: TraceFile) -> bytes:
    """The bytes of `trace` as a tracer file of the current format version (what `decode`
    reads back)."""
    paths = _paths(trace)
    index = {p: i for i, p in enumerate(paths, start=2)}
    index[OTHER] = fmt.FILE_OTHER
    ids = {file_id(p): i for p, i in index.items()}
    base_ns = _ns(trace.start)
    records = _records(trace.client_io, ids, base_ns)
    summaries = _summaries(trace.summaries, ids, base_ns)
    parts = [fmt.MAGIC + struct.pack("<II", fmt.FORMAT_VERSION, fmt.ENDIAN_MARK)]
    tid = trace.pid & 0xFFFFFFFF
    for at in range(0, len(records), RECORDS_PER_SECTION):
        block = records[at : at + RECORDS_PER_SECTION]
        parts.append(_section(fmt.SEC_RECORDS, block.tobytes(), aux=tid))
    parts.append(_section(fmt.SEC_FILES, _files(index, trace.layouts)))
    parts.append(_section(fmt.SEC_SUMMARY, summaries.tobytes()))
    if trace.hints:
        parts.append(_section(fmt.SEC_HINTS, _hints(trace.hints, index)))
    layouts = sum(1 for p in trace.layouts if p in index)
    parts.append(
        _section(fmt.SEC_HEADER, _header(trace, len(records), len(index), layouts, base_ns))
    )
    parts.append(_section(fmt.SEC_END, b""))
    return b"".join(parts)


def write(trace: TraceFile, spool: str | os.PathLike[str]) -> Path:
    """Write `trace` into `spool` as the tracer names its files
    (`<host>-<pid>-<start ns>-<segment>[.<interval>].iolens`, the interval for an interim
    file), through a `.partial` file renamed when complete, so a reader never sees half a
    file."""
    directory = Path(spool)
    directory.mkdir(parents=True, exist_ok=True)
    k = f".{trace.interval}" if trace.interim else ""
    name = f"{trace.host or 'host'}-{trace.pid}-{_ns(trace.start)}-{trace.segment}{k}{SUFFIX}"
    final = directory / name
    partial = final.with_name(name + ".partial")
    partial.write_bytes(encode(trace))
    partial.replace(final)
    return final


def _paths(trace: TraceFile) -> list[str]:
    """Every path the tables refer to, the FILES table's order first (no `<other>`)."""
    known = dict(
        zip(
            trace.files.column("file_id").to_pylist(),
            trace.files.column("path").to_pylist(),
            strict=True,
        )
    )
    used = set(trace.client_io.column("file_id").drop_null().to_pylist())
    used |= set(trace.summaries.column("file_id").to_pylist())
    missing = used - set(known) - {file_id(OTHER)}
    if missing:
        raise InputError(str(trace.path), f"file id {min(missing)} has no path in the files table")
    return [p for p in dict.fromkeys(known.values()) if p != OTHER]


def _files(index: dict[str, int], layouts: dict[str, Layout]) -> bytes:
    parent_of = {p: index.get(os.path.dirname(p.rstrip("/")) or "/", 0) for p in index}
    out = b""
    for path, i in sorted(index.items(), key=lambda kv: kv[1]):
        raw = path.encode("utf-8", "surrogateescape")
        lay = layouts.get(path)
        parent = 0 if i == fmt.FILE_OTHER or parent_of[path] == i else parent_of[path]
        flags = fmt.FE_LAYOUT if lay is not None else 0
        out += struct.pack("<IIII", i, parent, len(raw), flags) + _padded(raw)
        if lay is not None:
            out += _layout(lay)
    return out


def _layout(lay: Layout) -> bytes:
    e = np.zeros(1, fmt.LAYOUT_ENTRY)
    e[0] = (
        lay.magic,
        lay.flags,
        lay.stripe_size,
        lay.stripe_count,
        lay.components,
        len(lay.osts),
        lay.fsname.encode()[:15],
    )
    return e.tobytes() + _padded(np.asarray(lay.osts, "<u4").tobytes())


def _hints(hints: dict[str, dict[str, str]], index: dict[str, int]) -> bytes:
    out = b""
    for path, pairs in hints.items():
        text = "".join(f"{k}={v}\n" for k, v in pairs.items()).encode()
        out += struct.pack("<II", index[path], len(text)) + _padded(text)
    return out


def _codes(column: pa.ChunkedArray, names: tuple[str, ...], what: str, src: str) -> np.ndarray:
    """The tracer's codes of op or layer names (their position in `names`)."""
    codes = pc.index_in(column, value_set=pa.array(names))
    if codes.null_count:
        bad = pc.filter(column, codes.is_null())[0].as_py()
        raise InputError(src, f"unknown {what} {bad!r} (known: {', '.join(names)})")
    return codes.to_numpy().astype(np.uint8)


def _indexes(file_ids: pa.ChunkedArray, ids: dict[int, int]) -> np.ndarray:
    """FILES indexes of file ids (FILE_NONE for a null id), vectorised: a process's trace
    can hold millions of records."""
    keys = np.array(sorted(ids), np.int64)
    vals = np.array([ids[k] for k in sorted(ids)], np.uint32)
    fid = pc.fill_null(file_ids, 0).to_numpy().astype(np.int64)
    at = np.clip(np.searchsorted(keys, fid), 0, max(len(keys) - 1, 0))
    hit = (keys[at] == fid) if len(keys) else np.zeros(len(fid), bool)
    out = np.where(hit, vals[at] if len(keys) else 0, fmt.FILE_NONE).astype(np.uint32)
    return np.where(file_ids.is_null().to_numpy(zero_copy_only=False), fmt.FILE_NONE, out)


def _records(client_io: pa.Table, ids: dict[int, int], base_ns: int) -> np.ndarray:
    n = client_io.num_rows
    r = np.zeros(n, fmt.RECORD)
    if not n:
        return r
    r["op"] = _codes(client_io["op"], fmt.OP_NAMES, "op", "client_io")
    r["layer"] = _codes(
        pc.fill_null(client_io["layer"], "posix"), fmt.LAYER_NAMES, "layer", "client_io"
    )
    r["file"] = _indexes(client_io["file_id"], ids)
    for c in ("offset", "size", "stride", "count"):
        r[c] = pc.fill_null(client_io[c], -1 if c == "offset" else 0).to_numpy()
    r["t_start"] = _ticks(client_io["t_start"].to_numpy(), base_ns)
    r["t_end"] = _ticks(client_io["t_end"].to_numpy(), base_ns)
    r["dur"] = pc.fill_null(client_io["dur_ns"], 0).to_numpy().astype(np.uint64)
    return r


def _summaries(table: pa.Table, ids: dict[int, int], base_ns: int) -> np.ndarray:
    n = table.num_rows
    s = np.zeros(n, fmt.SUMMARY)
    if not n:
        return s
    s["file"] = _indexes(table["file_id"], ids)
    s["layer"] = _codes(table["layer"], fmt.LAYER_NAMES, "layer", "summaries")
    s["ops"] = np.stack([table[f"{op}_ops"].to_numpy() for op in fmt.OP_NAMES], axis=1)
    for c in (
        "bytes_read",
        "bytes_written",
        "seq_reads",
        "seq_writes",
        "consec_reads",
        "consec_writes",
    ):
        s[c] = table[c].to_numpy()
    for c in ("max_byte_read", "max_byte_written"):
        s[c] = pc.fill_null(table[c], -1).to_numpy()
    for src, dst in (("read_size_hist", "hist_read"), ("write_size_hist", "hist_write")):
        s[dst] = np.asarray(table[src].combine_chunks().flatten()).reshape(n, fmt.HIST_BINS)
    for c in ("t_first", "t_last"):
        col = table[c]
        ticks = _ticks(pc.fill_null(col, pa.scalar(0, col.type)).to_numpy(), base_ns)
        s[c] = np.where(col.is_null().to_numpy(zero_copy_only=False), 0, ticks)
    s["time_read"] = table["read_time_ns"].to_numpy()
    s["time_write"] = table["write_time_ns"].to_numpy()
    s["time_meta"] = table["meta_time_ns"].to_numpy()
    s["last_end_read"] = s["last_end_write"] = -1
    return s


def _header(trace: TraceFile, records: int, files: int, layouts: int, base_ns: int) -> bytes:
    h = np.zeros(1, fmt.HEADER_V4)
    strings = [trace.job_id, trace.host, trace.exe, trace.user]
    raw = [s.encode("utf-8", "surrogateescape") for s in strings]
    flags = trace.flags | (fmt.F_PARTIAL if trace.partial else 0)
    flags = flags | fmt.F_INTERIM if trace.interim else flags & ~fmt.F_INTERIM
    h[0]["flags"], h[0]["clock"] = flags, fmt.CLOCK_MONO
    h[0]["pid"], h[0]["ppid"] = trace.pid, trace.ppid
    h[0]["rank"] = -1 if trace.rank is None else trace.rank
    h[0]["uid"] = trace.uid
    h[0]["start_wall_ns"], h[0]["end_wall_ns"] = base_ns, _ns(trace.end)
    h[0]["base_ticks"], h[0]["base_wall_ns"], h[0]["ns_per_tick"] = BASE_TICKS, base_ns, 1.0
    h[0]["calls"], h[0]["records"] = trace.calls, records
    h[0]["dropped_records"], h[0]["dropped_calls"] = trace.dropped_records, trace.dropped_calls
    h[0]["files"], h[0]["dropped_files"] = files, trace.dropped_files
    h[0]["spool_errors"], h[0]["segment"], h[0]["budget_mb"] = trace.spool_errors, trace.segment, 8
    h[0]["len_job_id"], h[0]["len_host"], h[0]["len_exe"], h[0]["len_user"] = map(len, raw)
    h[0]["missed_calls"] = trace.missed_calls
    h[0]["layouts"], h[0]["layouts_lost"] = layouts, trace.layouts_lost
    h[0]["interval"] = trace.interval
    return h.tobytes() + b"".join(raw)


# -- building a process's trace --------------------------------------------------------------


def process_trace(
    client_io: pa.Table,
    files: pa.Table,
    *,
    user: str,
    exe: str = "",
    uid: int = 0,
    ppid: int = 0,
    start: dt.datetime | None = None,
    end: dt.datetime | None = None,
    hints: dict[str, dict[str, str]] | None = None,
) -> TraceFile:
    """One process's client records (`client_io` rows of one job, node and pid) as the
    TraceFile its tracer would have written: the summaries folded from the records as
    the tracer folds them, layouts from `files.stripe_size`/`osts` (`<fs>-OST<hex>`).

    `start`/`end` default to the first record's start and the last one's end. InputError
    when the rows are not one process's, or name a file `files` does not have.
    """
    src = "client_io"
    client_io = client_io.select(CLIENT_IO.names).cast(CLIENT_IO)
    files = files.select(FILES.names).cast(FILES)
    ident = {}
    for c in ("job_id", "node", "pid", "rank"):
        values = client_io[c].unique().to_pylist()
        if len(values) != 1:
            raise InputError(src, f"one process's records expected, found {c} {values[:4]}")
        ident[c] = values[0]
    if ident["pid"] is None:
        raise InputError(src, "records without a pid")
    known = set(files["file_id"].to_pylist())
    missing = set(client_io["file_id"].drop_null().to_pylist()) - known
    if missing:
        raise InputError("files", f"file id {min(missing)} of the records has no row")
    used = files.filter(pc.is_in(files["file_id"], client_io["file_id"].unique()))
    t0 = pc.min(client_io["t_start"]).as_py()
    t1 = pc.max(client_io["t_end"]).as_py()
    return TraceFile(
        path=Path(f"{ident['node']}-{ident['pid']}.iolens"),
        job_id=ident["job_id"],
        host=ident["node"],
        pid=ident["pid"],
        ppid=ppid,
        rank=ident["rank"],
        exe=exe,
        user=user,
        uid=uid,
        start=start or t0,
        end=end or t1,
        partial=False,
        dropped_records=0,
        dropped_calls=0,
        dropped_files=0,
        missed_calls=0,
        spool_errors=0,
        calls=int(pc.sum(client_io["count"]).as_py() or 0),
        flags=0,
        segment=0,
        files=used,
        client_io=client_io,
        summaries=fold(client_io),
        hints=hints or {},
        layouts=_layouts_of(used),
    )


def _layouts_of(files: pa.Table) -> dict[str, Layout]:
    """Layouts from `files` rows whose OSTs are Lustre target names of one file system."""
    out = {}
    for row in files.to_pylist():
        if not row["osts"]:
            continue
        names = [_OST_NAME.match(n) for n in row["osts"]]
        fsnames = {m.group("fs") for m in names if m}
        if None in names or len(fsnames) != 1:
            raise InputError(
                "files", f"{row['path']}: OSTs {row['osts']} are not <fs>-OST<hex> names of one fs"
            )
        osts = tuple(int(m.group("idx"), 16) for m in names if m)
        out[row["path"]] = Layout(
            stripe_size=row["stripe_size"] or 0,
            stripe_count=len(osts),
            osts=osts,
            fsname=fsnames.pop(),
        )
    return out


# -- the tracer's fold, in numpy -----------------------------------------------------------------


def _reduce_at(
    ufunc: np.ufunc, out: np.ndarray, group: np.ndarray, values: np.ndarray, grouped: bool = False
) -> None:
    """out[k] = ufunc(out[k], values of group k), for all k at once (reduceat over the
    values sorted by group; `grouped`: they already are)."""
    if not len(group):
        return
    if grouped:
        g, v = group, values
    else:
        order = np.argsort(group, kind="stable")
        g, v = group[order], values[order]
    starts = np.flatnonzero(np.r_[True, g[1:] != g[:-1]])
    out[g[starts]] = ufunc(out[g[starts]], ufunc.reduceat(v, starts))


def fold(client_io: pa.Table) -> pa.Table:
    """Per-file, per-layer summaries of one process's records, as `iol_fold` computes them
    (tracer/src/core/buffer.c) over records in this order: calls per op, bytes, highest
    byte, sequential and consecutive accesses, Darshan's size bins, first and last
    times, time in reads, writes and metadata."""
    n = client_io.num_rows
    if not n:
        return SUMMARIES.empty_table()
    op = _codes(client_io["op"], fmt.OP_NAMES, "op", "client_io").astype(np.int64)
    layer = _codes(pc.fill_null(client_io["layer"], "posix"), fmt.LAYER_NAMES, "layer", "client_io")
    fid = pc.fill_null(client_io["file_id"], 0).to_numpy()
    off = pc.fill_null(client_io["offset"], -1).to_numpy()
    size = pc.fill_null(client_io["size"], 0).to_numpy()
    stride = pc.fill_null(client_io["stride"], 0).to_numpy()
    count = client_io["count"].to_numpy()
    t0 = client_io["t_start"].to_numpy().astype("datetime64[us]").astype(np.int64)
    t1 = client_io["t_end"].to_numpy().astype("datetime64[us]").astype(np.int64)
    dur = pc.fill_null(client_io["dur_ns"], 0).to_numpy()
    files, file_of = np.unique(fid, return_inverse=True)
    pairs, group = np.unique(file_of.ravel() * len(fmt.LAYER_NAMES) + layer, return_inverse=True)
    g = len(pairs)
    keys = np.stack([files[pairs // len(fmt.LAYER_NAMES)], pairs % len(fmt.LAYER_NAMES)], axis=1)
    # records grouped by (file, layer), each group in record order: what the fold visits
    order = np.argsort(group.ravel(), kind="stable")
    group = group.ravel()[order]
    op, fid, off, size, stride, count = (a[order] for a in (op, fid, off, size, stride, count))
    t0, t1, dur = t0[order], t1[order], dur[order]

    def total(mask: np.ndarray, values: np.ndarray) -> np.ndarray:
        out = np.zeros(g, np.int64)  # integer sums: exact beyond 2^53 bytes, unlike bincount
        _reduce_at(np.add, out, group[mask], values[mask].astype(np.int64), grouped=True)
        return out

    last_off = off + (count - 1) * stride
    top = np.where(stride >= 0, last_off, off) + size - 1
    seq = np.zeros(n, np.int64)
    consec = np.zeros(n, np.int64)
    within = (count > 1) & (stride >= size)
    seq += np.where(within, count - 1, 0)
    consec += np.where(within & (stride == size), count - 1, 0)
    for code in (0, 1):  # read, write: each follows the previous access of its own kind
        idx = np.flatnonzero(op == code)
        if not len(idx):
            continue
        order = idx[np.argsort(group[idx], kind="stable")]
        prev = np.full(len(order), -1, np.int64)
        same = group[order][1:] == group[order][:-1]
        prev[1:] = np.where(same, (last_off + size)[order][:-1], -1)
        after = (prev >= 0) & (off[order] >= prev)
        seq[order] += after
        consec[order] += after & (off[order] == prev)
    cols: dict[str, object] = {}
    for k, name in enumerate(fmt.OP_NAMES):
        cols[f"{name}_ops"] = total(op == k, count)
    is_r, is_w = op == 0, op == 1
    nbytes = size * count
    cols["bytes_read"] = total(is_r, nbytes)
    cols["bytes_written"] = total(is_w, nbytes)
    for mask, name in ((is_r, "max_byte_read"), (is_w, "max_byte_written")):
        m = mask & (size > 0) & (off >= 0)
        best = np.full(g, -1, np.int64)
        _reduce_at(np.maximum, best, group[m], top[m], grouped=True)
        cols[name] = pa.array(best, pa.int64(), mask=best < 0)
    cols["seq_reads"], cols["seq_writes"] = total(is_r, seq), total(is_w, seq)
    cols["consec_reads"], cols["consec_writes"] = total(is_r, consec), total(is_w, consec)
    bins = np.searchsorted(np.asarray(fmt.HIST_EDGES[1:]), size, side="right")
    for mask, name in ((is_r, "read_size_hist"), (is_w, "write_size_hist")):
        hist = np.zeros(g * fmt.HIST_BINS, np.int64)
        _reduce_at(np.add, hist, group[mask] * fmt.HIST_BINS + bins[mask], count[mask])
        hist = hist.reshape(g, fmt.HIST_BINS)
        cols[name] = pa.FixedSizeListArray.from_arrays(
            pa.array(hist.ravel(), pa.int64()), fmt.HIST_BINS
        )
    first = np.full(g, np.iinfo(np.int64).max)
    last = np.full(g, np.iinfo(np.int64).min)
    _reduce_at(np.minimum, first, group, t0, grouped=True)
    _reduce_at(np.maximum, last, group, t1, grouped=True)
    cols["t_first"] = pa.array(first.astype("datetime64[us]"), pa.timestamp("us"))
    cols["t_last"] = pa.array(last.astype("datetime64[us]"), pa.timestamp("us"))
    cols["read_time_ns"] = total(is_r, dur)
    cols["write_time_ns"] = total(is_w, dur)
    cols["meta_time_ns"] = total(~(is_r | is_w), dur)
    ident = {c: client_io[c][0].as_py() for c in ("job_id", "node", "rank", "pid")}
    table = {
        "job_id": pa.array([ident["job_id"]] * g, pa.string()),
        "node": pa.array([ident["node"]] * g, pa.string()),
        "rank": pa.array([ident["rank"]] * g, pa.int32()),
        "pid": pa.array([ident["pid"]] * g, pa.int32()),
        "layer": pa.array(np.array(fmt.LAYER_NAMES, object)[keys[:, 1]], pa.string()),
        "file_id": pa.array(keys[:, 0], pa.int64()),
        **cols,
    }
    return pa.table(table, schema=SUMMARIES)
