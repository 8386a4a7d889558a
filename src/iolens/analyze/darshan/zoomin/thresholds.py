"""Every threshold of the zoom-in rules, with where its value comes from.

The paper (Wang et al., "A Zoom-in Analysis of I/O Logs to Detect Root Causes of I/O
Performance Bottlenecks", CCGrid'19) names the root causes from case studies rather than
fixed cut-offs; where it quotes figures they are cited here, and where it does not the
value is ours and says so. Sites override them by passing
`RuleContext.extra["thresholds"]` (a dict of the same names); the rules' docstrings quote
the defaults.
"""

from __future__ import annotations

from typing import Any

GB = 10**9
GiB = 2**30
MiB = 2**20

# --- when a job's I/O is worth diagnosing at all --------------------------------------
#: I/O time (Darshan's "by slowest" estimate) below which no performance cause is
#: reported. Ours: under a second nothing a user changes is measurable.
MIN_IO_S = 1.0
#: ... and the share of the run time it must reach. Ours; the paper studies only jobs of
#: >= 5 min and >= 1 GB (§IV) for the same reason: otherwise I/O is not what limits them.
MIN_IO_SHARE = 0.05

# --- 1: too many I/O phases (Figure 6: many bursty phases vs two per rank) ---------------
#: idle time separating two phases: at least this many seconds ...
PHASE_GAP_MIN_S = 1.0
#: ... or this share of the run time, whichever is longer (ours).
PHASE_GAP_FRAC = 0.01
#: phase count from which a job has "many" phases. Ours: Figure 6(a)'s slow job shows a
#: dozen or more bursts against two in Figure 6(b)'s fast one.
MANY_PHASES = 10

# --- 2: bandwidth limited by a single OST (Figures 7(a), 14; Cosmology1/2) ----------------
#: share of the job's I/O time that files on one OST must cover. Ours: "the time for
#: writing these files is constrained by the single OST's bandwidth" needs them to be
#: most of the I/O time.
ONE_OST_COVER_SHARE = 0.5
#: bytes those files must carry for an OST's bandwidth to matter (paper: files of
#: 15-22 GB, 21 GB and 16 GB; it excludes jobs under 1 GB).
ONE_OST_MIN_BYTES = 1 * GiB
#: an OST is a straggler when its observed bandwidth is below this share of the median
#: of the job's other OSTs (ours; sample-badost's OST 14 is at ~2 %).
STRAGGLER_BW_SHARE = 0.25
#: observed bandwidth at or above this share of one OST's peak (`RuleContext.ost_bw`)
#: means the OST is saturated. Paper: 2.1 GB/s against a 3 GB/s OST (70 %), §IV-E.
SATURATED_SHARE = 0.5

# --- 3: small data size (§IV: jobs < 1 GB excluded as limited by data size; §IV-G:
# a 1.2 GB job attributed to it) ------------------------------------------------------
SMALL_DATASIZE = 2 * GB
#: only when bandwidth is in the paper's lowest class, (0, 1] GB/s (Figure 4, Table III).
LOW_BANDWIDTH = 1 * GB

# --- 4: unbalanced workload among ranks (Figure 16: MaxRankIO ~77-78 %, Climate1) ----------
#: share of all bytes (or requests) moved by the busiest rank (Equation 1) ...
MAX_RANK_SHARE = 0.5
#: ... that must also be this many times the mean rank's (2 ranks at 50 % are balanced).
RANK_IMBALANCE = 1.5

# --- 5: too many small requests (Figure 8: User 0's Small ~100 %; Cosmology1's
# well-formed jobs < 5 %) ------------------------------------------------------------
SMALL_REQ_PCT = 50.0
#: and at least this many of them (Drishti's absolute floor for the same check).
SMALL_REQ_MIN = 1000

# --- 6: unbalanced OST workload (Figures 11 vs 12, Combustion1) -----------------------
#: busiest OST's bytes (or requests) over the mean OST's. Ours: the paper shows two
#: spikes over 72 OSTs without a figure.
OST_IMBALANCE = 2.0

# --- 7: bad file-system weather (Figure 20: mdsAvgCPU 59 % for the slow Quantum1 job;
# Figure 5: < 33 % MDS, < 4 % OSS for Cosmology1's normal runs) -------------------------
MDS_CPU_PCT = 50.0
OSS_CPU_PCT = 50.0
#: OST traffic in the 5 s before the start as a share of what an OST can move in 5 s
#: (paper: 122 MB is "a tiny fraction" of 15 GB). Needs `RuleContext.ost_bw`.
OST_BUSY_SHARE = 0.5

# --- 8: file-per-process (Cosmology1, Figure 6(b)) ------------------------------------
#: share of the bytes in files that exactly one rank touches ...
FPP_BYTES_SHARE = 0.5
#: ... with at least this many such files per rank of the job (ours).
FPP_FILES_PER_RANK = 0.5

# --- 9: read caching (Figure 7(b), Figure 21(d)) -------------------------------------
#: share of the read bytes that read back files the job wrote earlier.
RAW_SHARE = 0.5
#: reads smaller than this are not worth a note.
RAW_MIN_BYTES = 1 * MiB

# --- 10: balanced wide striping (Figure 12, Combustion1: 72 OSTs) ---------------------
#: bytes-weighted mean stripe count from which striping is "wide" (ours; NERSC's
#: `stripe_medium` uses 8).
WIDE_STRIPES = 8
#: busiest OST over the mean OST at most this for "balanced" (ours).
OST_BALANCED = 1.5

# --- positive factors 8-10 are only worth a note for jobs that move real data ----------
POSITIVE_MIN_BYTES = 1 * GiB

# --- striping advice: NERSC's guidance by file size (stripe_small/medium/large) --------
#: (file size up to, stripe count)
STRIPE_BY_SIZE = ((1 * GB, 1), (10 * GB, 8), (100 * GB, 24), (float("inf"), 72))
STRIPE_SIZE = 4 * MiB


def get(name: str, extra: dict[str, Any] | None = None) -> Any:
    """A threshold, overridden by `extra["thresholds"][name]` when the site sets one."""
    over = (extra or {}).get("thresholds") or {}
    return over.get(name, globals()[name])
