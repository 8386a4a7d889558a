"""Z07: bad file-system weather (zoom-in root cause 7)."""

from __future__ import annotations

from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.analysis import zoom
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class BadWeather(DarshanRule):
    """The file system was busy when the job started.

    Symptom: in the 5 s before the job started (Table I factors 13-15), the MDS or the
    job's OSSes were 50 % busy or more, or its OSTs moved half of what they can in 5 s
    (this needs one OST's peak bandwidth, `RuleContext.ost_bw`).
    Why it hurts: the job competes with others for servers it does not control; Quantum1's
    well-formed job that spent 73 % of its I/O time writing a 4.8 MB file ran while the
    MDS was at 59 % CPU against well under that for its other runs (§IV-G, Figure 20).
    What to do: nothing in the job. Administrators find the load's source (`iolens
    anomalies`, `iolens interference JOB`) and throttle it (Lustre NRS TBF by job id).
    """

    code = "Z07"
    name = "bad-fs-weather"
    target = "admin"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        z = zoom(job, ctx)
        w = ctx.weather or {}
        if not z.material or not w:
            return None
        hot = []
        mds, oss, ost = w.get("mds_cpu_pct"), w.get("oss_cpu_pct"), w.get("ost_io_mb")
        if mds is not None and mds >= z.t("MDS_CPU_PCT"):
            hot.append(f"MDS CPU {mds:.0f} %")
        if oss is not None and oss >= z.t("OSS_CPU_PCT"):
            hot.append(f"OSS CPU {oss:.0f} %")
        if ost is not None and ctx.ost_bw and ost * 1e6 >= z.t("OST_BUSY_SHARE") * ctx.ost_bw * 5:
            hot.append(f"{ost:.0f} MB per OST in 5 s ({ost * 1e6 / (ctx.ost_bw * 5):.0%} of peak)")
        if not hot:
            return None
        evidence = {
            "mds_cpu_pct": mds,
            "oss_cpu_pct": oss,
            "ost_io_mb": ost,
            "ost_peak_bandwidth": ctx.ost_bw,
            "bandwidth": z.factors["bandwidth"],
            "files": z.cover_evidence(3),
        }
        rec = (
            f"The file system was busy in the 5 s before the job started ({', '.join(hot)}); "
            "the job's own I/O is not the cause. Administrators: find the source with "
            "`iolens anomalies` and `iolens interference JOB`, and throttle it, e.g. "
            '`lctl set_param mds.MDS.mdt.nrs_policies="tbf jobid"` with a rule for the '
            "offending job. Users: a rerun at a quieter time shows what the job can do."
        )
        return self.finding(job, evidence, rec)
