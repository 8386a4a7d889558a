"""A job's parallel file-sharing mode, with Beacon's definitions (section 3.3).

* N-N: each process accesses a separate file;
* N-1: all processes share one file (a job writing a new shared file per checkpoint is
  still N-1: every data file is shared by all of its I/O processes);
* N-M: N processes aggregate their I/O into M files, 1 < M < N (or only some of the
  processes do I/O, each on its own file: the aggregators);
* 1-1: only one of all processes performs I/O.

Files carrying under `MINOR_FILE_SHARE` of the busiest file's bytes (a config read, a
small log) are ignored so they do not mask the pattern of the data files.
"""

from __future__ import annotations

import numpy as np

MINOR_FILE_SHARE = 0.01


def classify(
    process: np.ndarray, file: np.ndarray, nbytes: np.ndarray, nprocs: int | None
) -> str | None:
    """I/O mode from data records: process id, file id and bytes per record."""
    if len(process) == 0 or nbytes.sum() == 0:
        return None
    files, file_idx = np.unique(file, return_inverse=True)
    per_file = np.bincount(file_idx, weights=nbytes)
    major = per_file >= MINOR_FILE_SHARE * per_file.max()
    keep = major[file_idx] & (nbytes > 0)
    procs, proc_idx = np.unique(process[keep], return_inverse=True)
    n_io = len(procs)
    n_files = int(major.sum())
    n_procs = max(nprocs or 0, n_io)
    if n_io == 1:
        return "1-1"
    pairs = np.unique(np.stack([file_idx[keep], proc_idx]), axis=1)
    sharers = np.bincount(pairs[0], minlength=len(files))[major]
    if n_files == 1 or (sharers == n_io).all():
        return "N-1"
    if (sharers == 1).all() and n_io >= n_procs:
        return "N-N"
    return "N-M"
