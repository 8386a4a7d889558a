"""Z01: too many I/O phases (zoom-in root cause 1)."""

from __future__ import annotations

import math
import statistics

from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.advice import gain, mb
from iolens.analyze.darshan.zoomin.analysis import zoom
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class TooManyPhases(DarshanRule):
    """The job does its I/O in many separate bursts.

    Symptom: 10 or more I/O phases (`MANY_PHASES`): bursts separated by idle gaps of at
    least 1 s or 1 % of the run, in a job whose I/O time is worth tuning (at least 1 s
    and 5 % of the run, `MIN_IO_S`, `MIN_IO_SHARE`).
    Why it hurts: every phase ends when its slowest rank does, so a job that writes in
    many small phases pays the synchronisation and the straggler once per phase; the
    paper's slow Cosmology1 run had many bursty phases per rank, its fast run two
    (Figure 6).
    What to do: aggregate output into fewer, larger phases (buffer several steps and write
    them together, or write asynchronously, e.g. the HDF5 async VOL), so each phase moves
    enough data to reach full bandwidth.
    """

    code = "Z01"
    name = "too-many-io-phases"
    target = "developer"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        z = zoom(job, ctx)
        phases, source = z.phases
        n = len(phases)
        if not z.material or n < z.t("MANY_PHASES"):
            return None
        wall = sum(p.duration for p in phases)
        total = sum(p.bytes for p in phases)
        biggest = max(phases, key=lambda p: p.bytes)
        evidence = {
            "phases": n,
            "source": source,
            "io_wall_s": round(wall, 3),
            "bytes": total,
            "median_phase_s": round(statistics.median(p.duration for p in phases), 4),
            "median_phase_bytes": int(statistics.median(p.bytes for p in phases)),
            "largest_phase_bw": biggest.bandwidth,
            "first_phases": [
                {
                    "start": round(p.start, 3),
                    "s": round(p.duration, 4),
                    "bytes": p.bytes,
                    "ranks": p.ranks,
                }
                for p in phases[:20]
            ],
        }
        k = math.ceil(n / 2)
        rec = (
            f"I/O came in {n} phases ({mb(total)} in {wall:.1f} s of phase time); each waits "
            f"for its slowest rank. Aggregate into about two phases, e.g. buffer {k} steps "
            f"per write: `if (step % {k} == 0) write_buffered_steps();`, or overlap I/O with "
            "computation through the HDF5 async VOL (`H5Fcreate_async`)."
        )
        g = None
        if biggest.bandwidth and total > 0 and wall > 0:
            factor = wall / (total / biggest.bandwidth)
            if factor > 1.0:
                g = gain(
                    factor,
                    "all phases' bytes moved at the bandwidth of the largest phase "
                    f"({mb(biggest.bandwidth)}/s) instead of {wall:.1f} s of phase time",
                )
        return self.finding(job, evidence, rec, gain=g)
