"""What the Drishti rules share: the rule base, counter sums, offending files, advice."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from iolens.analyze.darshan import groups
from iolens.analyze.darshan.drishti import thresholds as T
from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.mounts import MountTable, is_lustre, lfs_dir

MiB = 2**20

#: Darshan's request-size bins below 1 MiB, Drishti's "small" requests
SMALL_BINS = ("0_100", "100_1K", "1K_10K", "10K_100K", "100K_1M")
#: pseudo-files that are not data files
STD_STREAMS = frozenset({"<STDIN>", "<STDOUT>", "<STDERR>"})
#: at most this many ranks are listed in evidence
MAX_RANKS = 16


class DrishtiRule(DarshanRule):
    """A Darshan rule that reproduces one Drishti 0.8 insight (or a DXT Explorer one)."""

    #: Drishti's insight code (`S01`, `P05`, `M02`, ... or DXT Explorer's `D01`, `D02`)
    drishti_code: ClassVar[str]
    #: Drishti's level for it: HIGH, WARN, INFO or OK
    drishti_level: ClassVar[str]

    def stored(self, values: dict[str, Any]) -> dict[str, Any]:
        """Evidence and gain as plain JSON values (`clean`), whatever numpy gave the rule."""
        return clean(values)


# --- counters --------------------------------------------------------------------------


def col(df: pd.DataFrame, name: str) -> pd.Series:
    """A counter column, or zeros when this log's module version lacks it."""
    if name in df.columns:
        return df[name]
    return pd.Series(0, index=df.index, dtype="int64")


def total(df: pd.DataFrame, *names: str) -> int:
    return int(sum(int(col(df, n).sum()) for n in names))


def ftotal(df: pd.DataFrame, *names: str) -> float:
    return float(sum(float(col(df, n).sum()) for n in names))


def bytes_counter(prefix: str, op: str) -> str:
    """The bytes counter of `op` (READ or WRITE) in module `prefix` (POSIX, MPIIO, ...):
    Darshan names the write side BYTES_WRITTEN, not BYTES_WRITE."""
    return f"{prefix}_BYTES_READ" if op == "READ" else f"{prefix}_BYTES_WRITTEN"


def collective_call(op: str) -> str:
    """The collective MPI-IO call of `op` (READ or WRITE) that the advice names."""
    return "MPI_File_write_at_all" if op == "WRITE" else "MPI_File_read_at_all"


def small_bins(df: pd.DataFrame, op: str) -> pd.Series:
    """Per record, the requests in Darshan's bins up to 1 MiB, as Drishti counts them;
    `op` is READ or WRITE. Darshan's 100K_1M bin includes requests of exactly 1 MiB."""
    out = pd.Series(0, index=df.index, dtype="int64")
    for b in SMALL_BINS:
        out = out + col(df, f"POSIX_SIZE_{op}_{b}")
    return out


def exact_mib(df: pd.DataFrame, op: str) -> pd.Series:
    """Per record, the requests of exactly 1 MiB, from Darshan's four most common access
    sizes (POSIX_ACCESSn_ACCESS/COUNT, reads and writes together), split between reads
    and writes in proportion to their 100K_1M bins and never above the bin."""
    acc = pd.Series(0, index=df.index, dtype="int64")
    for i in range(1, 5):
        size, count = col(df, f"POSIX_ACCESS{i}_ACCESS"), col(df, f"POSIX_ACCESS{i}_COUNT")
        acc = acc + count.where(size == T.SMALL_BYTES, 0)
    r, w = col(df, "POSIX_SIZE_READ_100K_1M"), col(df, "POSIX_SIZE_WRITE_100K_1M")
    mine = r if op == "READ" else w
    both = (r + w).where(r + w > 0)
    est = (acc * mine / both).fillna(0).round()
    return np.minimum(est, mine).astype("int64")


def small_requests(df: pd.DataFrame, op: str) -> pd.Series:
    """Per record, the requests under 1 MiB (Drishti's small requests, without the
    requests of exactly 1 MiB that Darshan's 100K_1M bin also holds)."""
    return small_bins(df, op) - exact_mib(df, op)


@dataclass
class SmallShare:
    """The requests under 1 MiB of one direction (READ or WRITE) over some POSIX records,
    and the files they went to: what the small-request rules (whole job or shared files)
    report."""

    op: str
    ops: int
    small: int
    exact_mib: int  # requests of exactly 1 MiB, which Drishti counts as small and we do not
    nbytes: int
    files: pd.DataFrame  # per file id: small_<verb>s, <verb>s, bytes; only files with any

    @property
    def verb(self) -> str:
        return self.op.lower()

    @property
    def share(self) -> float:
        return self.small / self.ops

    @property
    def collective_call(self) -> str:
        return collective_call(self.op)

    @property
    def cb_hint(self) -> str:
        return "romio_cb_write" if self.op == "WRITE" else "romio_cb_read"


def small_share(c: pd.DataFrame, op: str) -> SmallShare | None:
    """`SmallShare` of records `c`, or None unless more than 10 % of the requests, and more
    than 1,000 of them, are small (Drishti's small_requests and small_requests_absolute)."""
    verb = op.lower()
    bytes_col = bytes_counter("POSIX", op)
    ops = total(c, f"POSIX_{op}S")
    exact = exact_mib(c, op)  # once: `small_requests` is the bins less these
    small = small_bins(c, op) - exact
    n_small = int(small.sum())
    if not n_small or n_small / ops <= T.SMALL_REQUESTS or n_small <= T.SMALL_REQUESTS_ABSOLUTE:
        return None
    files = per_file(c, {f"small_{verb}s": small, f"{verb}s": c[f"POSIX_{op}S"]})
    files["bytes"] = per_file(c, {"b": c[bytes_col]})["b"]
    files = files[files[f"small_{verb}s"] > 0]
    return SmallShare(op, ops, n_small, int(exact.sum()), total(c, bytes_col), files)


def modules(job: DarshanJob) -> set[str]:
    """Every module the log has, as Drishti sees them (`log_get_modules`)."""
    return set(job.module_info) | set(job.modules)


def uses_mpiio(job: DarshanJob) -> bool:
    return "MPI-IO" in modules(job)


def path(job: DarshanJob, rid: Any) -> str:
    rid = int(rid)
    return job.names.get(rid, f"<record {rid:#x}>")


def per_file(df: pd.DataFrame, values: dict[str, pd.Series], how: str = "sum") -> pd.DataFrame:
    """`values` (Series with the index of `df`) aggregated per file id ("sum" or "max"),
    by id: `df.groupby("id").agg(how)` of `values`, in numpy (`groups`: a groupby costs
    a fraction of a millisecond whatever the rows, and the rules make dozens)."""
    if how not in ("sum", "max"):
        raise ValueError(f"per_file: sum or max, not {how!r}")
    for v in values.values():
        if not v.index.equals(df.index):
            raise ValueError("per_file: values must have the index of the records")
    ids = df["id"].to_numpy()
    if not len(ids):
        return pd.DataFrame({"id": df["id"], **values}).groupby("id").agg(how)
    order = np.argsort(ids, kind="stable")
    starts = groups.starts_of(ids[order])
    # pandas sums floats in row order, with np.add.reduceat when the ids come sorted and
    # Kahan's compensation otherwise (`groups`)
    in_order = bool((order == np.arange(len(order))).all())
    out = {}
    for name, v in values.items():
        x = v.to_numpy()[order]
        if x.dtype == bool and how == "sum":
            x = x.astype(np.int64)
        if how == "max":
            out[name] = groups.maxima(x, starts)
        else:
            out[name] = groups.sums(x, starts, compensated=not in_order)
    return pd.DataFrame(out, index=pd.Index(ids[order][starts], name="id"))


def top_files(
    job: DarshanJob, files: pd.DataFrame, by: str, n: int = T.TOP_FILES
) -> list[dict[str, Any]]:
    """The `n` files with the largest `by`, as evidence rows (path first, plain numbers)."""
    top = files.sort_values(by, ascending=False).head(n)
    return [
        {"path": path(job, rid), **{str(k): plain(v) for k, v in row.items()}}
        for rid, row in top.to_dict(orient="index").items()
    ]


def ranks_of(df: pd.DataFrame, ids: Any) -> list[int]:
    """Ranks with records on the files `ids`; -1 stands for all ranks (a shared record)."""
    ranks = df.loc[df["id"].isin(list(ids)), "rank"].unique()
    return sorted(int(r) for r in ranks)[:MAX_RANKS]


def plain(v: Any) -> Any:
    """numpy scalars as Python numbers, floats rounded for the evidence."""
    if isinstance(v, bool | np.bool_):
        return bool(v)
    if isinstance(v, np.integer | int):
        return int(v)
    if isinstance(v, np.floating | float):
        return round(float(v), 4) if math.isfinite(v) else None
    return v


def clean(v: Any) -> Any:
    """`plain` applied through dicts and lists."""
    if isinstance(v, dict):
        return {str(k): clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [clean(x) for x in v]
    return plain(v)


def share_severity(share: float) -> str:
    """Drishti HIGH: critical when it concerns most of the job's I/O, warning otherwise."""
    return "critical" if share >= T.CRITICAL_SHARE else "warning"


def human(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"  # pragma: no cover


def request_gain(ops: int, nbytes: int, what: str) -> dict[str, Any] | None:
    """Requests now vs. requests to move the same bytes in 1 MiB requests."""
    target = max(1, math.ceil(nbytes / T.TARGET_REQUEST))
    if ops <= target:
        return None
    return {
        "metric": f"{what}_requests",
        "factor": round(ops / target, 1),
        "current": int(ops),
        "at_1MiB": int(target),
        "basis": f"{ops} requests move {human(nbytes)}; in 1 MiB requests that is {target}",
    }


# --- site facts: nodes, striping ---------------------------------------------------


def node_count(job: DarshanJob, ctx: RuleContext) -> tuple[int | None, bool]:
    """(nodes, exact): from the site (`ctx.extra["nnodes"]`, e.g. the scheduler record) or
    the distinct DXT hostnames, exact only when DXT saw every rank (else a lower bound)."""
    n = ctx.extra.get("nnodes")
    if n:
        return int(n), True
    dxt = job.dxt
    if dxt is None or not len(dxt) or "hostname" not in dxt.columns:
        return None, False
    hosts = dxt["hostname"].dropna()
    hosts = hosts[hosts.astype(str).str.len() > 0]
    if not len(hosts):
        return None, False
    exact = dxt["rank"].nunique() >= job.nprocs
    return int(hosts.nunique()), bool(exact)


def stripe_of(job: DarshanJob, rid: Any) -> tuple[int, int] | None:
    """(stripe count, stripe size) of a file from the LUSTRE module, if recorded."""
    lu = job.lustre
    if lu is None or not len(lu):
        return None
    rows = lu[lu["id"] == np.uint64(int(rid))]
    if not len(rows):
        return None
    r = rows.iloc[0]
    return int(r["stripe_count"]), int(r["stripe_size"])


def lustre_dir(job: DarshanJob, rid: Any) -> str | None:
    """The directory `lfs` advice on file `rid` names, None unless the file is on Lustre
    (`iolens.model.mounts.lfs_dir`: its mount, or a LUSTRE record; never a mount point)."""
    return lfs_dir(MountTable(job.mounts), path(job, rid), stripe_of(job, rid) is not None)


def uses_lustre(job: DarshanJob) -> bool:
    """Does any of the job's data files live on Lustre?"""
    if job.lustre is not None and len(job.lustre):
        return True
    table = MountTable(job.mounts)
    return any(
        is_lustre(table.fs_type(job.names.get(int(rid), "")))
        for mod in ("POSIX", "MPI-IO", "STDIO")
        for rid in job.counters(mod)["id"].unique()
    )


def setstripe(job: DarshanJob, ctx: RuleContext, rid: Any | None) -> str | None:
    """`lfs setstripe` for the directory of file `rid` (None: the job's output directory):
    wider than today, within the file system's OST count when the site gives it; None
    when the file (for None: every data file of the job) is not on Lustre."""
    where = lustre_dir(job, rid) if rid is not None else ("OUTDIR" if uses_lustre(job) else None)
    if where is None:
        return None
    current = stripe_of(job, rid) if rid is not None else None
    count = max(8, 2 * current[0]) if current else 8
    if ctx.ost_total:
        count = min(count, ctx.ost_total)
    return f"lfs setstripe -c {count} -S 4M {where}"


def stripe_clause(job: DarshanJob, ctx: RuleContext, rid: Any | None, lead: str) -> str:
    """`; <lead>: `lfs setstripe ...`` for a file on Lustre, else nothing."""
    cmd = setstripe(job, ctx, rid)
    return f"; {lead}: `{cmd}`" if cmd else ""


def mpich_hints(**kv: Any) -> str:
    """ROMIO hints as MPICH's environment variable (Open MPI: ROMIO_HINTS file)."""
    body = ":".join(f"{k}={v}" for k, v in kv.items())
    return f'export MPICH_MPIIO_HINTS="*:{body}"'


# --- per-rank workload (D01, D02) ---------------------------------------------------------


def per_rank(job: DarshanJob) -> pd.DataFrame:
    """Bytes, requests and I/O seconds of every rank over POSIX and STDIO data files.

    A shared record (rank -1) is the sum over its ranks; Darshan keeps which rank was the
    slowest and the fastest on it, with their bytes and seconds, so those ranks get what
    they moved and the rest is spread over the others (DXT's per-rank split when the log
    has one): the zoom-in's `rank_load`, so every rule sees the same ranks. An even split
    made a collective write through one aggregator (MACSio: rank 0 moved 98 % of a shared
    HDF5 file) read as rank 0 moving 1/nprocs of it."""
    from iolens.analyze.darshan.zoomin.factors import rank_load

    load = rank_load(job)
    return pd.DataFrame(
        {"bytes": load.bytes, "ops": load.requests, "time": load.time},
        index=pd.RangeIndex(len(load.bytes), name="rank"),
    )
