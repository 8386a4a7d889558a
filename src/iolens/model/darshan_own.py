"""What a Darshan log says about Darshan itself, so that it never passes for the application.

**Hints.** The job metadata's `h=` entry is not the application's MPI-IO hints: it holds
the hints Darshan itself passes to `MPI_File_open` when it writes its own log at
`MPI_Finalize`. darshan-runtime/lib/darshan-core.c (`darshan_log_record_hints_and_ver`)
copies the `DARSHAN_LOGHINTS` environment variable, else the configure-time
`__DARSHAN_LOG_HINTS`, into the metadata as `h=<hints>`, and `darshan_log_open` applies the
same string to the log file's `MPI_Info`. darshan-runtime/configure.ac
(`--with-log-hints`) defaults it to `romio_no_indep_rw=true;cb_nodes=4`, and to
`cb_nodes=1` when built against Open MPI. Darshan records no hint the application sets
(its MPI-IO module keeps counters, not `MPI_Info`), so nothing in a Darshan log says
which hints the application used. iolens therefore has no counterpart of Drishti's M08-M10
(cb_nodes against the node count: codes DM08-DM10 retired), `iolens advise` learns no
hints, and the report shows `h=` as Darshan's own.

**Own records.** Darshan's non-file modules name their records after themselves (AutoPerf's
`darshan-apmpi-header` / `darshan-apxc-header`, HEATMAP's `heatmap:POSIX`), and Darshan
names its log `<user>_<exe>_id<job>-<pid>_<m>-<d>-<secs>-<hash>.darshan_partial`, renamed
to `.darshan` once complete (`darshan_get_logfile_name`). darshan-core disables
instrumentation before it writes the log, so a record of such a file comes from another
tool (a wrapper copying or checking logs inside the job), never from the application's
work; it is left out of the analyses with the pseudo-records.
"""

from __future__ import annotations

import re
from dataclasses import replace

import numpy as np
import pandas as pd

from iolens.model.darshan import COUNTER_MODULES, DarshanJob, ModuleData

#: The job-metadata key under which Darshan keeps its own log-writing hints.
LOG_HINTS_KEY = "h"
#: darshan-runtime's default log-writing hints (configure.ac; Open MPI builds: cb_nodes=1).
DEFAULT_LOG_HINTS = "romio_no_indep_rw=true;cb_nodes=4"

_PSEUDO = re.compile(r"^(darshan-[a-z0-9]+-header|heatmap:.*)$")
_LOG_SUFFIXES = (".darshan", ".darshan_partial")


def log_write_hints(metadata: dict[str, str]) -> dict[str, str]:
    """The hints Darshan wrote its log with (`h=k=v;k=v`; `no` or absent: none)."""
    text = (metadata.get(LOG_HINTS_KEY) or "").strip()
    out: dict[str, str] = {}
    if text.lower() in ("", "no", "none"):
        return out
    for item in text.split(";"):
        key, sep, value = item.partition("=")
        if sep and key.strip():
            out[key.strip()] = value.strip()
    return out


def job_metadata(metadata: dict[str, str]) -> dict[str, str]:
    """The metadata without Darshan's log-writing hints (what may describe the job)."""
    return {k: v for k, v in metadata.items() if k != LOG_HINTS_KEY}


def is_darshan_own(name: str) -> bool:
    """Is this record name Darshan's own (a pseudo-record, or a Darshan log file)?"""
    return bool(_PSEUDO.match(name)) or name.endswith(_LOG_SUFFIXES)


def application_view(job: DarshanJob) -> DarshanJob:
    """`job` without the counter, LUSTRE and DXT records of Darshan's own files; `job`
    itself when it has none (the usual case: no copy)."""
    own = [rid for rid, name in job.names.items() if is_darshan_own(name)]
    if not own:
        return job
    ids = np.array(own, dtype=np.uint64)
    changed = False

    def drop(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        nonlocal changed
        if frame is None or not len(frame) or "id" not in frame.columns:
            return frame
        keep = ~np.isin(frame["id"].to_numpy(dtype=np.uint64), ids)
        if keep.all():
            return frame
        changed = True
        return frame[keep].reset_index(drop=True)

    modules = dict(job.modules)
    for name in COUNTER_MODULES:
        m = modules.get(name)
        if m is not None:
            c, f = drop(m.counters), drop(m.fcounters)
            assert c is not None and f is not None
            modules[name] = ModuleData(c, f, m.version, m.partial)
    lustre, dxt = drop(job.lustre), drop(job.dxt)
    return replace(job, modules=modules, lustre=lustre, dxt=dxt) if changed else job
