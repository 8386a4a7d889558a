"""Z09: the job benefits from read caching (zoom-in root cause 9, informational)."""

from __future__ import annotations

from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.advice import mb
from iolens.analyze.darshan.zoomin.analysis import zoom
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class ReadCaching(DarshanRule):
    """The job reads back data it wrote, or reads faster than its OSTs can serve.

    Symptom: half or more of the read bytes (at least 1 MiB) come from files the job
    started writing before it read them, or a file was read faster than its stripe count
    times one OST's peak bandwidth (`RuleContext.ost_bw`).
    Why it hurts: it does not; those reads are served from client or server caches, not the disks,
    which is why Quantum1's read-after-write job (Figure 21(d)) and Cosmology1's restart
    reads (Figure 7(b)) beat the OSTs' bandwidth. Good for the job; misleading when its
    bandwidth is taken as the file system's.
    What to do: nothing for production runs. For benchmarks that must measure the disks,
    read with `O_DIRECT` or drop caches between phases (IOR `-C` reorders tasks).
    """

    code = "Z09"
    name = "read-caching"
    severity = "info"
    target = "user"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        z = zoom(job, ctx)
        f = z.files
        if not len(f):
            return None
        read = float(f["bytes_read"].sum())
        if read < z.t("RAW_MIN_BYTES"):
            return None
        raw = f[
            (f["bytes_written"] > 0)
            & (f["bytes_read"] > 0)
            & (f["write_start"] > 0)
            & (f["read_start"] >= f["write_start"])
        ]
        raw_bytes = float(raw["bytes_read"].sum())
        fast = []
        if ctx.ost_bw:
            for row in f[f["bytes_read"] > 0].itertuples(index=False):
                span = row.read_end - row.read_start
                stripes = len(row.osts)
                if span > 0 and stripes and row.bytes_read / span > stripes * ctx.ost_bw:
                    fast.append(
                        {"path": row.path, "read_bw": row.bytes_read / span, "osts": stripes}
                    )
        share = raw_bytes / read
        if share < z.t("RAW_SHARE") and not fast:
            return None
        evidence = {
            "read_bytes": read,
            "read_after_write_bytes": raw_bytes,
            "read_after_write_share": round(share, 4),
            "files": [
                {"path": p, "bytes_written": int(w), "bytes_read": int(r)}
                for p, w, r in zip(
                    raw["path"].head(5),
                    raw["bytes_written"].head(5),
                    raw["bytes_read"].head(5),
                    strict=True,
                )
            ],
            "faster_than_osts": fast[:5],
            "ost_peak_bandwidth": ctx.ost_bw,
        }
        rec = (
            f"{share:.0%} of the {mb(read)} read was written by the job first"
            + (f"; {len(fast)} file(s) were read faster than their OSTs can serve" if fast else "")
            + ": those reads come from caches. Fine in production; to measure the file system "
            "itself, read with `O_DIRECT` or in another job (IOR: `-C` or separate `-w`/`-r` runs)."
        )
        return self.finding(job, evidence, rec)
