"""Every threshold of the expert rules (X01-X05), with where its value comes from.

None is tuned to a test log: each is Drishti's, ROMIO's or the zoom-in paper's (Wang et
al., CCGrid'19) bar for the same kind of question, and `SOURCES` says which (the rules'
documentation in docs/findings.md is generated from it). Sites override them through
`RuleContext.extra["thresholds"]` (a dict of the same names, shared with the zoom-in rules,
so `MIN_IO_S` means the same thing in both families).
"""

from __future__ import annotations

from typing import Any

GiB = 2**30

# severity: the share of the job's I/O a finding explains
WARNING_SHARE = 0.1
CRITICAL_SHARE = 0.5
MIN_IO_S = 1.0
MIN_BYTES = 1 * GiB
# X01: zero-byte and read-modify-write reads
ZERO_READS_MIN = 1000
ZERO_READS_SHARE = 0.1
# X02: POSIX bytes beyond the MPI-IO bytes of the same file
AMPLIFICATION_SHARE = 0.1
AMPLIFICATION_MIN_BYTES = 524288
# X03: serialised access to a shared file (DXT)
SERIAL_OVERLAP = 0.1
SERIAL_DUTY = 0.5
# X04: time in MPI-IO beyond the POSIX time underneath
SKEW_SHARE = 0.5
# X05: one collective-buffering aggregator from a single stripe
AGGREGATOR_SHARE = 0.5

#: what each threshold means and where its value comes from
SOURCES: dict[str, str] = {
    "WARNING_SHARE": (
        "below this share of the job's I/O time (or bytes) a finding is info; Drishti's bar "
        "for a share to be an issue at all (small_requests, misaligned_requests and "
        "interface_stdio are all 0.1)"
    ),
    "CRITICAL_SHARE": (
        "from this share on a finding is critical: it explains most of the job's I/O "
        "(iolens's escalation of Drishti's HIGH insights, drishti CRITICAL_SHARE)"
    ),
    "MIN_IO_S": (
        "a time-based finding explaining fewer seconds stays info; the zoom-in rules' "
        "MIN_IO_S (under a second nothing a user changes is measurable)"
    ),
    "MIN_BYTES": (
        "a byte-based finding explaining fewer bytes stays info; the zoom-in paper leaves "
        "out jobs under 1 GB as limited by their data size (§IV, its ONE_OST_MIN_BYTES)"
    ),
    "ZERO_READS_MIN": (
        "unrequested reads must exceed this many; Drishti's small_requests_absolute for "
        "the same kind of request count"
    ),
    "ZERO_READS_SHARE": (
        "... and exceed this share of the job's POSIX reads or of its I/O time; Drishti's "
        "small_requests"
    ),
    "AMPLIFICATION_SHARE": (
        "POSIX must move this share more bytes than MPI-IO was asked for; Drishti's 10 % share bar"
    ),
    "AMPLIFICATION_MIN_BYTES": (
        "... and at least this many more: one ROMIO data-sieving write buffer "
        "(ind_wr_buffer_size, ADIOI_IND_WR_BUFFER_SIZE_DFLT in ROMIO's adioi.h); less "
        "cannot be told from a single partial-block read-modify-write"
    ),
    "SERIAL_OVERLAP": (
        "the ranks' operations on a file overlap for at most this share of their summed "
        "busy time (0 is fully serialised); Drishti's 10 % share bar"
    ),
    "SERIAL_DUTY": (
        "... and the file is busy at least this share of the span from its first to its "
        "last operation (queued back to back), unless the same ranks' MPI-IO calls overlap; "
        "'most of' as in CRITICAL_SHARE. Deliberately staggered accesses leave the file "
        "idle and are not reported"
    ),
    "SKEW_SHARE": (
        "MPI-IO read+write time outside the POSIX calls beneath it, as a share of the "
        "MPI-IO read+write time (0.5: MPI-IO at least twice POSIX, so most of it is not "
        "spent in the file system; 'most of' as in CRITICAL_SHARE)"
    ),
    "AGGREGATOR_SHARE": (
        "the busiest rank moves at least this share of the file's POSIX bytes; the zoom-in "
        "paper's MaxRankIO bar (Equation 1, Figure 16, zoom-in MAX_RANK_SHARE)"
    ),
}


def get(name: str, extra: dict[str, Any] | None = None) -> Any:
    """A threshold, overridden by `extra["thresholds"][name]` when the site sets one."""
    over = (extra or {}).get("thresholds") or {}
    return over.get(name, globals()[name])


def describe(names: tuple[str, ...]) -> str:
    """A Markdown list: `NAME = value` and its source for each of `names`."""
    return "\n".join(f"- `{n} = {_value(globals()[n])}`: {SOURCES[n]}" for n in names)


def _value(v: float) -> str:
    return f"{v:,}" if isinstance(v, int) else f"{v:g}"
