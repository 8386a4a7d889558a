"""IOL004: many small data requests."""

from __future__ import annotations

from iolens.analyze.findings.base import JobRule
from iolens.analyze.jobreport import JobReport
from iolens.analyze.savings import TARGET_REQUEST, Context, Saving, data_time, saving_of
from iolens.model.finding import Finding

MAX_AVG_REQUEST = 64 * 2**10
MIN_OPS = 10_000


class SmallIO(JobRule):
    """The job moves its data in small requests.

    Symptom: >= 10,000 data requests averaging under 64 KiB.
    Why it hurts: every request costs a forwarder thread and an RPC whatever its size, so
    small requests reach a fraction of the bandwidth and load servers with per-op overhead.
    What to do: buffer in the application (larger write sizes, HDF5 chunking, MPI-IO
    collective buffering) or let stdio buffer (setvbuf with a large buffer).
    """

    code = "IOL004"
    name = "small-io"

    def check(self, report: JobReport) -> Finding | None:
        ops = report.read_ops + report.write_ops
        if ops < MIN_OPS or report.avg_request >= MAX_AVG_REQUEST:
            return None
        return self.finding(
            report,
            {"data_ops": ops, "avg_request": report.avg_request, "iops_avg": report.iops_avg},
            f"{ops} requests averaging {report.avg_request / 1024:.1f} KiB; buffer writes "
            "into >= 1 MiB requests.",
        )

    def saving(self, finding: Finding, report: JobReport, ctx: Context) -> Saving | None:
        """Per-call overhead of the calls aggregation into 1 MiB requests removes, as a
        share of the data time; the overhead per call comes from the job's own calls or,
        when they are all one size, from what a byte costs in other jobs' calls
        (`savings.call_cost`). For a shared file written through MPI-IO, also what
        collective calls would save (`collective_s`): each call then reaches the file
        system as one request of the sharing processes' blocks, so of a shared file's
        MPI-IO calls `1 / processes` remain, not `bytes / 1 MiB` (checked on the
        MooseFS lab: docs/accuracy.md)."""
        c, t = ctx.calls, data_time(report)
        if c is None or c.latency_s is None or t <= 0 or c.seconds <= 0:
            return None
        after = min(c.calls, max(1, -(-c.bytes // TARGET_REQUEST)))

        def share(latency: float, removed: int) -> float:
            return min(removed * min(max(latency, 0.0), c.mean_s) / c.seconds, 1.0)

        # the fit's two standard errors, and never narrower than half to twice the
        # latency: caches and contention make a call's cost only roughly linear
        a, err = c.latency_s, c.latency_se_s or 0.0
        floor = (report.read_bytes + report.write_bytes) / ctx.capacity.ceiling() \
            if ctx.capacity.ceiling() else 0.0  # fmt: skip

        def saved(removed: int) -> tuple[float, float, float]:
            times = tuple(max(t * (1 - share(x, removed)), floor) for x in (
                a, min(a - 2 * err, a / 2), max(a + 2 * err, 2 * a)))  # fmt: skip
            return saving_of(t, times)  # type: ignore[arg-type]

        est, lo, hi = saved(c.calls - after)
        text = (
            f"{c.calls:,} data calls of {c.mean_s * 1e6:.0f} us on average, "
            f"{c.latency_s * 1e6:.0f} us of it per-call overhead ({c.basis}); "
            f"{TARGET_REQUEST // 2**20} MiB requests would need {after:,}"
        )
        inputs = {"calls": c.calls, "latency_s": c.latency_s, "latency_se_s": err,
                  "data_time_s": round(t, 1), "calls_after": after}  # fmt: skip
        if c.collective_merges > 0:
            merged = max(after, c.calls - c.collective_merges)
            cb = saved(c.calls - merged)[0]
            text += (
                "; if its MPI-IO calls to shared files are independent, collective ones "
                "would merge each call of the processes sharing a file into one request "
                f"({merged:,} calls in all), saving about {cb:.3g} s"
            )
            inputs |= {"calls_collective": merged, "collective_s": cb}
        return Saving(est, lo, hi, text, inputs)
