"""What the expert rules share: the rule base, per-file layer figures, the job's I/O.

The rules compare what the application asked of MPI-IO with what reached the file system
through POSIX, file by file (Darshan gives a file the same record id in every module), so
the shared piece is `layers`: one row per file both modules recorded. Severity is the share
of the job's I/O a finding explains (`ExpertRule.severity_for`), never a fixed level.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from iolens.analyze.darshan.drishti.common import clean, col
from iolens.analyze.darshan.expert import thresholds as th
from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.analysis import zoom
from iolens.analyze.darshan.zoomin.records import data_records
from iolens.model.darshan import DarshanJob

#: columns of `layers`, per module: m_ for MPI-IO, p_ for POSIX
_FIGURES = (
    "bytes_read",
    "bytes_written",
    "reads",
    "writes",
    "read_time",
    "write_time",
    "meta_time",
)
_KEY = "expert"
#: the severity thresholds of a time-based and of a byte-based rule
_SEVERITY = {
    "time": ("WARNING_SHARE", "CRITICAL_SHARE", "MIN_IO_S"),
    "bytes": ("WARNING_SHARE", "CRITICAL_SHARE", "MIN_BYTES"),
}


class ExpertRule(DarshanRule):
    """A rule of this family: thresholds from `thresholds.py`, severity from the share of
    the job's I/O time or bytes the finding explains."""

    #: the names in `thresholds.py` this rule's evidence is held to (documented with
    #: their sources in docs/findings.md); the severity ones apply to every rule
    thresholds: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def threshold_doc(cls) -> str:
        return th.describe((*cls.thresholds, *_SEVERITY[cls.basis]))

    #: what the severity share is a share of: "time" or "bytes"
    basis: ClassVar[str] = "time"

    def t(self, ctx: RuleContext, name: str) -> Any:
        return th.get(name, ctx.extra)

    def stored(self, values: dict[str, Any]) -> dict[str, Any]:
        return clean(values)

    def severity_for(
        self, ctx: RuleContext, share: float, *, seconds: float | None = None, nbytes: float = 0
    ) -> str:
        """info under WARNING_SHARE of the job's I/O (or under MIN_IO_S seconds / MIN_BYTES
        explained), critical from CRITICAL_SHARE, warning between."""
        small = (
            seconds < self.t(ctx, "MIN_IO_S")
            if seconds is not None
            else nbytes < self.t(ctx, "MIN_BYTES")
        )
        if small or share < self.t(ctx, "WARNING_SHARE"):
            return "info"
        return "critical" if share >= self.t(ctx, "CRITICAL_SHARE") else "warning"


# --- the job's I/O, as the application and as the file system see it -----------------


class Figures:
    """The normalised records of one job and what the rules derive from them, computed
    once per job (`figures`) whatever the number of rules that ask."""

    def __init__(self, job: DarshanJob, ctx: RuleContext) -> None:
        self.job = job
        self.ctx = ctx
        #: results of rule helpers that other rules reuse (X04 asks X03's and X05's)
        self.memo: dict[str, Any] = {}

    @cached_property
    def fs(self) -> pd.DataFrame:
        """POSIX and STDIO data records (what reached the file system), shared with the
        zoom-in rules' analysis of the same job."""
        return zoom(self.job, self.ctx).records

    @cached_property
    def mpi(self) -> pd.DataFrame:
        return data_records(self.job, ("MPI-IO",))

    @cached_property
    def posix(self) -> pd.DataFrame:
        return data_records(self.job, ("POSIX",))

    @cached_property
    def app_io_time(self) -> float:
        """Seconds the ranks spent in I/O calls, summed over ranks, at the top layer of
        each file: MPI-IO's time for files opened through MPI-IO, POSIX/STDIO's for the
        rest (POSIX calls under MPI-IO are not counted twice). Streams excluded."""
        fs, mpi = self.fs, self.mpi
        under = fs["id"].isin(set(mpi["id"])) if len(mpi) else np.zeros(len(fs), bool)
        return float(mpi["io_time"].sum() + fs.loc[~under, "io_time"].sum())

    @cached_property
    def fs_bytes(self) -> float:
        """Bytes that reached the file system (POSIX and STDIO data files)."""
        return float(self.fs["bytes"].sum())

    @cached_property
    def layers(self) -> pd.DataFrame:
        """One row per file that both MPI-IO and POSIX recorded (index: record id), with
        `m_<figure>` and `p_<figure>` sums over ranks, `m_coll_reads`/`m_coll_writes`
        and `shared` (the MPI-IO record is a shared one, or several ranks have one)."""
        mpi, posix = self.mpi, self.posix
        if not len(mpi) or not len(posix):
            return pd.DataFrame()
        m = mpi.groupby("id")[list(_FIGURES)].sum().add_prefix("m_")
        p = posix.groupby("id")[list(_FIGURES)].sum().add_prefix("p_")
        out = m.join(p, how="inner")
        if not len(out):
            return out
        c = self.job.counters("MPI-IO")
        coll = (
            pd.DataFrame(
                {
                    "id": c["id"].to_numpy(dtype=np.uint64),
                    "m_coll_reads": col(c, "MPIIO_COLL_READS").clip(lower=0).to_numpy(),
                    "m_coll_writes": col(c, "MPIIO_COLL_WRITES").clip(lower=0).to_numpy(),
                }
            )
            .groupby("id")[["m_coll_reads", "m_coll_writes"]]
            .sum()
        )
        out = out.join(coll, how="left").fillna({"m_coll_reads": 0, "m_coll_writes": 0})
        shared = mpi.groupby("id")["rank"].agg(lambda r: bool((r < 0).any() or r.nunique() > 1))
        out["shared"] = shared.reindex(out.index).fillna(False).astype(bool)
        return out


def figures(job: DarshanJob, ctx: RuleContext) -> Figures:
    """The job's `Figures`, cached in `ctx.extra` for as long as the same job is asked for."""
    return ctx.per_job(_KEY, job, lambda: Figures(job, ctx))


def name_of(job: DarshanJob, rid: Any) -> str:
    rid = int(rid)
    return job.names.get(rid, f"<record {rid:#x}>")


def fs_type(job: DarshanJob, path: str) -> str | None:
    """The file-system type of `path` from the log's mount table (longest mount point)."""
    best: tuple[int, str] | None = None
    for mount, kind in job.mounts:
        m = mount.rstrip("/") or "/"
        inside = path == m or path.startswith(m if m == "/" else m + "/")
        if inside and (best is None or len(m) > best[0]):
            best = (len(m), kind)
    return best[1] if best else None
