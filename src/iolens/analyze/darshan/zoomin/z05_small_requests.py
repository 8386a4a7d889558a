"""Z05: too many small I/O requests (zoom-in root cause 5)."""

from __future__ import annotations

import pandas as pd

from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.analysis import zoom
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

_SMALL = [f"POSIX_SIZE_{op}_{b}" for op in ("READ", "WRITE") for b in ("0_100", "100_1K")]


def _small_by_file(job: DarshanJob, n: int = 5) -> list[dict[str, object]]:
    c = job.counters("POSIX")
    cols = [x for x in _SMALL if x in c.columns]
    if not len(c) or not cols:
        return []
    per = (
        pd.DataFrame(
            {
                "id": c["id"],
                "small": c[cols].clip(lower=0).sum(axis=1),
                "ops": c[["POSIX_READS", "POSIX_WRITES"]].clip(lower=0).sum(axis=1),
            }
        )
        .groupby("id")
        .sum()
    )
    per = per[per["small"] > 0].sort_values("small", ascending=False).head(n)
    return [
        {"path": job.names.get(int(i), ""), "small_requests": int(r.small), "requests": int(r.ops)}
        for i, r in per.iterrows()
    ]


class SmallRequests(DarshanRule):
    """Most of the job's requests are smaller than 1 KiB.

    Symptom: half or more of the POSIX reads and writes are under 1 KiB (Darshan's size
    histograms), and there are at least 1,000 of them.
    Why it hurts: each request pays a system call and, on Lustre, an RPC and lock
    traffic; millions of tiny requests take far longer than the same bytes in large
    ones. Combustion1's User 0 (Small ~100 %) and a job issuing 7.2 million small writes
    stayed under 1 GB/s (Figures 8, 10(a)).
    What to do: buffer in the application or the library so the file system sees
    megabyte requests: a stdio buffer, MPI-IO collective buffering, HDF5 sieve buffers.
    """

    code = "Z05"
    name = "small-requests"
    target = "developer"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        z = zoom(job, ctx)
        pct = z.factors["small_pct"]
        if not z.material or pct is None or pct < z.t("SMALL_REQ_PCT"):
            return None
        c = job.counters("POSIX")
        small = sum(int(c[x].clip(lower=0).sum()) for x in _SMALL if x in c.columns)
        if small < z.t("SMALL_REQ_MIN"):
            return None
        evidence = {
            "small_pct": round(pct, 2),
            "small_requests": small,
            "requests": int(z.records["requests"].sum()),
            "io_time_s": round(z.io_time, 4),
            "files": _small_by_file(job),
        }
        rec = (
            f"{pct:.0f} % of the requests ({small:,}) are under 1 KiB. Buffer them into "
            "megabyte requests: `setvbuf(fp, NULL, _IOFBF, 4 << 20);` for stdio; "
            '`MPI_Info_set(info, "romio_cb_write", "enable");` (collective buffering) for '
            "MPI-IO; `H5Pset_sieve_buf_size(fapl, 4 << 20);` and chunked datasets for HDF5."
        )
        return self.finding(job, evidence, rec)
