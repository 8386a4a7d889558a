"""IOL005: a high metadata-operation rate (Beacon's "high-MDOPS" jobs)."""

from __future__ import annotations

from iolens.analyze.findings.base import JobRule
from iolens.analyze.jobreport import JobReport
from iolens.analyze.savings import Context, Saving, meta_time, saving_of
from iolens.model.finding import Finding

MIN_RATE = 300.0  # metadata ops/s during I/O phases (Beacon 4.1)
#: metadata ops a job needs at least: a rate over a few seconds (the opens and stats of
#: a few processes starting up) is no load on a metadata server; 300 ops/s sustained for
#: half a minute is, and so is the volume IOL004 asks of small requests
MIN_OPS = 10_000


class MetadataHeavy(JobRule):
    """The job issues metadata operations at a high rate.

    Symptom: more than 300 metadata ops/s on average while doing I/O, and at least
    10,000 metadata ops in all (a burst of a few hundred opens is everyday start-up).
    Why it hurts: there is one metadata server for everyone, and forwarders serve
    metadata with priority, so such jobs slow neighbours' reads and writes (Beacon: 13.6x
    longer request latency for jobs sharing forwarders with high-MDOPS jobs).
    What to do: create fewer, larger files (pack small outputs into one HDF5/NetCDF file or
    an archive), keep scratch files on node-local storage, avoid repeated stat/open.
    """

    code = "IOL005"
    name = "metadata-heavy"

    def check(self, report: JobReport) -> Finding | None:
        if report.md_ops_rate <= MIN_RATE or report.md_ops < MIN_OPS:
            return None
        return self.finding(
            report,
            {"md_ops": report.md_ops, "md_ops_rate": report.md_ops_rate, "files": report.files},
            f"{report.md_ops_rate:.0f} metadata ops/s; pack small files into fewer large "
            "ones or use node-local storage for scratch files.",
        )

    def saving(self, finding: Finding, report: JobReport, ctx: Context) -> Saving | None:
        """The metadata time beyond what 300 ops/s (MIN_RATE) would take: fewer files and calls
        bring the rate down to where this rule stops firing (range: half that, to all
        the metadata time)."""
        t, r = meta_time(report), report.md_ops_rate
        if t <= 0 or r <= MIN_RATE:
            return None
        est, lo, hi = saving_of(t, (t * MIN_RATE / r, t * (1 + MIN_RATE / r) / 2, 0.0))
        return Saving(
            est, lo, hi,
            f"{t:.0f} s of metadata at {r:.0f} ops/s; at {MIN_RATE} ops/s the same work "
            f"would take {t * MIN_RATE / r:.0f} s",
            {"meta_time_s": round(t, 1), "md_ops_rate": r},
        )  # fmt: skip
