"""Learned settings (SIOX GenericHistory): which settings gave an application its best I/O.

Every past run of an application (optionally only one user's, and only runs touching files
with one extension) is a trial of two settings:

- **Lustre striping**: stripe count and size of the run's files on Lustre (`files.osts`
  naming Lustre OSTs, `files.stripe_size`, filled from `lfs getstripe`, Darshan's LUSTRE
  module or the simulator); a run's layout is the one carrying most of its bytes;
- **I/O mode** (`job_summaries.io_mode`: N-N, N-1, N-M, 1-1);
- **MPI-IO hints** (SIOX's optimizer): the hints the tracer saw at `MPI_File_open`
  (`mpi_hints`: what the application passed, or the effective values when the tracer's
  hint plug-in injected them); a run's hint set is the one of the files carrying most of
  its MPI-IO bytes, `(none)` for MPI-IO without hints. The kind is learned only for
  applications with at least one traced run that had hints. The advice comes as the
  `IOLENS_MPI_HINTS=...` line that makes the tracer inject the best set. A Darshan log's
  `h=` metadata is not used: it is the hints Darshan wrote its own log with
  (`iolens.model.darshan_own`), the same in nearly every log.

and its outcome is the bandwidth over its I/O time (`job_summaries.io_time_s`, timed at each
file's outermost layer, `analyze/bandwidth.py`), else the zoom-in factor
`job_factors.bandwidth`. For a traced run the bytes are counted at that same outermost
layer (`client_io`): the bytes the application asked for, not what the layers below moved
for them. `job_summaries` counts each I/O at its lowest layer, which a setting can inflate:
with `romio_cb_write=disable` ROMIO's data sieving reads and rewrites whole extents, 4x the
bytes of a 4-rank strided write on the mini cluster, which read as a 6x "gain" for a run
1.5x faster. A run whose summary predates its end (a live analysis of a running job) is
analysed again first by the listing (`store.queries.unanalyzed_jobs`). Per setting the runs,
their median bandwidth, its spread and the jobs are kept. The current setting is the
newest run's; the best of each kind is the one with the highest median among those tried
at least twice, recommended only when it beats the current one, with its confidence (a
one-sided Mann-Whitney rank test and a bootstrap interval of the gain). A setting tried
once is never recommended, however fast its run was: it is listed as worth retrying.

Like SIOX's learning phase, nothing is advised before `MIN_TRIALS` (5) runs with a known
bandwidth. The striping advice comes as an `lfs setstripe -c N -S SIZE DIR` line, DIR the
directory the best runs' files share, never a mount point (a file system's default).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import numpy as np
import pyarrow as pa

from iolens.model.mounts import MountTable, is_lustre_target
from iolens.model.schema import layer_level_sql
from iolens.model.system_files import STREAM_IDS, system_file_sql
from iolens.store.base import Store

MIN_TRIALS = 5
#: Runs a setting needs to be preferred over settings tried once.
MIN_RUNS_PER_SETTING = 2
#: Rank-test p-value at or below which a recommendation is given with high confidence.
ALPHA = 0.05
BOOTSTRAP = 2000
BOOTSTRAP_SEED = 0
KINDS = ("stripe", "io_mode", "mpi_hints")
#: The setting of an MPI-IO run whose files were opened without hints.
NO_HINTS = "(none)"


@dataclass
class Trial:
    """One past run: its settings and the bandwidth it got."""

    job_id: str
    user: str
    start: datetime | None
    bandwidth: float  # bytes/s over the run's I/O time
    stripe_count: int | None = None
    stripe_size: int | None = None
    io_mode: str | None = None
    mpi_hints: str | None = None  # "k=v;k=v" (NO_HINTS: MPI-IO without hints; None: no MPI-IO)
    nprocs: int | None = None  # its scale (processes), where the scheduler said
    dirs: list[str] = field(default_factory=list)  # directories of the run's files
    mount_points: set[str] = field(default_factory=set)  # from its Darshan logs' tables

    def setting(self, kind: str) -> str | None:
        if kind == "stripe":
            if self.stripe_count is None:
                return None
            size = lfs_size(self.stripe_size) if self.stripe_size else "?"
            return f"-c {self.stripe_count} -S {size}"
        if kind == "mpi_hints":
            return self.mpi_hints
        return self.io_mode


def lfs_size(n: int) -> str:
    """Bytes as `lfs setstripe -S` takes them: 4M, 64K, 1G, or plain bytes."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)


# -- gathering the trials -------------------------------------------------------------------


#: Slurm states of runs that ended before their work did ("CANCELLED by 0" included).
_UNFINISHED = "(FAILED|NODE_FAIL|BOOT_FAIL|OUT_OF_MEMORY|TIMEOUT|DEADLINE|PREEMPTED|CANCELLED).*"


def unfinished(state: str | None) -> bool:
    """A run that did not finish (a crash, a kill) measured nothing about its settings."""
    return re.fullmatch(_UNFINISHED, (state or "").upper()) is not None


def trials(store: Store, app: str, user: str | None = None, ext: str | None = None) -> list[Trial]:
    """Past finished runs of `app` (of `user`; touching `*ext` files) with a known bandwidth."""
    # a run that did not finish (a crash, a kill) measured nothing about its settings
    where, params = (
        ["j.app = ?", f"coalesce(upper(j.state), '') NOT SIMILAR TO '{_UNFINISHED}'"],
        [app],
    )
    if user is not None:
        where.append('j."user" = ?')
        params.append(user)
    rows = store.query(
        f"""
        SELECT j.job_id, j."user" AS user, j.start, j.nprocs, s.io_mode,
          CASE WHEN s.io_time_s > 0
            THEN (coalesce(s.read_bytes, 0) + coalesce(s.write_bytes, 0)) / s.io_time_s END
            AS bw_summary,
          s.io_time_s,
          f.bandwidth AS bw_factors
        FROM jobs j LEFT JOIN job_summaries s USING (job_id) LEFT JOIN job_factors f USING (job_id)
        WHERE {" AND ".join(where)}
        ORDER BY j.start, j.job_id
        """,
        params,
    ).to_pylist()
    outer = _outer_bytes(store, [r["job_id"] for r in rows if r["io_time_s"]])
    runs: dict[str, Trial] = {}
    for r in rows:
        bw = r["bw_summary"] if r["bw_summary"] else r["bw_factors"]
        if r["job_id"] in outer and r["io_time_s"]:
            bw = outer[r["job_id"]] / r["io_time_s"]
        if bw is None or not bw > 0:
            continue
        runs[r["job_id"]] = Trial(
            r["job_id"], r["user"], r["start"], float(bw), io_mode=r["io_mode"],
            nprocs=r["nprocs"],
        )  # fmt: skip
    if not runs:
        return []
    ids = pa.table({"job_id": pa.array(list(runs), pa.string())})
    store.register("_iolens_advise_jobs", ids)
    try:
        logs = store.query(
            "SELECT d.job_id, d.mounts FROM darshan_logs d JOIN _iolens_advise_jobs USING "
            '(job_id) ORDER BY d.job_id, d."start", d.log_key'
        ).to_pylist()
        files = store.query(
            """
            WITH touched AS (
              SELECT c.job_id, c.file_id, sum(c.size * c.count)::DOUBLE AS bytes
              FROM client_io c JOIN _iolens_advise_jobs USING (job_id)
              WHERE c.op IN ('read', 'write') GROUP BY ALL
              UNION ALL
              SELECT DISTINCT d.job_id, r.record_id AS file_id, NULL::DOUBLE AS bytes
              FROM darshan_records r JOIN darshan_logs d USING (log_key)
              JOIN _iolens_advise_jobs USING (job_id)
            ), named AS (
              SELECT DISTINCT d.job_id, r.path
              FROM darshan_records r JOIN darshan_logs d USING (log_key)
              JOIN _iolens_advise_jobs USING (job_id) WHERE r.path IS NOT NULL
            )
            SELECT t.job_id, f.path, f.stripe_size, f.osts, max(t.bytes) AS bytes
            FROM touched t JOIN files f USING (file_id) GROUP BY ALL
            UNION ALL
            SELECT n.job_id, f.path, f.stripe_size, f.osts, NULL
            FROM named n JOIN files f ON f.path = n.path
            """
        ).to_pylist()
        hinted = store.query(
            """
            WITH io AS (
              SELECT c.job_id, c.file_id, sum(c.size * c.count)::DOUBLE AS bytes
              FROM client_io c JOIN _iolens_advise_jobs USING (job_id)
              WHERE c.layer = 'mpiio' AND c.op IN ('read', 'write') GROUP BY ALL
            ), h AS (
              SELECT h.job_id, h.file_id, mode(h.hints) AS hints
              FROM mpi_hints h JOIN _iolens_advise_jobs USING (job_id) GROUP BY ALL
            )
            SELECT io.job_id, f.path, io.bytes, h.hints
            FROM io JOIN files f USING (file_id)
            LEFT JOIN h ON h.job_id = io.job_id AND h.file_id = io.file_id
            ORDER BY io.job_id, f.path
            """
        ).to_pylist()
    finally:
        store.unregister("_iolens_advise_jobs")
    for log in logs:
        table = MountTable((m[0], m[1]) for m in json.loads(log["mounts"] or "[]"))
        runs[log["job_id"]].mount_points |= table.points
    _layouts(runs, files, ext)
    _hint_sets(runs, hinted, ext)
    if ext is not None:  # only runs that touched such files
        with_ext = {r["job_id"] for r in files if (r["path"] or "").endswith(ext)}
        runs = {k: v for k, v in runs.items() if k in with_ext}
    return list(runs.values())


def _outer_bytes(store: Store, jobs: list[str]) -> dict[str, float]:
    """Traced jobs' bytes read + written at each file's outermost layer that moved data
    (HDF5 over MPI-IO over POSIX, `LAYER_LEVELS`), the standard streams and system files
    left out: the bytes `io_time_s` timed (`analyze/bandwidth.py`)."""
    if not jobs:
        return {}
    store.register("_iolens_advise_outer", pa.table({"job_id": pa.array(jobs, pa.string())}))
    streams = ", ".join(str(i) for i in sorted(STREAM_IDS))
    try:
        rows = store.query(
            f"""
            WITH lv AS (
              SELECT c.job_id, c.file_id, {layer_level_sql("c.layer")} AS level,
                sum(c.size * c.count)::DOUBLE AS bytes
              FROM client_io c JOIN _iolens_advise_outer USING (job_id)
              WHERE c.op IN ('read', 'write') AND c.size > 0
                AND c.file_id NOT IN ({streams})
                AND NOT {system_file_sql("c.job_id", "c.file_id")}
              GROUP BY ALL
            ), top AS (SELECT job_id, file_id, max(level) AS level FROM lv GROUP BY ALL)
            SELECT lv.job_id, sum(lv.bytes) AS bytes
            FROM lv JOIN top USING (job_id, file_id, level) GROUP BY lv.job_id
            """
        ).to_pylist()
    finally:
        store.unregister("_iolens_advise_outer")
    return {r["job_id"]: float(r["bytes"]) for r in rows if r["bytes"]}


def _layouts(runs: dict[str, Trial], files: list[dict[str, Any]], ext: str | None) -> None:
    """Each run's stripe setting: the (count, size) carrying most bytes (else most files)."""
    weight: dict[str, dict[tuple[int, int | None], float]] = defaultdict(dict)
    seen: set[tuple[str, str]] = set()
    for f in files:
        path = f["path"] or ""
        if ext is not None and not path.endswith(ext):
            continue
        if (f["job_id"], path) in seen:
            continue
        seen.add((f["job_id"], path))
        t = runs[f["job_id"]]
        if path:
            t.dirs.append(os.path.dirname(path))
        osts = f["osts"] or []
        if not osts or not all(is_lustre_target(o) for o in osts):
            continue  # no layout, or MooseFS chunkservers: no stripe setting to learn
        key = (len(osts), f["stripe_size"])
        w = weight[f["job_id"]]
        # bytes when the tracer saw them; a file Darshan named counts as one byte
        w[key] = w.get(key, 0.0) + (f["bytes"] if f["bytes"] else 1.0)
    for job, w in weight.items():
        (count, size), _ = max(w.items(), key=lambda kv: (kv[1], kv[0][0]))
        runs[job].stripe_count, runs[job].stripe_size = count, size


def _hint_sets(runs: dict[str, Trial], rows: list[dict[str, Any]], ext: str | None) -> None:
    """Each run's MPI-IO hint set: the one of the files carrying most MPI-IO bytes. Left
    unset for every run when no run had hints: nothing to learn from."""
    if not any(r["hints"] for r in rows):
        return
    weight: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for r in rows:
        if ext is not None and not (r["path"] or "").endswith(ext):
            continue
        weight[r["job_id"]][r["hints"] or NO_HINTS] += r["bytes"] or 0.0
    for job, w in weight.items():
        runs[job].mpi_hints = max(w.items(), key=lambda kv: (kv[1], kv[0]))[0]


# -- judging the settings -----------------------------------------------------------------


def _spread(bws: list[float]) -> dict[str, float]:
    """Quartiles and range of a setting's outcomes (bytes/s): how much one run says."""
    q1, q3 = np.percentile(bws, [25, 75])
    return {"q1": round(float(q1), 1), "q3": round(float(q3), 1),
            "min": round(min(bws), 1), "max": round(max(bws), 1)}  # fmt: skip


def _evidence(best: list[float], current: list[float]) -> dict[str, Any]:
    """How sure it is that `best` beats `current`: a one-sided Mann-Whitney U test (ranks,
    so one wild run cannot decide) and a bootstrap interval of the ratio of their medians."""
    from scipy.stats import mannwhitneyu

    p = float(mannwhitneyu(best, current, alternative="greater").pvalue)
    rng = np.random.default_rng(BOOTSTRAP_SEED)
    b = np.median(rng.choice(best, (BOOTSTRAP, len(best))), axis=1)
    c = np.median(rng.choice(current, (BOOTSTRAP, len(current))), axis=1)
    lo, hi = np.percentile(b / c, [5, 95])
    return {"p_value": round(p, 4), "gain_interval": [round(float(lo), 2), round(float(hi), 2)]}


def compare(runs: list[Trial], kind: str) -> dict[str, Any] | None:
    """Per setting of one kind: runs, median bandwidth, spread, jobs; the best setting the
    evidence supports against the current one (the newest run's) and how sure that is.

    A setting is a candidate once tried `MIN_RUNS_PER_SETTING` times: a single fast run is
    luck as often as not, so it is listed as worth retrying, never recommended. The best
    candidate is recommended only when its median beats the current setting's outcome
    (never a setting measured worse than what the user has now), with `confidence` high
    when the rank test gives p <= ALPHA, low otherwise.
    """
    groups: dict[str, list[Trial]] = defaultdict(list)
    for t in runs:
        s = t.setting(kind)
        if s is not None:
            groups[s].append(t)
    if not groups:
        return None
    newest = max((t for ts in groups.values() for t in ts), key=_when)
    current = newest.setting(kind)
    settings = [
        {
            "setting": s,
            "runs": len(ts),
            "median_bw": statistics.median(t.bandwidth for t in ts),
            "spread": _spread([t.bandwidth for t in ts]),
            "jobs": [t.job_id for t in ts],
            "current": s == current,
        }
        for s, ts in groups.items()
    ]
    settings.sort(key=lambda g: (-g["median_bw"], not g["current"], g["setting"]))
    eligible = [g for g in settings if g["runs"] >= MIN_RUNS_PER_SETTING]
    best = eligible[0] if eligible else None
    cur = next(g for g in settings if g["current"])
    top = settings[0]
    for g in settings:
        g["vs_best"] = round(g["median_bw"] / top["median_bw"], 3) if top["median_bw"] else None
    out: dict[str, Any] = {
        "current": current,
        "current_median_bw": round(cur["median_bw"], 1),
        "best": None,
        "runs": 0,
        "median_bw": None,
        "gain": None,
        "confidence": None,
        "evidence": None,
        "only_setting_tried": len(groups) == 1,
        "retry": [
            {"setting": g["setting"], "runs": g["runs"], "median_bw": round(g["median_bw"], 1)}
            for g in settings
            if g["runs"] < MIN_RUNS_PER_SETTING
            and not g["current"]
            and g["median_bw"] > (best["median_bw"] if best else 0.0)
        ],
        "settings": settings,
        "_trials": [],
    }
    if best is None:
        out["reason"] = f"no {kind} setting was tried {MIN_RUNS_PER_SETTING} times"
    elif best["setting"] == current:
        out |= {"reason": "the current setting is the best tried", "confidence": "keep"}
    elif best["median_bw"] <= cur["median_bw"]:
        out["reason"] = (
            f"no setting tried {MIN_RUNS_PER_SETTING}+ times did better than the current "
            f"{current} ({cur['runs']} run(s))"
        )
    if best is not None and (best["setting"] == current or best["median_bw"] > cur["median_bw"]):
        ev = None
        if best["setting"] != current:
            ev = _evidence(
                [t.bandwidth for t in groups[best["setting"]]],
                [t.bandwidth for t in groups[current]],
            )
            out["confidence"] = "high" if ev["p_value"] <= ALPHA else "low"
            out["reason"] = (
                f"{best['setting']} beat the current {current} "
                f"(rank test p = {ev['p_value']:.3g}, {best['runs']} vs {cur['runs']} runs)"
            )
        out |= {
            "best": best["setting"],
            "runs": best["runs"],
            "median_bw": round(best["median_bw"], 1),
            "gain": round(best["median_bw"] / cur["median_bw"], 2) if cur["median_bw"] else None,
            "evidence": ev,
            "_trials": groups[best["setting"]],
        }
    for g in settings:
        g["median_bw"] = round(g["median_bw"], 1)
    return out


def _when(t: Trial) -> tuple[float, str]:
    return (t.start.timestamp() if t.start else float("-inf"), t.job_id)


def advise(
    store: Store,
    app: str,
    user: str | None = None,
    ext: str | None = None,
    min_trials: int = MIN_TRIALS,
) -> dict[str, Any]:
    """The best known stripe setting and I/O mode for `app`, with evidence.

    Keys: `app`, `user`, `ext`, `trials` (runs with a known bandwidth), `min_trials`,
    `advice` (false below `min_trials`, with `reason`), and when advising `settings`
    ({"stripe" | "io_mode": {current, current_median_bw, best (null when the evidence
    supports none), runs, median_bw, gain (over the current setting), confidence (keep |
    high | low | null), evidence ({p_value, gain_interval}), reason, retry (settings tried
    too rarely that looked better), only_setting_tried, settings: [{setting, runs,
    median_bw, spread, vs_best, jobs, current}]}}, kinds no run recorded are left out)
    `lfs_setstripe` (a command line; null when no stripe setting is recommended) and
    `mpi_hints_env` (the `IOLENS_MPI_HINTS=...` environment line that makes the tracer
    inject the best hint set; null when none is recommended or the best is no hints).
    Bandwidths are bytes/s.
    """
    runs = trials(store, app, user, ext)
    out: dict[str, Any] = {
        "app": app,
        "user": user,
        "ext": ext,
        "trials": len(runs),
        "min_trials": min_trials,
    }
    if len(runs) < min_trials:
        who = f" by {user}" if user else ""
        files = f" on *{ext} files" if ext else ""
        out |= {
            "advice": False,
            "reason": f"{len(runs)} run(s) of {app}{who}{files} with a known bandwidth; "
            f"at least {min_trials} are needed before advising",
        }
        return out
    settings = {k: c for k in KINDS if (c := compare(runs, k)) is not None}
    setstripe = None
    if "stripe" in settings and settings["stripe"]["_trials"]:
        best_t = settings["stripe"]["_trials"]
        t0 = best_t[0]
        size = f" -S {lfs_size(t0.stripe_size)}" if t0.stripe_size else ""
        setstripe = f"lfs setstripe -c {t0.stripe_count}{size} {_common_dir(best_t)}"
    for c in settings.values():
        c.pop("_trials")
    return out | {
        "advice": True,
        "settings": settings,
        "lfs_setstripe": setstripe,
        "mpi_hints_env": hints_env(settings.get("mpi_hints"), ext),
    }


def hints_env(judged: dict[str, Any] | None, ext: str | None) -> str | None:
    """The environment that injects the recommended hint set (quoted for a shell), limited
    to `*ext` files when advising on one extension; None when there is nothing to inject."""
    if not judged or judged["best"] in (None, NO_HINTS):
        return None
    env = f"IOLENS_MPI_HINTS={shlex.quote(judged['best'])}"
    return env + (f" IOLENS_MPI_HINTS_MATCH={shlex.quote('*' + ext)}" if ext else "")


def _common_dir(runs: list[Trial]) -> str:
    """The directory the best runs' files share (where new files should get the layout),
    DIR when it is a file system's root."""
    dirs = [d for t in runs for d in t.dirs if d.startswith("/")]
    if not dirs:
        return "DIR"
    common = os.path.commonpath(dirs)
    roots = {"", "/"}.union(*(t.mount_points for t in runs))
    return common if common not in roots else "DIR"


__all__ = [
    "MIN_TRIALS",
    "NO_HINTS",
    "Trial",
    "advise",
    "compare",
    "hints_env",
    "lfs_size",
    "trials",
]
