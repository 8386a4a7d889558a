"""Z02: bandwidth limited by a single OST (zoom-in root cause 2)."""

from __future__ import annotations

from iolens.analyze.darshan.rule import DarshanRule, RuleContext
from iolens.analyze.darshan.zoomin.advice import amdahl, gain, mb, setstripe, stripe_count_for
from iolens.analyze.darshan.zoomin.analysis import zoom
from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding


class SingleOstBound(DarshanRule):
    """Most of the job's I/O time is spent on files that live on one OST.

    Symptom: the covering set's files on a single OST cover half or more of the I/O time
    and carry 1 GiB or more, and either several ranks share them (the default stripe
    count 1 of Cosmology1/2, Figures 7(a) and 14), that OST is a straggler (under a
    quarter of the median bandwidth of the job's other OSTs, as in the darshan package's
    `sample-badost` log), or it runs at half or more of one OST's peak bandwidth.
    Why it hurts: one OST's bandwidth (a few GB/s) caps the whole job however many ranks
    and nodes it uses; a degraded OST holds up every rank whose file sits on it.
    What to do: stripe shared files over more OSTs before they are created
    (`lfs setstripe -c K -S 4M DIR`, K from the file size and the OST count); report a
    straggling OST to the administrators, who can stop new objects on it
    (`lctl set_param osp.<fs>-OSTxxxx-*.max_create_count=0`) until it is fixed.
    """

    code = "Z02"
    name = "single-ost-bound"
    severity = "warning"
    target = "user"

    def check(self, job: DarshanJob, ctx: RuleContext) -> Finding | None:
        z = zoom(job, ctx)
        one = z.one_ost
        if not z.material or one is None:
            return None
        if one.cover_share < z.t("ONE_OST_COVER_SHARE") or one.bytes < z.t("ONE_OST_MIN_BYTES"):
            return None
        straggler = (
            one.bandwidth is not None
            and one.peers_bandwidth is not None
            and one.peers >= 2
            and one.bandwidth < z.t("STRAGGLER_BW_SHARE") * one.peers_bandwidth
        )
        saturated = (
            ctx.ost_bw is not None
            and one.bandwidth is not None
            and one.bandwidth >= z.t("SATURATED_SHARE") * ctx.ost_bw
        )
        shared = one.ranks >= 2
        if not (straggler or shared or saturated):
            return None
        total = z.cover.io_time
        top = max(one.files, key=lambda f: f["size"])
        evidence = {
            "ost": one.ost,
            "cover_share": round(one.cover_share, 4),
            "cover_s": round(one.cover_s, 3),
            "io_wall_s": round(total, 3),
            "bytes_on_ost": one.bytes,
            "ranks_sharing": one.ranks,
            "ost_bandwidth": one.bandwidth,
            "other_osts_median_bandwidth": one.peers_bandwidth,
            "other_osts": one.peers,
            "ost_peak_bandwidth": ctx.ost_bw,
            "straggler": straggler,
            "shared": shared,
            "saturated": saturated,
            "files": z.cover_evidence(),
        }
        if straggler:
            assert one.bandwidth is not None and one.peers_bandwidth is not None
            slow = one.peers_bandwidth / one.bandwidth
            rec = (
                f"OST {one.ost} moved {mb(one.bandwidth)}/s while the job's {one.peers} other "
                f"OSTs moved a median {mb(one.peers_bandwidth)}/s, and its files cover "
                f"{one.cover_share:.0%} of the I/O time. Report it: administrators can check "
                f"`lctl get_param obdfilter.*-OST{one.ost:04x}.stats` and stop new objects on "
                f"it with `lctl set_param osp.*-OST{one.ost:04x}-*.max_create_count=0`; "
                f"users can list affected files with `lfs find DIR --ost {one.ost}`."
            )
            g = gain(
                amdahl(total, one.cover_s, slow),
                f"OST {one.ost}'s files served at the other OSTs' median bandwidth",
            )
            f = self.finding(job, evidence, rec, severity="critical", gain=g)
            f.target = "admin"
            return f
        k = stripe_count_for(top["size"], ctx.ost_total, at_least=2)
        # concurrent ranks spread over k OSTs; a single writer's client can drive k OSTs too
        speed = float(min(k, one.ranks)) if shared else float(k)
        basis = f"the single-OST part ({one.cover_s:.1f} s of {total:.1f} s) spread over {k} OSTs"
        basis += f", no more than the {one.ranks} ranks sharing it" if shared else ""
        if ctx.ost_bw and one.bandwidth:
            # k OSTs deliver at most k peaks: the observed bandwidth cannot grow past that
            speed = min(speed, k * ctx.ost_bw / one.bandwidth)
            basis += (
                f", nor past {k} OSTs' peak ({mb(k * ctx.ost_bw)}/s) from the observed "
                f"{mb(one.bandwidth)}/s"
            )
        who = f"{one.ranks} ranks share" if shared else "one rank moves"
        rec = (
            f"{who} {top['path']} ({mb(top['size'])}) on the single OST "
            f"{one.ost}, covering {one.cover_share:.0%} of the I/O time. Stripe the directory "
            f"before the file is created: `{setstripe(job, top['path'], k)}` "
            f"(or `lfs migrate -c {k} FILE` for an existing file)."
        )
        g = gain(amdahl(total, one.cover_s, speed), basis) if speed > 1 else None
        return self.finding(job, evidence, rec, gain=g)
