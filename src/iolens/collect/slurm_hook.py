"""A Slurm prolog/epilog environment -> one job-row batch.

Slurm runs Prolog/Epilog (on each node) or PrologSlurmctld/EpilogSlurmctld (once, on the
controller) with the job described in `SLURM_*` variables. The prolog knows the start,
the epilog the end and the outcome; `load()` merges the two rows by job id, and a later
sacct import fills in (or corrects) the rest. The batch key is the job and phase, so the
same hook running on every node of a job, or retried, loads once.

It lives with the node agent, not the importers, because it runs on the nodes, on the light
install (`iolens[agent]`): no pyarrow or store, the job row is `Columns`.
"""

from __future__ import annotations

import pwd
from collections.abc import Mapping
from datetime import UTC, datetime

from iolens.errors import InputError
from iolens.model.batch import Batch
from iolens.model.rows import Columns
from iolens.parse._common import is_digits
from iolens.parse.slurm import expand_hostlist

PHASES = ("prolog", "epilog")
SOURCE = "slurm-hook"
# Exit status of the batch script (wait(2) status) and the highest exit code of its steps.
_EXIT_VARS = ("SLURM_JOB_EXIT_CODE", "SLURM_JOB_EXIT_CODE2", "SLURM_JOB_DERIVED_EC")


def _user(env: Mapping[str, str]) -> str:
    if env.get("SLURM_JOB_USER"):
        return env["SLURM_JOB_USER"]
    uid = env.get("SLURM_JOB_UID", "").strip()
    if not uid:
        raise InputError("SLURM_JOB_USER", "not set, nor SLURM_JOB_UID")
    try:
        return pwd.getpwuid(int(uid)).pw_name
    except (KeyError, ValueError):
        return uid  # an account this node does not know: the uid still identifies it


def _int(env: Mapping[str, str], *names: str) -> int | None:
    for name in names:
        value = env.get(name, "").strip()
        if is_digits(value):
            return int(value)
    return None


def outcome(env: Mapping[str, str]) -> str:
    """COMPLETED unless an exit code Slurm passed is non-zero (`2`, `0:9`, `256`)."""
    for name in _EXIT_VARS:
        for part in env.get(name, "").strip().split(":"):
            if is_digits(part.strip()) and int(part) != 0:
                return "FAILED"
    return "COMPLETED"


def hook_batch(phase: str, env: Mapping[str, str], now: datetime | None = None) -> Batch:
    """The job row this phase knows; InputError when the environment is not a Slurm job's."""
    if phase not in PHASES:
        raise InputError("hook", f"phase must be prolog or epilog, not {phase!r}")
    job = env.get("SLURM_JOB_ID", "").strip()
    if not job:
        raise InputError("SLURM_JOB_ID", "not set (not run by Slurm?)")
    now = now or datetime.now(UTC)
    now = now.astimezone(UTC).replace(tzinfo=None) if now.tzinfo else now
    hostlist = env.get("SLURM_JOB_NODELIST") or env.get("SLURM_NODELIST") or ""
    try:
        nodes = expand_hostlist(hostlist) if hostlist.strip() else None
    except ValueError as exc:
        raise InputError("SLURM_JOB_NODELIST", str(exc)) from None
    row = {
        "job_id": job,
        "user": _user(env),
        "app": env.get("SLURM_JOB_NAME") or None,
        "nodes": nodes,
        "nprocs": _int(env, "SLURM_NTASKS", "SLURM_NPROCS"),
        "start": now if phase == "prolog" else None,
        "end": now if phase == "epilog" else None,
        "state": "RUNNING" if phase == "prolog" else outcome(env),
        "source": SOURCE,
    }
    key = f"slurm-hook:{job}:{phase}"
    restarts = _int(env, "SLURM_RESTART_COUNT")
    if restarts:  # a requeued job runs its prolog again: a new run, not a retry
        key += f":{restarts}"
    return Batch(
        source=f"{SOURCE}:{phase}",
        key=key,
        jobs=Columns.from_rows("jobs", [row]),  # plain lists: the hook runs without pyarrow
        # Slurm's partition and account have no column in the jobs table (yet): kept here
        # for whoever reads the batch, not stored.
        extra={
            k: env[v]
            for k, v in (("partition", "SLURM_JOB_PARTITION"), ("account", "SLURM_JOB_ACCOUNT"))
            if env.get(v)
        },
    )
