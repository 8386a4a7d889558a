"""Z08: file-per-process pattern, a positive factor (zoom-in root cause 8)."""

from __future__ import annotations

from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.advice import mb
from iolens.analyze.darshan.zoomin.analysis import zoom
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding
from iolens.model.mounts import MountTable, lfs_dir

#: Rank count above which one file per rank starts to load the metadata server.
MANY_FILES = 10_000


class FilePerProcess(DarshanRule):
    """The job writes or reads one file per process.

    Symptom: files touched by exactly one rank carry half or more of the bytes, there is
    at least one such file per two ranks, and the job moves 1 GiB or more.
    Why it hurts: it does not; a positive factor: ranks never contend for a file's locks or
    stripes, which is how Cosmology1's fast run reached tens of GB/s (Table III). Its cost
    is metadata: one create per rank, which the MDS feels at tens of thousands of ranks.
    What to do: keep it; on Lustre, one stripe per file (`lfs setstripe -c 1 DIR`) so the
    files spread over the OSTs. Past ~10,000 ranks, group files per node (HDF5 subfiling,
    ADIOS2 aggregation) to spare the MDS.
    """

    code = "Z08"
    name = "file-per-process"
    severity = "info"
    target = "user"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        z = zoom(job, ctx)
        f = z.files
        nprocs = max(job.nprocs, 1)
        if nprocs < 2 or z.datasize < z.t("POSITIVE_MIN_BYTES") or not len(f):
            return None
        own = f[(~f["shared"]) & (f["ranks"] == 1) & (f["bytes"] > 0)]
        r = z.records
        owners = r[r["id"].isin(own["id"]) & (r["rank"] >= 0)]["rank"].nunique()
        share = float(own["bytes"].sum()) / z.datasize
        if share < z.t("FPP_BYTES_SHARE") or len(own) < z.t("FPP_FILES_PER_RANK") * nprocs:
            return None
        if owners < 2:
            return None
        evidence = {
            "files": len(own),
            "ranks_with_own_file": int(owners),
            "nprocs": nprocs,
            "bytes_share": round(share, 4),
            "bytes": float(own["bytes"].sum()),
            "bandwidth": z.factors["bandwidth"],
            "examples": [str(p) for p in own["path"].head(3)],
        }
        first = own.iloc[0]
        d = lfs_dir(MountTable(job.mounts), str(first["path"]), len(first["osts"]) > 0)
        rec = (
            f"{len(own)} per-rank files carry {share:.0%} of the job's {mb(z.datasize)}: no "
            "lock or stripe contention between ranks. Keep this pattern"
            + (
                ", with one stripe per file so the allocator spreads the files over the OSTs: "
                f"`lfs setstripe -c 1 {d}`"
                if d
                else ""
            )
            + (
                "; at this scale consider one file per node (HDF5 subfiling: "
                "`H5Pset_fapl_subfiling(fapl, NULL)`) to spare the metadata server."
                if nprocs >= MANY_FILES
                else "."
            )
        )
        return self.finding(job, evidence, rec)
