"""IOL006: I/O phases slower than earlier runs of the same application at the same scale."""

from __future__ import annotations

from iolens.analyze.findings.base import JobRule
from iolens.analyze.jobreport import JobReport
from iolens.analyze.savings import Context, Saving
from iolens.model.finding import Finding
from iolens.model.mounts import is_lustre_target

#: What a user can do about a neighbour, by the kind of server they shared.
_AVOID = {
    "forwarder": "ask the site to place your jobs behind other forwarders than its",
    "ost": "stripe your files over other OSTs (`lfs setstripe` with `-o` or another pool), "
    "or run the I/O phases at another time",
    "mdt": "run the metadata-heavy phases at another time, or ask the site for another MDT",
    "": "run the I/O phases at another time, or ask the site to keep the jobs apart",
}


class SlowerThanHistory(JobRule):
    """I/O phases unlike every earlier run of the same application at the same scale.

    Symptom: DBSCAN over (duration, volume) of I/O phases puts some of this run's phases
    outside every cluster its earlier runs (same app, same node and process count) form,
    most often because they took much longer for the same volume.
    Why it hurts: the job waited for I/O that usually goes faster; when neighbours that
    shared its forwarding nodes or OSTs had interference-prone features (N-1 I/O, a high
    metadata rate, high bandwidth or IOPS) they are the likely cause, and the same clash
    will recur whenever the jobs meet again (Beacon Appendix B).
    What to do: check the named culprits with `iolens interference JOB_ID`; if a neighbour
    caused it, ask the site to place the jobs behind different forwarders, or run the I/O
    phases at another time; if no neighbour explains it, report the slow phase windows to
    the administrators (a degraded OST or forwarder looks the same from the job's side).
    """

    code = "IOL006"
    name = "slower-than-history"

    def check(self, report: JobReport) -> Finding | None:
        h = report.history
        if not h or not h.get("anomalous_phases"):
            return None
        culprits = h.get("culprits", [])
        if culprits:
            top = culprits[0]
            advice = (
                f"job {top['job_id']} ({top['feature']}) cost this job about "
                f"{top['delay_s']:.0f} s of I/O on {top['component']}; see "
                f"`iolens interference {report.job_id}` and "
                f"{_AVOID.get(_kind(top), _AVOID[''])}."
            )
        else:
            advice = (
                "no neighbour explains the slowdown; report the slow phase windows to the "
                "administrators (a degraded OST or forwarder looks the same)."
            )
        slowest = max(h["anomalous_phases"], key=lambda p: p.get("slowdown") or 0.0)
        if slowest.get("slowdown"):
            advice = (
                f"phase {slowest['phase']} ran {slowest['slowdown']:.1f}x its usual time; " + advice
            )
        return self.finding(report, h, advice)

    def saving(self, finding: Finding, report: JobReport, ctx: Context) -> Saving | None:
        """Each slow phase back at the median duration of the earlier runs' phases of the
        same volume (range: their upper to lower quartile)."""
        est = lo = hi = 0.0
        used = 0
        for p in finding.evidence.get("anomalous_phases", []):
            d, s = p.get("busy_s") or p.get("duration_s") or 0.0, p.get("slowdown")
            if not s or s <= 1:
                continue
            q = p.get("slowdown_range") or [s, s]
            est += d * (1 - 1 / s)
            lo += d * (1 - 1 / max(min(q), 1.0))
            hi += d * (1 - 1 / max(max(q), 1.0))
            used += 1
        if not used:  # unlike earlier runs, but not slower: nothing to win back
            return Saving(0.0, 0.0, 0.0, "no phase was slower than earlier runs' phases", {})
        return Saving(
            est, min(lo, est), max(hi, est),
            f"{used} phase(s) back at the usual duration of earlier runs' phases of the "
            "same volume",
            {"phases": used, "earlier_runs": finding.evidence.get("earlier_runs")},
        )  # fmt: skip


def _kind(culprit: dict[str, object]) -> str:
    """The culprit's server kind for `_AVOID`; an "ost" that is no Lustre OST (a MooseFS
    chunkserver) gets the generic advice, since `lfs` cannot place files on it."""
    kind = str(culprit.get("component_kind") or "")
    if kind == "ost" and not is_lustre_target(str(culprit.get("component") or "")):
        return ""
    return kind
