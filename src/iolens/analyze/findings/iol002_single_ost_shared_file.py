"""IOL002: a heavily shared file striped over a single OST."""

from __future__ import annotations

from iolens.analyze.findings.base import GiB, JobRule
from iolens.analyze.jobreport import JobReport
from iolens.analyze.savings import TARGET_STRIPES, Context, Saving, at_best_rate, data_time
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

    def saving(self, finding: Finding, report: JobReport, ctx: Context) -> Saving | None:
        """The hot files' share of the data time, at up to 8 times the rate (TARGET_STRIPES)
        (one OST's bandwidth per stripe), capped by one OST's peak per stripe and the
        forwarders' and IO500's limits (the OST sum is no limit: the fix changes it)."""
        t, total = data_time(report), report.read_bytes + report.write_bytes
        hot = sum(f["bytes"] for f in finding.evidence["files"])
        if t <= 0 or total <= 0 or hot <= 0:
            return None
        t_hot = t * min(hot / total, 1.0)
        now = hot / t_hot
        cap = ctx.capacity
        limits = [now * TARGET_STRIPES, cap.ceiling(with_osts=False)]
        if cap.ost_peak:
            limits.append(cap.ost_peak * TARGET_STRIPES)
        best = min(x for x in limits if x)
        return at_best_rate(
            t_hot, hot, best, "on one OST each",
            f"striped over {TARGET_STRIPES} OSTs ({cap.describe(with_osts=False)})",
        )  # fmt: skip
