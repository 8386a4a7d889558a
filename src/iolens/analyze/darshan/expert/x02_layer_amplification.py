"""X02: POSIX moves more bytes than MPI-IO was asked to move, file by file.

Darshan records a file opened through MPI-IO under the same record id in the MPI-IO and
the POSIX module. When ROMIO passes a contiguous request through, both count the same
bytes; POSIX bytes beyond MPI-IO's are ROMIO's own: data sieving (independent
noncontiguous writes read and rewrite whole 512 KiB blocks) and two-phase collective
buffering over file domains with holes (the aggregator reads the domain before writing
it back). Compared per file, then summed for the job.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from iolens.analyze.darshan.drishti.common import human
from iolens.analyze.darshan.expert.common import (
    ExpertRule,
    figures,
    fs_type,
    name_of,
)
from iolens.analyze.darshan.rule import RuleContext
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class LayerAmplification(ExpertRule):
    """POSIX reads or writes more bytes than the application asked MPI-IO for.

    Symptom: on files recorded by both MPI-IO and POSIX, the POSIX bytes exceed the
    MPI-IO bytes by more than 10 % (Drishti's share bar) and by at least one ROMIO
    data-sieving write buffer (512 KiB): e.g. POSIX writing 3.9 times the bytes, or
    reading a file the application only wrote.
    Why it hurts: ROMIO is doing read-modify-write: data sieving reads each block around
    a noncontiguous independent write and writes it back whole, under a file lock, and
    two-phase collective I/O reads a file domain with holes before writing it. The file
    system moves several times the data, and the locks serialise the ranks.
    What to do: make writes contiguous in the file (one block per rank, or collective
    writes whose pieces leave no gaps); turn data sieving off for independent writes
    (`romio_ds_write=disable`), and on Lustre for collective ones
    (`romio_lustre_ds_in_coll=disable`).
    """

    code = "X02"
    name = "posix-mpiio-amplification"
    severity = "warning"
    thresholds = ("AMPLIFICATION_SHARE", "AMPLIFICATION_MIN_BYTES")
    basis = "bytes"
    target = "developer"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        fig = figures(job, ctx)
        lay = fig.layers
        if not len(lay):
            return None
        w_excess = (lay["p_bytes_written"] - lay["m_bytes_written"]).clip(lower=0)
        r_excess = (lay["p_bytes_read"] - lay["m_bytes_read"]).clip(lower=0)
        excess = w_excess + r_excess
        asked = lay["m_bytes_read"] + lay["m_bytes_written"]
        total_excess, total_asked = float(excess.sum()), float(asked.sum())
        if total_asked <= 0:
            return None
        if total_excess < self.t(ctx, "AMPLIFICATION_SHARE") * total_asked:
            return None
        if total_excess < self.t(ctx, "AMPLIFICATION_MIN_BYTES"):
            return None
        posix = lay["p_bytes_read"] + lay["p_bytes_written"]
        # the POSIX time spent on the extra bytes, at each file's own POSIX rate
        p_time = lay["p_read_time"] + lay["p_write_time"]
        extra_s = float((p_time * excess / posix.where(posix > 0, 1)).sum())
        moved = fig.fs_bytes
        share = total_excess / moved if moved > 0 else 0.0
        io = fig.app_io_time
        w_asked = float(lay["m_bytes_written"].sum())
        r_asked = float(lay["m_bytes_read"].sum())
        top = lay.assign(excess=excess).sort_values("excess", ascending=False).head(5)
        files = [
            {
                "path": name_of(job, rid),
                "mpiio_bytes_written": int(r["m_bytes_written"]),
                "posix_bytes_written": int(r["p_bytes_written"]),
                "mpiio_bytes_read": int(r["m_bytes_read"]),
                "posix_bytes_read": int(r["p_bytes_read"]),
                "write_factor": _ratio(r["p_bytes_written"], r["m_bytes_written"]),
                "collective_writes": int(r["m_coll_writes"]),
                "independent_writes": int(max(r["m_writes"] - r["m_coll_writes"], 0)),
            }
            for rid, r in top[top["excess"] > 0].iterrows()
        ]
        evidence: dict[str, Any] = {
            "excess_bytes": int(total_excess),
            "mpiio_bytes": int(total_asked),
            "posix_bytes": int(posix.sum()),
            "factor": _ratio(posix.sum(), total_asked),
            "write_factor": _ratio(lay["p_bytes_written"].sum(), w_asked),
            "read_factor": _ratio(lay["p_bytes_read"].sum(), r_asked),
            "excess_write_bytes": int(w_excess.sum()),
            "excess_read_bytes": int(r_excess.sum()),
            "share_of_bytes": round(share, 4),
            "extra_posix_s": round(extra_s, 3),
            "share_of_io_time": round(extra_s / io, 4) if io > 0 else None,
            "files": files,
        }
        coll = bool((lay.loc[excess > 0, "m_coll_writes"] > 0).any())
        indep = bool((lay.loc[excess > 0, "m_writes"] > lay.loc[excess > 0, "m_coll_writes"]).any())
        how = []
        if indep:
            how.append(
                "independent writes go through data sieving: "
                '`MPI_Info_set(info, "romio_ds_write", "disable")`'
            )
        if coll:
            lustre = _on_lustre(job, [int(i) for i in lay.index[excess > 0]])
            how.append(
                "collective writes leave holes in the aggregators' file domains, which ROMIO "
                "reads before writing: make the ranks' pieces cover the extent contiguously"
                + (
                    ' (or `MPI_Info_set(info, "romio_lustre_ds_in_coll", "disable")`)'
                    if lustre
                    else ""
                )
            )
        top_file = files[0]["path"] if files else "the file"
        what = []
        p_w, p_r = float(lay["p_bytes_written"].sum()), float(lay["p_bytes_read"].sum())
        if float(w_excess.sum()) > 0:
            what.append(
                f"wrote {human(p_w)} where MPI-IO was asked to write {human(w_asked)}"
                + (f" ({evidence['write_factor']}x)" if evidence["write_factor"] else "")
            )
        if float(r_excess.sum()) > 0:
            what.append(
                f"read {human(p_r)} where MPI-IO was asked to read {human(r_asked)}"
                if r_asked > 0
                else f"read {human(p_r)} the application never read"
            )
        rec = (
            f"Under MPI-IO, POSIX {' and '.join(what)} ({human(total_excess)} extra, most on "
            f"{top_file}): ROMIO read-modify-write. "
            + _sentence("; ".join(how or ["make the writes contiguous"]))
        )
        explains = []
        if float(w_excess.sum()) > 0:
            explains.append("DP10")  # POSIX rewrites look like redundant writes
        if float(r_excess.sum()) > 0:
            explains += ["DP09", "X01"]  # ... and its reads like redundant/unrequested ones
        return self.finding(
            job,
            evidence,
            rec,
            severity=self.severity_for(ctx, share, nbytes=total_excess),
            explains=explains or None,
        )


def _on_lustre(job: DarshanJob, ids: list[int]) -> bool:
    """Whether any of the files is on Lustre (a LUSTRE record, or the mount table)."""
    lu = job.lustre
    if lu is not None and len(lu) and bool(lu["id"].isin(np.array(ids, np.uint64)).any()):
        return True
    return any(fs_type(job, name_of(job, i)) == "lustre" for i in ids)


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + "."


def _ratio(a: float, b: float) -> float | None:
    return round(float(a) / float(b), 2) if b and np.isfinite(b) and b > 0 else None
