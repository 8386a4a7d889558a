"""Z06: unbalanced I/O workload on OSTs (zoom-in root cause 6)."""

from __future__ import annotations

import pandas as pd

from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.advice import gain, mb, setstripe, stripe_count_for
from iolens.analyze.darshan.zoomin.analysis import zoom
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


def _ratios(o: pd.DataFrame, key: str) -> tuple[int, float, float, float]:
    """(busiest OST, its value over the mean OST's, its value, the mean) for a column."""
    tot = float(o[key].sum())
    mean = tot / len(o)
    i = int(o[key].to_numpy().argmax())
    top = float(o[key].iloc[i])
    return int(o["ost"].iloc[i]), (top / mean if mean > 0 else 0.0), top, mean


class OstImbalance(DarshanRule):
    """One of the job's OSTs carries much more of its traffic than the others.

    Symptom: over the OSTs the job's files live on (factor 11, each file's bytes spread
    over its stripes), the busiest OST has twice the mean OST's bytes or more, in a job
    moving at least 1 GiB. Requests (factor 12) are evidence only:
    a few tiny files (configuration, Python modules) pile requests on one OST without
    holding anything up.
    Why it hurts: the job's I/O ends when its busiest OST finishes; Combustion1's read of
    a 73 GB file over 72 OSTs was held up by two hot OSTs, while its balanced run was
    faster (Figures 11, 12).
    What to do: stripe the big files over more OSTs so no OST holds a disproportionate
    share, with the same stripe count for files written together.
    """

    code = "Z06"
    name = "ost-imbalance"
    target = "user"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        z = zoom(job, ctx)
        o = z.osts
        if not z.material or len(o) < 2 or z.datasize < z.t("ONE_OST_MIN_BYTES"):
            return None
        ratios = {k: _ratios(o, k) for k in ("bytes", "requests")}
        ost, ratio, top, mean = ratios["bytes"]
        if ratio < z.t("OST_IMBALANCE"):
            return None
        key = "bytes"
        files = z.files
        on = files[files["osts"].map(lambda x: ost in list(x))].head(5)
        biggest = files.iloc[0]
        k = stripe_count_for(float(biggest["size"]), ctx.ost_total, at_least=2)
        busiest = o.sort_values(key, ascending=False).head(8)
        evidence = {
            "by": key,
            "ost": ost,
            "ratio_to_mean": round(ratio, 3),
            "requests_ratio_to_mean": round(ratios["requests"][1], 3),
            "ost_value": top,
            "mean_value": mean,
            "osts": len(o),
            "busiest_osts": [
                {"ost": int(a), key: float(b)}
                for a, b in zip(busiest["ost"], busiest[key], strict=True)
            ],
            "files_on_ost": [
                {"path": p, "bytes": int(b), "stripe_count": None if sc is None else int(sc)}
                for p, b, sc in zip(
                    on["path"], on["bytes"], on["stripe_count"].astype(object), strict=True
                )
            ],
        }
        what = mb(top) if key == "bytes" else f"{int(top)} requests"
        rec = (
            f"OST {ost} carries {ratio:.1f}x the mean OST's {key} ({what}) of the job's "
            f"{len(o)} OSTs. Spread the largest files over more OSTs: "
            f"`{setstripe(job, str(biggest['path']), k)}` before they are written (or "
            f"`lfs migrate -c {k} FILE` for existing ones)."
        )
        g = gain(
            ratio,
            "upper bound if the busiest OST bounds the I/O: balanced, it would carry the mean",
        )
        return self.finding(job, evidence, rec, gain=g)
