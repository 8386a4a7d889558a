"""Drishti 0.8's default thresholds, in one place.

The values are those of `thresholds` in Drishti 0.8's `drishti/includes/config.py`
(PyPI `drishti-io==0.8`); the names keep Drishti's keys so a site's Drishti `--config` JSON
maps one to one. The last block is not in Drishti: it holds the few extra bars iolens
needs (escalation to critical, the DXT Explorer checks D01/D02), each with its reason.
"""

from __future__ import annotations

# --- Drishti 0.8, drishti/includes/config.py `thresholds` -----------------------------
#: |writes - reads| / ops above which a job is read- or write-intensive (P01-P04)
IMBALANCE_OPERATIONS = 0.1
#: requests below this many bytes are "small" (P05, P06, P15, P16)
SMALL_BYTES = 1_048_576
#: share of small requests above which they are an issue (P05, P06, P15, P16)
SMALL_REQUESTS = 0.1
#: and their absolute number must exceed this (P05, P06, P15, P16)
SMALL_REQUESTS_ABSOLUTE = 1000
#: share of misaligned requests above which they are an issue (P07, P08)
MISALIGNED_REQUESTS = 0.1
#: seconds of metadata time per rank above which it is an issue (P17)
METADATA_TIME_RANK = 30.0
#: share of random (non-sequential) requests above which they are an issue (P11, P13)
RANDOM_OPERATIONS = 0.2
#: and their absolute number must exceed this (P11, P13)
RANDOM_OPERATIONS_ABSOLUTE = 1000
#: |slowest - fastest rank| / total above which a shared file has stragglers (P18, P19)
IMBALANCE_STRAGGLERS = 0.15
#: (max - min) / max of the ranks' bytes on one file above which it is imbalanced (P21, P22)
IMBALANCE_SIZE = 0.3
#: share of bytes through STDIO above which it is an issue (S01)
INTERFACE_STDIO = 0.1
#: share of independent MPI-IO requests per file reported in M02/M03 details
COLLECTIVE_OPERATIONS = 0.5
#: MPI-IO requests above which the lack of collectives is an issue (M02, M03)
COLLECTIVE_OPERATIONS_ABSOLUTE = 1000

# --- Drishti 0.8, drishti/includes/config.py, other constants --------------------------
#: Drishti lists at most this many offending files per insight (DETAILS_MAX_SIZE is 10);
#: iolens keeps the top 5 by bytes or requests.
TOP_FILES = 5

# --- iolens additions --------------------------------------------------------------------
#: a Drishti HIGH insight becomes `critical` (not `warning`) when the offending share
#: (small, misaligned or random requests, STDIO bytes, imbalance) reaches this value: the
#: problem then concerns most of the job's I/O rather than a tail.
CRITICAL_SHARE = 0.5
#: request size the small-request gain is computed at (Drishti's "small" bar)
TARGET_REQUEST = SMALL_BYTES
#: ROMIO's default collective buffer (cb_buffer_size, 16 MiB): requests after aggregation
CB_BUFFER_SIZE = 16 * 2**20
#: rank 0 is "heavy" (DXT Explorer D01) when it moves more bytes and issues more requests
#: than every other rank, and at least this many times the mean of the other ranks.
#: DXT Explorer flags rank 0 when no rank exceeds it, so perfectly balanced jobs qualify;
#: the factor keeps the check to jobs where rank 0 really carries the I/O.
RANK_ZERO_FACTOR = 2.0
#: DXT Explorer D02 flags ranks above mean + 1 standard deviation in bytes, requests and
#: time; iolens also requires them above (1 + IMBALANCE_SIZE) x the mean bytes, so noise
#: around a balanced mean (16 % of ranks of any normal spread) is not reported.
UNBALANCED_STD = 1.0
#: D01 and D02 also need the busiest rank to move at least this much: below it the whole
#: job's I/O is one request's worth and there is nothing to balance.
BUSIEST_RANK_MIN_BYTES = SMALL_BYTES
#: P09/P10 are checked per file (bytes moved beyond the file's extent); Drishti has no
#: bar, iolens needs this many redundant bytes over the job, so that a few re-read
#: configuration bytes (Python's pyvenv.cfg, an HDF5 superblock rewrite) are not reported.
REDUNDANT_MIN_BYTES = SMALL_BYTES
