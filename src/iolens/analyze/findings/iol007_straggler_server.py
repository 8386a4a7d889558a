"""IOL007: one OST or forwarder served this job much slower than the others it used."""

from __future__ import annotations

from iolens.analyze.findings.base import JobRule
from iolens.analyze.jobreport import JobReport
from iolens.analyze.savings import Context, Saving
from iolens.model.finding import Finding

#: A straggler costing less than this (seconds) ...
MIN_LOST_S = 10.0
#: ... or than this share of the job's I/O time is noise, not worth an administrator's look.
MIN_SHARE = 0.05

_NAMES = {"ost": "OST", "forwarder": "forwarding node"}


class StragglerServer(JobRule):
    """A straggler server within one job (Beacon Fig. 7 / Appendix B).

    Symptom: among the OSTs (or forwarding nodes) the job spread its I/O over, DBSCAN
    over the job's request time per MiB on each puts one outside the cluster of its peers,
    slower; the job lost at least 10 s and 5 % of its I/O time to it.
    Why it hurts: the job waits for its slowest server: every I/O phase takes as long as
    that server needs for its share, whatever the others could do (Beacon saw a 20x longer
    checkpoint behind one forwarder, and OSTs with failing RAID controllers behind Shentu's
    slow start).
    What to do: report the server and the job's window to the administrators (check its
    disks, RAID controller, network link); until it is fixed, stripe new files away from
    it (`lfs setstripe -o` with other OST indices, or an OST pool without it).
    """

    code = "IOL007"
    name = "straggler-server"
    severity = "warning"
    target = "admin"

    def check(self, report: JobReport) -> Finding | None:
        floor = max(MIN_LOST_S, MIN_SHARE * (report.io_time_s or 0.0))
        slow = [s for s in report.stragglers if s["lost_s"] >= floor]
        if not slow:
            return None
        top = slow[0]
        what = f"{_NAMES.get(top['kind'], top['kind'])} {top['component']}"
        return self.finding(
            report,
            {"stragglers": slow},
            f"this job lost about {top['lost_s']:.0f} s to {what}, which served it "
            f"{top['slowdown']:.1f}x slower per MiB than the {top['peers']} other "
            f"{_NAMES.get(top['kind'], top['kind'])}s it used; report it to the "
            "administrators with the job's window, and stripe new files away from it "
            "until it is fixed.",
        )

    def saving(self, finding: Finding, report: JobReport, ctx: Context) -> Saving | None:
        """The seconds lost to the stragglers: what a healthy server would give back
        (low: the slowest one alone; high: all of them). Wall-clock seconds of the job's
        I/O at the servers, like IOL006's phase time: at most its run time, but not bound
        by the slowest rank's time inside calls (a stalled request may not be in it)."""
        slow = finding.evidence["stragglers"]
        cap = report.runtime_s or float("inf")
        total = min(sum(s["lost_s"] for s in slow), cap)
        return Saving(
            total, min(slow[0]["lost_s"], total), total,
            "the straggler servers serving the job at their peers' time per MiB",
            {"servers": len(slow), "slowdown": slow[0]["slowdown"]},
        )  # fmt: skip
