"""Z10: balanced OST workload with wide striping, a positive factor (root cause 10)."""

from __future__ import annotations

from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.advice import mb
from iolens.analyze.darshan.zoomin.analysis import zoom
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class BalancedWideStriping(DarshanRule):
    """The job's data is striped widely and spread evenly over its OSTs.

    Symptom: the bytes-weighted mean stripe count is 8 or more, the job uses that many
    OSTs, the busiest OST carries at most 1.5 times the mean OST's bytes, no single OST
    covers most of the I/O time (Z02), and the job moves 1 GiB or more.
    Why it hurts: it does not; a positive factor: many OSTs work in parallel and none holds the rest
    up, which is how Combustion1's fastest run reached (10, 100] GB/s (Figure 12).
    What to do: keep the layout (`lfs getstripe -d DIR` records it) for this application.
    """

    code = "Z10"
    name = "balanced-wide-striping"
    severity = "info"
    target = "user"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        z = zoom(job, ctx)
        f, o = z.files, z.osts
        if z.datasize < z.t("POSITIVE_MIN_BYTES") or len(o) < z.t("WIDE_STRIPES"):
            return None
        lay = f[f["osts"].map(len) > 0]
        b = float(lay["bytes"].sum())
        if b <= 0:
            return None
        stripes = float((lay["osts"].map(len) * lay["bytes"]).sum()) / b
        ratio = float(o["bytes"].max()) / (float(o["bytes"].sum()) / len(o))
        if stripes < z.t("WIDE_STRIPES") or ratio > z.t("OST_BALANCED"):
            return None
        one = z.one_ost
        if one is not None and one.cover_share >= z.t("ONE_OST_COVER_SHARE"):
            return None  # time is bound by one OST after all
        evidence = {
            "mean_stripe_count": round(stripes, 2),
            "osts": len(o),
            "ost_ratio_to_mean": round(ratio, 3),
            "bandwidth": z.factors["bandwidth"],
            "files": z.cover_evidence(3),
        }
        rec = (
            f"{mb(b)} striped over {stripes:.0f} OSTs on average and spread evenly over "
            f"{len(o)} OSTs (busiest at {ratio:.2f}x the mean): keep this layout "
            "(`lfs getstripe -d DIR` shows it; set it on new output directories)."
        )
        return self.finding(job, evidence, rec)
