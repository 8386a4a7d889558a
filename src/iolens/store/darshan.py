"""Rebuild `DarshanJob`s from the `darshan_*` tables, for re-analysis and reports.

Counters are stored as one int64 list per record in the module's counter-name order, so a
module comes back as one numpy block (a reshape, not a per-counter pivot).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pandas as pd
import pyarrow as pa

from iolens.model.darshan import DarshanJob, ModuleData
from iolens.model.ids import file_id
from iolens.store.base import Store


def log_keys(store: Store, job_id: str) -> list[str]:
    """The job's imported logs, oldest run first."""
    rows = store.query(
        'SELECT log_key FROM darshan_logs WHERE job_id = ? ORDER BY "start", log_key', [job_id]
    )
    return rows.column("log_key").to_pylist()


def load_jobs(store: Store, job_id: str) -> Iterator[DarshanJob]:
    """Every Darshan log of the job, as `DarshanJob`s (DXT not loaded: see client_io)."""
    for key in log_keys(store, job_id):
        yield load_log(store, key)


def load_log(store: Store, log_key: str) -> DarshanJob:
    head = store.query("SELECT * FROM darshan_logs WHERE log_key = ?", [log_key]).to_pylist()[0]
    job = DarshanJob(
        job_id=head["job_id"],
        uid=int(head["uid"] or 0),
        exe=head["exe"] or "",
        nprocs=int(head["nprocs"] or 0),
        start=head["start"],
        end=head["end"],
        run_time=float(head["run_time_s"] or 0.0),
        log_version=head["log_version"] or "",
        lib_version=head["lib_version"] or "",
        metadata=json.loads(head["metadata"] or "{}"),
        mounts=[tuple(m) for m in json.loads(head["mounts"] or "[]")],
        module_info=json.loads(head["modules"] or "{}"),
        path=head["path"] or "",
    )
    mods = store.query(
        "SELECT module, version, partial, counter_names, fcounter_names "
        "FROM darshan_modules WHERE log_key = ?",
        [log_key],
    ).to_pylist()
    for m in mods:
        recs = store.query(
            "SELECT record_id, rank, path, counters, fcounters FROM darshan_records "
            "WHERE log_key = ? AND module = ? ORDER BY rank, record_id",
            [log_key, m["module"]],
        )
        job.modules[m["module"]] = _module(recs, m)
        for rid, path in zip(
            recs.column("record_id").to_pylist(), recs.column("path").to_pylist(), strict=True
        ):
            if path is not None:
                job.names[int(np.int64(rid).astype(np.uint64))] = path
    job.lustre = _lustre(store, job)
    return job


def _block(col: pa.ChunkedArray, width: int, dtype: type) -> np.ndarray:
    flat = pa.concat_arrays([c.flatten() for c in col.chunks]) if col.num_chunks else pa.array([])
    return np.asarray(flat.to_numpy(zero_copy_only=False), dtype=dtype).reshape(len(col), width)


def _module(recs: pa.Table, m: dict) -> ModuleData:
    cnames, fnames = list(m["counter_names"] or []), list(m["fcounter_names"] or [])
    ids = recs.column("record_id").to_numpy().astype(np.int64).view(np.uint64)
    idx = pd.DataFrame({"id": ids, "rank": recs.column("rank").to_numpy().astype(np.int64)})
    c = pd.DataFrame(_block(recs.column("counters"), len(cnames), np.int64), columns=cnames)
    f = pd.DataFrame(_block(recs.column("fcounters"), len(fnames), np.float64), columns=fnames)
    return ModuleData(
        pd.concat([idx, c], axis=1),
        pd.concat([idx.copy(), f], axis=1),
        int(m["version"] or 0),
        bool(m["partial"]),
    )


def _lustre(store: Store, job: DarshanJob) -> pd.DataFrame | None:
    """Stripe layouts of the job's files, from the files table the importer fills."""
    if "LUSTRE" not in job.module_info or not job.names:
        return None
    # files are keyed by iolens' path hash (model.ids.file_id), not Darshan's record id
    by_fid = {file_id(path): rid for rid, path in job.names.items()}
    rows = store.query(
        "SELECT file_id, stripe_size, osts FROM files WHERE file_id IN (SELECT unnest(?))",
        [list(by_fid)],
    ).to_pylist()
    out = [
        {
            "id": np.uint64(by_fid[r["file_id"]]),
            "rank": -1,
            "stripe_size": r["stripe_size"],
            "stripe_count": len(r["osts"] or []),
            "osts": [_ost_index(o) for o in r["osts"] or []],
        }
        for r in rows
        if r["osts"]
    ]
    return pd.DataFrame(out, columns=["id", "rank", "stripe_size", "stripe_count", "osts"])


def _ost_index(name: str) -> int:
    """'fsname-OST002a' / 'OST002a' / '42' -> 42 (Lustre names OSTs by hex index)."""
    tail = name.rsplit("OST", 1)[-1]
    try:
        return int(tail, 16) if "OST" in name else int(tail)
    except ValueError:
        return -1
