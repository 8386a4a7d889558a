"""IOL002: a heavily shared file striped over a single OST."""

from __future__ import annotations

from iolens.analyze.findings.base import GiB, JobRule
from iolens.analyze.jobreport import JobReport
from iolens.model.finding import Finding
from iolens.model.mounts import is_lustre_target

MIN_BYTES = 1 * GiB
MIN_PROCS = 4


class SingleOstSharedFile(JobRule):
    """A file shared by many processes lives on one OST.

    Symptom: a file that >= 4 processes share, carrying >= 1 GiB, has stripe count 1 on
    Lustre.
    Why it hurts: one OST's bandwidth caps the whole job however many nodes it uses, and
    that OST becomes a hot spot for every other job striped on it.
    What to do: `lfs setstripe -c -1` (or a count near the number of writers / 4) on the
    output directory before the job creates the file.
    """

    code = "IOL002"
    name = "single-ost-shared-file"

    def check(self, report: JobReport) -> Finding | None:
        hot = [
            f
            for f in report.top_files
            if f["procs"] >= MIN_PROCS
            and f["bytes"] >= MIN_BYTES
            and len(f["osts"]) == 1
            and is_lustre_target(f["osts"][0])  # `lfs` cannot restripe a MooseFS file
        ]
        if not hot:
            return None
        worst = hot[0]
        return self.finding(
            report,
            {"files": [{k: f[k] for k in ("path", "bytes", "procs", "osts")} for f in hot]},
            f"{worst['procs']} processes share {worst['path']} ({worst['bytes'] / GiB:.1f} GiB) "
            f"on the single OST {worst['osts'][0]}; stripe it over more OSTs: "
            "`lfs setstripe -c -1 <dir>` before the file is created.",
        )
