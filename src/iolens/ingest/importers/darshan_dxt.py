"""DXT -> client_io: each file record's segments merged into the tracer's runs, and a
log's client rows held until `DXT_CHUNK`, then streamed (the log spills)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.ingest.darshan_decode import Decoded
from iolens.ingest.darshan_merge import dxt_frame, merged_records, tallied
from iolens.ingest.darshan_records import DXT_MODULES
from iolens.ingest.importers.darshan_context import ImportResult, LogContext
from iolens.ingest.importers.darshan_counters import LAYERS
from iolens.model.schema import CLIENT_IO

#: client rows of one log held before it switches to streaming them in its own transaction
DXT_CHUNK = 65_536

#: merged DXT runs kept in `DarshanJob.dxt` for the diagnosis; beyond it the job goes
#: without (`ImportResult.notes` says so) rather than holding an unbounded frame.
DXT_KEEP = 200_000

_DXT_LAYER = {"DXT_POSIX": ("POSIX", "posix"), "DXT_MPIIO": ("MPI-IO", "mpiio")}


class ClientRows:
    """A log's client rows: held until `DXT_CHUNK`, then handed to `spill` (the writer
    streams them in the log's own transaction)."""

    def __init__(self, spill: Callable[[pa.Table], None], res: ImportResult) -> None:
        self.spill, self.res = spill, res
        self.tables: list[pa.Table] = []
        self.held = 0

    def add(self, table: pa.Table) -> None:
        self.res.client_io += table.num_rows
        self.tables.append(table)
        self.held += table.num_rows
        if self.held >= DXT_CHUNK:
            self.spill(pa.concat_tables(self.tables))
            self.tables, self.held = [], 0


def read_dxt(
    log: Decoded, ctx: LogContext, with_dxt: bool, rows: ClientRows, res: ImportResult
) -> None:
    """Read DXT one file record at a time, merge, and hand the client rows to `rows`."""
    pending: list[dict[str, Any]] = []
    pending_n = 0
    kept: list[dict[str, Any]] | None = []
    kept_n = 0
    for module in DXT_MODULES:
        if module not in log.modules:
            continue
        info = ctx.job.module_info[module]
        if not with_dxt:
            info["records"] = None  # not read (--no-dxt)
            continue
        base, layer = _DXT_LAYER[module]
        nbytes: dict[tuple[int, str], int] = {}
        for part in merged_records(tallied(log.dxt(module), info, ctx.hosts)):
            op, rid = part["op"], int(part["id"])
            # the layer that moved the file's bytes in that direction (see mpiio_owned)
            emit = not info["partial"] and (rid in ctx.mpiio_data[op]) == (base == "MPI-IO")
            n = len(part["count"])
            if kept is not None:
                if kept_n + n <= DXT_KEEP:
                    kept.append(part)
                    kept_n += n
                else:
                    kept = None
                    res.notes.append(
                        f"more than {DXT_KEEP:,} merged DXT runs: the diagnosis sees the "
                        "counters only"
                    )
            if emit:
                moved = int((part["size"] * part["count"]).sum())
                nbytes[rid, op] = nbytes.get((rid, op), 0) + moved
                ctx.dxt_cov.setdefault((base, op), set()).add(rid)
                pending.append({**part, "layer": layer})
                pending_n += n
                if pending_n >= DXT_CHUNK:
                    rows.add(_dxt_rows(ctx, pending))
                    pending, pending_n = [], 0
        _check_dxt(ctx, module, nbytes, res)
    if pending:
        rows.add(_dxt_rows(ctx, pending))
    ctx.job.dxt = dxt_frame(kept or [])


def _check_dxt(
    ctx: LogContext, module: str, nbytes: dict[tuple[int, str], int], res: ImportResult
) -> None:
    """DXT stands in for the counters of the files it covers: say when they disagree."""
    block = ctx.blocks.get(_DXT_LAYER[module][0])
    if block is None or not nbytes:
        return
    pre = LAYERS[block.module].prefix
    for (rid, op), got in nbytes.items():
        sel = block.ids == np.uint64(rid)
        counter = block.col(f"{pre}_BYTES_{'READ' if op == 'read' else 'WRITTEN'}")
        want = int(np.clip(counter[sel], 0, None).sum())
        if sel.any() and want != got:
            res.notes.append(
                f"{module} has {got:,} bytes {op} for {ctx.path(rid)}, its counters {want:,}"
            )


def _dxt_rows(ctx: LogContext, parts: list[dict[str, Any]]) -> pa.Table:
    n = [len(p["count"]) for p in parts]
    total = sum(n)

    def tag(fn: Callable[[dict[str, Any]], Any], dtype: Any) -> np.ndarray:
        return np.repeat(np.array([fn(p) for p in parts], dtype=dtype), n)

    def runs(key: str) -> np.ndarray:
        return np.concatenate([p[key] for p in parts])

    start, end = runs("start"), runs("end")
    pid = (lambda p: ctx.pid) if ctx.pid is not None else (lambda p: p["rank"])
    return pa.table(
        {
            "job_id": pa.array([ctx.job.job_id] * total, pa.string()),
            "node": tag(lambda p: p["hostname"] or ctx.hosts.get(p["rank"], ""), object),
            "rank": tag(lambda p: p["rank"], np.int32),
            "pid": tag(pid, np.int32),
            "layer": tag(lambda p: p["layer"], object),
            "op": tag(lambda p: p["op"], object),
            "file_id": tag(lambda p: ctx.fid(int(p["id"])), np.int64),
            "offset": runs("offset"),
            "size": runs("size"),
            "stride": runs("stride"),
            "count": runs("count"),
            "t_start": ctx.ts(start),
            "t_end": ctx.ts(np.maximum(end, start)),
            "dur_ns": np.rint(np.nan_to_num(np.clip(runs("busy"), 0, 1e9)) * 1e9).astype(np.int64),
        },
        schema=CLIENT_IO,
    )
