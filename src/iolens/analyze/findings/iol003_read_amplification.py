"""IOL003: the backend read far more than the job asked for."""

from __future__ import annotations

from iolens.analyze.findings.base import GiB, JobRule
from iolens.analyze.jobreport import JobReport
from iolens.analyze.savings import Context, Saving, saving_of
from iolens.model.finding import Finding

MIN_RATIO = 1.5
MIN_BYTES = 1 * GiB


class ReadAmplification(JobRule):
    """OSTs served much more read traffic for the job than its processes read.

    Symptom: OST read bytes attributed to the job exceed its client read bytes >= 1.5x.
    Why it hurts: forwarding nodes' read-ahead cache thrashes under many sequential
    streams (N-N reads), re-reading evicted data from disk: Beacon measured 3.5x.
    What to do: lower the Lustre client read-ahead on forwarders
    (`lctl set_param llite.*.max_read_ahead_per_file_mb=2`, Beacon's fix) or read with
    fewer, larger streams (N-M aggregation), which Beacon found 3x faster.
    """

    code = "IOL003"
    name = "read-amplification"

    def check(self, report: JobReport) -> Finding | None:
        client = report.layers.get("compute", {}).get("read_bytes", 0)
        backend = report.layers.get("ost", {}).get("read_bytes", 0)
        if client < MIN_BYTES or backend < MIN_RATIO * client:
            return None
        return self.finding(
            report,
            {
                "client_read_bytes": client,
                "ost_read_bytes": backend,
                "amplification": round(backend / client, 2),
                "forwarders": report.forwarders,
            },
            f"the OSTs read {backend / client:.1f}x what the job read; reduce read-ahead "
            "(llite.*.max_read_ahead_per_file_mb=2 on the forwarders) or aggregate reads "
            "into fewer streams.",
            severity="critical" if backend >= 3 * client else None,
        )

    def saving(self, finding: Finding, report: JobReport, ctx: Context) -> Saving | None:
        """The read time if the servers read what the job asked for: between no change
        (the reads were not server-bound) and 1/amplification of it (entirely bound)."""
        t = float(report.bandwidth.get("read_time_s") or 0.0)
        amp = float(finding.evidence["amplification"])
        if t <= 0 or amp <= 1:
            return None
        est, lo, hi = saving_of(t, (t / amp**0.5, t, t / amp))
        return Saving(
            est, lo, hi,
            f"{t:.0f} s of reads while the OSTs read {amp:.1f}x the bytes; without the "
            "excess the read time shrinks by up to that factor",
            {"read_time_s": round(t, 1), "amplification": amp},
        )  # fmt: skip
