"""The Darshan findings of a job as causal chains: one root cause, one recommendation.

The three rule families look at one job from different sides, so one cause shows up as
several findings (a single-stripe file -> one ROMIO aggregator -> rank 0 moves the bytes
-> slow shared writes) and two rules can contradict each other. `assemble` turns the
findings of a job into what an expert would sign:

1. contradictions go: advice to make MPI-IO collective on a job whose MPI-IO calls are
   already mostly collective by its own counters (`MPIIO_COLL_*` against
   `MPIIO_INDEP_*`), and of two findings stating the same quantity (rank 0's share) the
   one from the counters that do not measure it;
2. links: every pair of `LINKS` present in the job sets `explains` / `explained_by`
   (kept with what the rules set themselves), also in the evidence;
3. one recommendation per chain: a finding explained by another present finding keeps
   its evidence and severity but points to its root cause instead of recommending, and
   drops its gain;
4. repeats merge: the same code on one job from several logs (one per executable run)
   becomes one finding with the count and the evidence of the largest occurrence
   (`merge_repeated`, for a job read from several logs).
"""

from __future__ import annotations

from collections.abc import Iterable

from iolens.model.darshan import DarshanJob
from iolens.model.finding import Finding

#: (cause, effect, why the cause explains the effect). Only findings present in the same
#: job are linked; a rule may also declare links of its own (the expert rules do).
LINKS: tuple[tuple[str, str, str], ...] = (
    ("Z02", "X05", "a single-OST (one-stripe) file gets one ROMIO aggregator (cb_nodes = 1)"),
    ("Z02", "DP19", "ranks sharing a file on one OST queue on that OST"),
    ("Z02", "Z04", "on one OST the writing rank's share of the time grows with the queue"),
    ("X05", "DD01", "the single aggregator (often rank 0) moves every byte of the file"),
    ("X05", "Z04", "the single aggregator is the heavy rank"),
    ("X05", "DP18", "the single aggregator moves the shared file's bytes alone"),
    ("X05", "DP19", "the other ranks wait on the single aggregator"),
    ("X05", "DP21", "the aggregator's write sizes differ from everyone else's"),
    ("X05", "X04", "MPI-IO time is spent waiting for the single aggregator"),
    ("X03", "X04", "serialised POSIX writes (a lock per write) keep ranks waiting in MPI-IO"),
    ("X03", "DP19", "ranks taking turns on the file finish at different times"),
    ("X04", "DP19", "the ranks' MPI-IO waits differ"),
    ("X01", "DP05", "zero-byte and read-modify-write reads are small reads"),
    ("X02", "X01", "data sieving reads whole blocks to write parts of them"),
    ("DD01", "Z04", "rank 0 moving most of the bytes is the rank imbalance"),
    ("Z05", "DP05", "the zoom-in's small requests include these small reads"),
    ("Z05", "DP06", "the zoom-in's small requests include these small writes"),
    ("DP05", "DP02", "small reads make the read count high"),
    ("DP06", "DP01", "small writes make the write count high"),
    ("DP05", "DP15", "small reads to shared files are among the small reads"),
    ("DP06", "DP16", "small writes to shared files are among the small writes"),
    ("DM02", "DP15", "independent reads to a shared file are not coalesced"),
    ("DM03", "DP16", "independent writes to a shared file are not coalesced"),
    ("DP11", "DP09", "random reads fetch the same blocks again"),
)

#: findings that recommend collective MPI-IO (in their own words or as their cure)
COLLECTIVE_ADVICE = frozenset({"DM02", "DM03"})
#: ... and rules whose recommendation adds collective MPI-IO as an option
COLLECTIVE_HINTS = frozenset({"DP05", "DP06", "DP11", "DP13", "DP15", "DP16", "Z04", "Z05"})
#: MPI-IO this collective (operations) needs no advice to become collective
COLLECTIVE_SHARE = 0.95
#: findings stating the same quantity: the first present one is kept. Rank 0's share:
#: Z04 reads it from the per-rank counters (the slowest/fastest rank of shared records),
#: DD01 splits shared files evenly over the ranks.
SAME_QUANTITY: tuple[tuple[str, ...], ...] = (("Z04", "DD01"),)


def collective_share(job: DarshanJob) -> float | None:
    """Share of the job's MPI-IO reads and writes that are collective, by the counters."""
    if not job.has("MPI-IO"):
        return None
    c = job.counters("MPI-IO")
    tot = {
        k: float(c[k].clip(lower=0).sum()) if k in c else 0.0
        for k in (
            "MPIIO_COLL_READS",
            "MPIIO_COLL_WRITES",
            "MPIIO_INDEP_READS",
            "MPIIO_INDEP_WRITES",
        )
    }
    n = sum(tot.values())
    return (tot["MPIIO_COLL_READS"] + tot["MPIIO_COLL_WRITES"]) / n if n > 0 else None


def contradictions(findings: list[Finding], job: DarshanJob | None) -> list[Finding]:
    """The findings without those another finding or the counters contradict."""
    out = list(findings)
    share = collective_share(job) if job is not None else None
    if share is not None and share >= COLLECTIVE_SHARE:
        out = [f for f in out if f.code not in COLLECTIVE_ADVICE]
        for f in out:
            if f.code in COLLECTIVE_HINTS and "collective" in f.recommendation.lower():
                f.evidence = {**f.evidence, "mpiio_collective_share": round(share, 4)}
    codes = {f.code for f in out}
    for group in SAME_QUANTITY:
        present = [c for c in group if c in codes]
        if len(present) > 1 and _same_rank(out, present):
            drop = set(present[1:])
            out = [f for f in out if f.code not in drop]
    return out


def _same_rank(findings: list[Finding], codes: list[str]) -> bool:
    """Whether the rank-share findings speak of the same rank (DD01 is always rank 0)."""
    ranks = {f.code: f.evidence.get("rank", 0 if f.code == "DD01" else None) for f in findings}
    named = {ranks.get(c) for c in codes}
    return len(named) == 1


def link(findings: list[Finding]) -> None:
    """Set explains / explained_by from `LINKS` between the present findings, in place."""
    by_code = {f.code: f for f in findings}
    for cause, effect, _ in LINKS:
        if cause in by_code and effect in by_code:
            _add(by_code[cause], "explains", effect)
            _add(by_code[effect], "explained_by", cause)


def _add(f: Finding, attr: str, code: str) -> None:
    have = list(getattr(f, attr) or [])
    if code not in have:
        have.append(code)
    setattr(f, attr, have)
    f.evidence = {**f.evidence, attr: have}


def root_of(f: Finding, by_code: dict[str, Finding]) -> Finding:
    """The finding's root cause among the present ones (itself when nothing explains it)."""
    seen = {f.code}
    cur = f
    while True:
        causes = [c for c in cur.explained_by or [] if c in by_code and c not in seen]
        if not causes:
            return cur
        cur = by_code[causes[0]]
        seen.add(cur.code)


def one_recommendation(findings: list[Finding]) -> None:
    """Effects point to their root cause instead of recommending, in place."""
    by_code = {f.code: f for f in findings}
    for f in findings:
        root = root_of(f, by_code)
        if root is f:
            continue
        f.evidence = {**f.evidence, "root_cause": root.code}
        f.recommendation = (
            f"Explained by {root.code} ({root.name}): follow its recommendation. "
            f"{_reason(root.code, f.code)}"
        ).strip()
        f.gain = None


def _reason(cause: str, effect: str) -> str:
    for c, e, why in LINKS:
        if c == cause and e == effect:
            return f"({why[0].upper()}{why[1:]}.)"
    return ""


def assemble(findings: list[Finding], job: DarshanJob | None = None) -> list[Finding]:
    """One log's findings as chains (module docstring, steps 1-3)."""
    out = contradictions(findings, job)
    link(out)
    one_recommendation(out)
    return out


def _size(f: Finding) -> tuple[int, float, float]:
    """How much a finding's occurrence covers, to keep the largest of repeats: severity,
    then its largest byte figure, then the share of the I/O it explains."""
    from iolens.analyze.darshan.severity import explained_share

    figures = [
        float(v)
        for k, v in f.evidence.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and "bytes" in k
    ]
    rank = {"info": 0, "warning": 1, "critical": 2}.get(f.severity, 0)
    return rank, max(figures, default=0.0), explained_share(f) or 0.0


def merge_repeated(findings: Iterable[Finding]) -> list[Finding]:
    """One finding per (job, code): the largest occurrence, with `occurrences` (how many
    logs raised it) in its evidence."""
    groups: dict[tuple[str, str, str], list[Finding]] = {}
    for f in findings:
        groups.setdefault((f.subject_kind, f.subject_id, f.code), []).append(f)
    out: list[Finding] = []
    for group in groups.values():
        if len(group) == 1:
            out.append(group[0])
            continue
        keep = max(group, key=_size)
        keep.evidence = {**keep.evidence, "occurrences": len(group)}
        keep.start = min((g.start for g in group if g.start is not None), default=keep.start)
        keep.end = max((g.end for g in group if g.end is not None), default=keep.end)
        out.append(keep)
    return out


def merged(findings: Iterable[Finding]) -> list[Finding]:
    """A job's findings from several logs as one diagnosis: repeats merged (with the
    count), then linked into chains again, one recommendation per chain."""
    out = merge_repeated(findings)
    link(out)
    one_recommendation(out)
    return out
