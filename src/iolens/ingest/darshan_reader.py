"""Read a `.darshan` file into a `DarshanJob` through PyDarshan's low-level reader.

The record-by-record reader (`darshan.backend.cffi_backend`) is used rather than
`DarshanReport`, whose pandas conversion of DXT data needs gigabytes on large logs: here
counter records become one numpy block per module and DXT is read one record at a time.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from iolens.errors import InputError
from iolens.model.darshan import COUNTER_MODULES, DarshanJob, ModuleData


def _backend():
    import darshan.backend.cffi_backend as backend

    return backend


def read_log(path: str | Path, *, dxt: bool = True) -> DarshanJob:
    """The whole log as a `DarshanJob`; an unreadable log raises `InputError` naming it."""
    b = _backend()
    path = Path(path)
    if not path.is_file():
        raise InputError(str(path), "no such Darshan log")
    try:
        log = b.log_open(str(path))
    except Exception as exc:  # the C library reports through stderr and a NULL handle
        raise InputError(str(path), f"not a readable Darshan log ({exc})") from None
    if not log or not log.get("handle"):
        raise InputError(str(path), "not a readable Darshan log")
    try:
        return _read(b, log, path, dxt)
    except InputError:
        raise
    except Exception as exc:
        raise InputError(str(path), f"corrupt Darshan log ({type(exc).__name__}: {exc})") from None
    finally:
        b.log_close(log)


def _ts(sec: int, nsec: int = 0) -> datetime:
    return datetime.fromtimestamp(sec + nsec / 1e9, UTC).replace(tzinfo=None)


def _read(b, log: dict, path: Path, with_dxt: bool) -> DarshanJob:
    job = b.log_get_job(log)
    mods = b.log_get_modules(log)
    meta = dict(job.get("metadata") or {})
    out = DarshanJob(
        job_id=str(job["jobid"]),
        uid=int(job["uid"]),
        exe=b.log_get_exe(log) or "",
        nprocs=int(job["nprocs"]),
        start=_ts(job["start_time_sec"], job.get("start_time_nsec", 0)),
        end=_ts(job["end_time_sec"], job.get("end_time_nsec", 0)),
        run_time=float(job.get("run_time") or 0.0),
        log_version=str(job.get("log_ver", "")),
        lib_version=str(meta.pop("lib_ver", "")),
        metadata={str(k): str(v) for k, v in meta.items()},
        mounts=[(m, t) for m, t in b.log_get_mounts(log)],
        path=str(path),
    )
    out.names = {int(k): v for k, v in b.log_get_name_records(log).items()}
    out.module_info = {
        name: {"version": int(m["ver"]), "bytes": int(m["len"]), "partial": bool(m["partial_flag"])}
        for name, m in mods.items()
    }
    for name in mods:
        if name in COUNTER_MODULES:
            out.modules[name] = _counter_module(b, log, name, mods[name])
            out.module_info[name]["records"] = len(out.modules[name].counters)
    if "LUSTRE" in mods:
        out.lustre = _lustre(b, log)
        out.module_info["LUSTRE"]["records"] = len(out.lustre)
    if with_dxt:
        frames = [_dxt(b, log, m) for m in ("DXT_POSIX", "DXT_MPIIO") if m in mods]
        frames = [f for f in frames if len(f)]
        out.dxt = pd.concat(frames, ignore_index=True) if frames else None
    return out


def _counter_module(b, log: dict, name: str, info: dict) -> ModuleData:
    cnames, fnames = list(b.counter_names(name)), list(b.fcounter_names(name))
    ids, ranks, cs, fs = [], [], [], []
    while (rec := b.log_get_record(log, name)) is not None:
        ids.append(rec["id"])
        ranks.append(rec["rank"])
        cs.append(rec["counters"])
        fs.append(rec["fcounters"])
    idx = pd.DataFrame({"id": np.array(ids, dtype=np.uint64), "rank": np.array(ranks, np.int64)})
    c = np.vstack(cs).astype(np.int64) if cs else np.empty((0, len(cnames)), np.int64)
    f = np.vstack(fs).astype(np.float64) if fs else np.empty((0, len(fnames)), np.float64)
    counters = pd.concat([idx, pd.DataFrame(c, columns=cnames)], axis=1)
    fcounters = pd.concat([idx.copy(), pd.DataFrame(f, columns=fnames)], axis=1)
    return ModuleData(counters, fcounters, int(info["ver"]), bool(info["partial_flag"]))


def _lustre(b, log: dict) -> pd.DataFrame:
    rows = []
    while (rec := b.log_get_record(log, "LUSTRE")) is not None:
        if "components" in rec:  # Darshan >= 3.4.5: one entry per layout component
            comps = rec["components"] or [{"counters": [0, 0], "ost_ids": []}]
            c = comps[0]["counters"]
            osts = sorted({int(o) for comp in comps for o in comp["ost_ids"]})
            size, count = int(c[0]), int(c[1])
        else:  # older: LUSTRE_STRIPE_SIZE, LUSTRE_STRIPE_WIDTH, ..., then the OST list
            names = list(b.counter_names("LUSTRE"))
            c = dict(zip(names, rec["counters"], strict=False))
            size, count = int(c.get("LUSTRE_STRIPE_SIZE", 0)), int(c.get("LUSTRE_STRIPE_WIDTH", 0))
            osts = [int(o) for o in rec.get("ost_ids", [])]
        rows.append(
            {
                "id": np.uint64(rec["id"]),
                "rank": rec["rank"],
                "stripe_size": size,
                "stripe_count": count,
                "osts": osts,
            }
        )
    return pd.DataFrame(rows, columns=["id", "rank", "stripe_size", "stripe_count", "osts"])


def _dxt(b, log: dict, module: str) -> pd.DataFrame:
    """DXT segments, one row each (first-pass merging is the importer's job)."""
    cols: dict[str, list] = {
        k: [] for k in ("rank", "hostname", "id", "op", "offset", "length", "start", "end")
    }
    while (rec := b.log_get_dxt_record(log, module, dtype="dict")) is not None:
        for op in ("read", "write"):
            for seg in rec[f"{op}_segments"]:
                cols["rank"].append(rec["rank"])
                cols["hostname"].append(rec["hostname"])
                cols["id"].append(rec["id"])
                cols["op"].append(op)
                cols["offset"].append(seg["offset"])
                cols["length"].append(seg["length"])
                cols["start"].append(seg["start_time"])
                cols["end"].append(seg["end_time"])
    df = pd.DataFrame(cols)
    df.insert(0, "module", module)
    df["id"] = df["id"].astype(np.uint64)
    return df
