"""One Darshan log's rows for every table but client_io: its job, its files, its HEATMAP
bins as metrics, and the log itself as Darshan wrote it (darshan_logs / _modules /
_records, from which `iolens.store.darshan` rebuilds the `DarshanJob`)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.ingest.importers.darshan_context import SOURCE, LogContext, now
from iolens.model.schema import DARSHAN_LOGS, DARSHAN_MODULES, DARSHAN_RECORDS, FILES, METRICS

#: Modules whose record names are files (the rest name datasets, heatmaps, ranks...).
FILE_MODULES = ("POSIX", "STDIO", "MPI-IO", "H5F", "PNETCDF_FILE", "DFS")


def job_row(ctx: LogContext, owner: str) -> dict[str, Any]:
    """The job as the log describes it, owned by `owner` (the site's name for the log's
    uid, else `uid:<N>`: `iolens.ingest.uid_map`), never a name looked up here."""
    job = ctx.job
    words = job.exe.split()
    end = job.start + timedelta(seconds=max(job.run_time, 0.0))
    return {
        "job_id": job.job_id,
        "user": owner,
        "app": (Path(words[0]).name or None) if words else None,
        "nodes": sorted(set(ctx.hosts.values()) - {""}) or None,
        "nprocs": job.nprocs,
        "start": job.start,
        "end": max(end, job.end),
        "state": None,
        "source": SOURCE,
    }


def files_table(ctx: LogContext) -> pa.Table | None:
    ids: set[int] = set()
    for module in FILE_MODULES:
        if module in ctx.blocks:
            ids.update(ctx.blocks[module].ids.tolist())
    for files in ctx.dxt_cov.values():
        ids |= files
    layout: dict[int, tuple[int | None, list[str]]] = {}
    if ctx.job.lustre is not None:
        for rid, size, osts in zip(
            ctx.job.lustre["id"].tolist(),
            ctx.job.lustre["stripe_size"].tolist(),
            ctx.job.lustre["osts"].tolist(),
            strict=True,
        ):
            ids.add(int(rid))
            layout[int(rid)] = (int(size) or None, [f"OST{o:04x}" for o in osts if o >= 0])
    if not ids:
        return None
    order = sorted(ids)
    return pa.table(
        {
            "file_id": [ctx.fid(i) for i in order],
            "path": [ctx.path(i) for i in order],
            "stripe_size": [layout.get(i, (None, []))[0] for i in order],
            "osts": [layout.get(i, (None, []))[1] for i in order],
        },
        schema=FILES,
    )


def heatmap_metrics(ctx: LogContext) -> pa.Table | None:
    """HEATMAP bins summed over ranks: bytes/s per bin, one series per module and op."""
    sums: dict[tuple[str, str, int], float] = {}
    width: dict[tuple[str, str, int], float] = {}
    for h in ctx.heatmaps:
        if h.bin_width <= 0:
            continue
        for op, bins in (("read", h.read_bins), ("write", h.write_bins)):
            for i in np.flatnonzero(bins > 0).tolist():
                # bins are aligned to the job start: key by the bin's end, in microseconds
                key = (h.module, op, round((i + 1) * h.bin_width * 1e6))
                sums[key] = sums.get(key, 0.0) + float(bins[i])
                width[key] = h.bin_width
    if not sums:
        return None
    keys = sorted(sums)
    return pa.table(
        {
            "ts": np.array([ctx.t0_us + k[2] for k in keys]).astype("datetime64[us]"),
            "interval_s": [width[k] for k in keys],
            "kind": ["compute"] * len(keys),
            "component_id": [f"darshan:{ctx.job.job_id}"] * len(keys),
            "job_id": [ctx.job.job_id] * len(keys),
            "metric": [f"darshan_{k[0].lower()}_{k[1]}_bytes" for k in keys],
            "value": [sums[k] / width[k] for k in keys],
        },
        schema=METRICS,
    )


# -- the log itself ---------------------------------------------------------------------


def log_row(ctx: LogContext, key: str, path: Path) -> pa.Table:
    job = ctx.job
    modules = {name: dict(info) for name, info in job.module_info.items()}
    for name, header in ctx.autoperf.items():
        modules[name]["header"] = header
    row = {
        "job_id": job.job_id,
        "log_key": key,
        "path": str(path.resolve()),
        "log_version": job.log_version,
        "lib_version": job.lib_version,
        "exe": job.exe,
        "uid": job.uid,
        "nprocs": job.nprocs,
        "start": job.start,
        "end": job.end,
        "run_time_s": job.run_time,
        "metadata": json.dumps(job.metadata, sort_keys=True),
        "mounts": json.dumps([list(m) for m in job.mounts]),
        "modules": json.dumps(modules, sort_keys=True),
        "imported": now(),
    }
    return pa.Table.from_pylist([row], schema=DARSHAN_LOGS)


def module_rows(ctx: LogContext, key: str) -> pa.Table | None:
    rows = [
        {
            "log_key": key,
            "module": name,
            "version": b.version,
            "partial": b.partial,
            "counter_names": b.cnames,
            "fcounter_names": b.fnames,
        }
        for name, b in ctx.blocks.items()
    ]
    return pa.Table.from_pylist(rows, schema=DARSHAN_MODULES) if rows else None


def _lists(block: np.ndarray, dtype: pa.DataType) -> pa.Array:
    n, width = block.shape
    offsets = pa.array(np.arange(n + 1, dtype=np.int32) * width)
    return pa.ListArray.from_arrays(offsets, pa.array(block.reshape(-1), dtype))


def record_rows(ctx: LogContext, key: str) -> pa.Table | None:
    tables = []
    for name, b in ctx.blocks.items():
        if not len(b):
            continue
        names = ctx.job.names
        tables.append(
            pa.table(
                {
                    "log_key": pa.array([key] * len(b), pa.string()),
                    "module": pa.array([name] * len(b), pa.string()),
                    "record_id": b.ids.view(np.int64),
                    "rank": b.ranks.astype(np.int32),
                    "path": pa.array([names.get(i) for i in b.ids.tolist()], pa.string()),
                    "counters": _lists(b.c, pa.int64()),
                    "fcounters": _lists(b.f, pa.float64()),
                },
                schema=DARSHAN_RECORDS,
            )
        )
    return pa.concat_tables(tables) if tables else None
