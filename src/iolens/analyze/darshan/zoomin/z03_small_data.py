"""Z03: bandwidth limited by the small data size (zoom-in root cause 3)."""

from __future__ import annotations

from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.advice import mb
from iolens.analyze.darshan.zoomin.analysis import zoom
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class SmallDataSize(DarshanRule):
    """The job moves too little data for its bandwidth to mean much.

    Symptom: under 2 GB moved at under 1 GB/s (the paper's lowest bandwidth class), in
    I/O time long enough to notice.
    Why it hurts: fixed costs (opens, the first byte of each file, metadata round trips)
    dominate a small transfer, so its bandwidth stays low whatever the file system does;
    the paper excludes jobs under 1 GB for that reason and attributes a 1.2 GB Quantum1
    job to it (§IV, §IV-G).
    What to do: usually nothing on the file system. When many such jobs or files add up,
    pack small files into one container (HDF5, tar) or keep them on node-local storage.
    """

    code = "Z03"
    name = "small-data-size"
    severity = "info"
    target = "user"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        z = zoom(job, ctx)
        bw = z.factors["bandwidth"]
        size = z.datasize
        if not z.material or size <= 0 or size >= z.t("SMALL_DATASIZE"):
            return None
        if bw is None or bw >= z.t("LOW_BANDWIDTH"):
            return None
        evidence = {
            "datasize": size,
            "bandwidth": bw,
            "io_time_s": round(z.io_time, 4),
            "file_count": len(z.files),
            "files": z.cover_evidence(),
        }
        rec = (
            f"The job moved {mb(size)} at {mb(bw)}/s: too little data for bandwidth to be the "
            "measure. If this I/O matters, pack its small files into one container "
            "(`tar cf inputs.tar inputs/` or one HDF5 file) or stage them to node-local "
            "storage (`cp -r inputs /dev/shm/`) before the run."
        )
        return self.finding(job, evidence, rec)
