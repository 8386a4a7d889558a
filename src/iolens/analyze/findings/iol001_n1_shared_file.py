"""IOL001: N-1 file sharing at scale."""

from __future__ import annotations

import statistics

from iolens.analyze.findings.base import GiB, JobRule
from iolens.analyze.jobreport import JobReport
from iolens.analyze.savings import Context, Saving, at_best_rate, data_time, rate_text, saving_of
from iolens.model.finding import Finding

MIN_PROCS = 32
MIN_BYTES = 1 * GiB
#: The I/O modes the recommendation leads to.
AGGREGATED = ("N-N", "N-M")


class N1SharedFile(JobRule):
    """All processes read or write one shared file.

    Symptom: many processes (>= 32) move >= 1 GiB through files every process shares.
    Why it hurts: shared-file I/O serialises on Lustre extent locks and is slow at the
    backend; its slow requests hold forwarding-node threads and make neighbours on the same
    forwarder wait (Beacon 4.3: N-1 jobs got <= 250 MB/s and made a neighbour wait 11x).
    What to do: aggregate into N-M (MPI-IO collective buffering with `cb_nodes`, or one file
    per group of ranks); if the shared file must stay, stripe it over many OSTs.
    """

    code = "IOL001"
    name = "n1-shared-file"

    def check(self, report: JobReport) -> Finding | None:
        total = report.read_bytes + report.write_bytes
        if report.io_mode != "N-1" or report.io_procs < MIN_PROCS or total < MIN_BYTES:
            return None
        return self.finding(
            report,
            {
                "io_procs": report.io_procs,
                "bytes": total,
                "read_bw_avg": report.read_bw_avg,
                "write_bw_avg": report.write_bw_avg,
                "forwarders": report.forwarders,
            },
            f"{report.io_procs} processes share each file; switch to N-M aggregation "
            "(MPI-IO collective I/O, e.g. romio_cb_write=enable with cb_nodes set) so one "
            "process per group writes its own file.",
        )

    def saving(self, finding: Finding, report: JobReport, ctx: Context) -> Saving | None:
        """Shared-file data time at the job's rate, against the same bytes at the rate
        the application got with files per process or N-M aggregation in the user's
        earlier runs at the same scale, when there are such runs (`from_earlier_runs`);
        else at up to the rate of file-per-process I/O: IO500's easy/hard ratio on this
        system (its hard case is small unaligned writes to one shared file), capped by
        the capacity of what served the job."""
        t, nbytes = data_time(report), report.read_bytes + report.write_bytes
        if t <= 0 or nbytes <= 0:
            return None
        earlier = from_earlier_runs(t, report, ctx)
        if earlier is not None:
            return earlier
        cap = ctx.capacity
        now = nbytes / t
        limits = [cap.ceiling()]
        if cap.easy_bw and cap.hard_bw:
            limits.append(now * cap.easy_bw / cap.hard_bw)
        best = min((x for x in limits if x), default=None)
        if best is None:
            return None
        return at_best_rate(
            t, nbytes, best, "through shared files",
            f"for file-per-process or N-M I/O ({cap.describe()})",
        )  # fmt: skip


def from_earlier_runs(t: float, report: JobReport, ctx: Context) -> Saving | None:
    """The data time `t` scaled by this run's bandwidth over the median bandwidth of the
    earlier aggregated runs (range: their slowest to fastest). Both bandwidths are bytes
    over the slowest rank's I/O time, so their ratio is the run time's ratio for the same
    bytes, whatever else (metadata) the I/O time holds."""
    now = float(report.bandwidth.get("bw") or 0.0)
    bws = sorted(r.bandwidth for r in ctx.earlier if r.io_mode in AGGREGATED)
    if now <= 0 or not bws:
        return None
    median = statistics.median(bws)
    est, lo, hi = saving_of(t, (t * now / median, t * now / bws[0], t * now / bws[-1]))
    modes = "/".join(sorted({r.io_mode for r in ctx.earlier if r.io_mode in AGGREGATED}))
    return Saving(
        est, lo, hi,
        f"{t:.0f} s of shared-file data time at {rate_text(now)}, against "
        f"{rate_text(median)}: the median of your {len(bws)} earlier {modes} run(s) of "
        f"{report.app} with {report.nprocs} processes",
        {"data_time_s": round(t, 1), "bw": now, "earlier_bw": median, "earlier_runs": len(bws)},
    )  # fmt: skip
