"""Slurm accounting (`sacct --parsable2` / `--parsable` output) -> one batch of job rows.

The scheduler is the authority on who ran what, where and when, so these rows replace what
partial views (tracer, prolog/epilog hook) said about the same job, while fields sacct leaves
empty keep their earlier values (`load()` merges jobs by id).

Folding: step rows (`123.batch`, `123.extern`, `123.0`) belong to their job; the job's user,
name, nodes, times and state come from the allocation row. Job ids follow what the tracer,
the hook and Lustre jobstats see (`SLURM_JOB_ID`): array tasks use `JobIDRaw` when the output
has it, else `123_4`; heterogeneous components (`123+1`) fold into their leader `123`.

Times: sacct prints site-local times without a zone; they become naive UTC (what the store
holds) through the zone the caller names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa

from iolens.errors import InputError, reading
from iolens.model.batch import Batch
from iolens.model.schema import JOBS
from iolens.parse._common import is_digits
from iolens.parse.slurm import SacctRecord, parse_job_id, parse_sacct

SOURCE = "slurm"
# Steps Slurm runs for itself: their task counts say nothing about the application.
_INTERNAL_STEPS = {"extern", "interactive"}
# Steps whose name is not the program srun ran.
_UNNAMED_STEPS = {"batch", *_INTERNAL_STEPS}
# Daemons `mpirun` starts with srun inside an allocation (one per node but its own): their
# step's task count is not the job's process count.
_LAUNCHER_STEPS = {"orted", "prted", "hydra_pmi_proxy"}


def timezone(name: str | None) -> tzinfo | None:
    """The zone sacct's times are in: an IANA name, `UTC`, or None for this machine's."""
    if name is None or name.lower() == "local":
        return None
    if name.upper() in ("UTC", "Z"):
        return UTC
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise InputError(
            "--tz", f"unknown time zone {name!r} (use an IANA name like Europe/Berlin, or UTC)"
        ) from None


def to_utc(t: datetime | None, tz: tzinfo | None) -> datetime | None:
    """A naive site-local time -> naive UTC; `tz` None means the machine's local zone."""
    if t is None:
        return None
    aware = t.astimezone() if tz is None else t.replace(tzinfo=tz)
    return aware.astimezone(UTC).replace(tzinfo=None)


@dataclass
class _Job:
    key: str
    line: int
    allocs: list[SacctRecord] = field(default_factory=list)
    steps: list[SacctRecord] = field(default_factory=list)


class _Columns:
    """Case-insensitive access to the columns sacct printed (`NCPUS` vs `NCPUs`)."""

    def __init__(self, records: Sequence[SacctRecord], source: str) -> None:
        self.source = source
        self.names = {k.lower(): k for k in records[0].fields} if records else {}

    def has(self, name: str) -> bool:
        return name in self.names

    def text(self, rec: SacctRecord, name: str) -> str | None:
        key = self.names.get(name)
        value = rec.fields.get(key, "").strip() if key else ""
        return value or None

    def int(self, rec: SacctRecord, name: str) -> int | None:
        value = self.text(rec, name)
        if value is None:
            return None
        if not is_digits(value):
            raise InputError(
                self.source, f"{self.names[name]}: expected an integer, got {value!r}", rec.line
            )
        return int(value)


def job_key(rec: SacctRecord, cols: _Columns) -> str:
    """The store's job id for a sacct row (see the module docstring)."""
    parts = rec.id_parts
    if parts.het_offset is not None:
        return parts.job
    if parts.array_task is not None:
        raw = cols.text(rec, "jobidraw")
        if raw and not parts.array_task.startswith("["):  # `123_[1-9]`: pending, no raw id yet
            try:
                return parse_job_id(raw).job
            except ValueError:
                raise InputError(cols.source, f"bad JobIDRaw {raw!r}", rec.line) from None
        return f"{parts.job}_{parts.array_task}"
    return parts.job


def jobs_table(records: Sequence[SacctRecord], tz: tzinfo | None, source: str) -> pa.Table:
    """One JOBS row per job in `records`, in first-seen order."""
    cols = _Columns(records, source)
    if records and not cols.has("user"):
        raise InputError(source, "no User column: iolens needs each job's user", records[0].line)
    jobs: dict[str, _Job] = {}
    for rec in records:
        key = job_key(rec, cols)
        job = jobs.setdefault(key, _Job(key, rec.line))
        (job.steps if rec.is_step else job.allocs).append(rec)
    return pa.Table.from_pylist([_row(j, cols, tz) for j in jobs.values()], schema=JOBS)


def _row(job: _Job, cols: _Columns, tz: tzinfo | None) -> dict[str, object]:
    allocs = sorted(job.allocs, key=lambda r: r.id_parts.het_offset or 0)
    if len({r.id_parts.het_offset for r in allocs}) < len(allocs):
        allocs = allocs[-1:]  # a requeued job (`--duplicates`): its last run counts
    head = allocs[0] if allocs else None  # het jobs: the leader (+0) names the job
    rows = allocs or job.steps
    user = next((r.user for r in [*allocs, *job.steps] if r.user), None)
    if user is None:
        raise InputError(cols.source, f"job {job.key} has no User", job.line)
    app = head.name if head else None
    if app is None:  # no JobName: the program the first srun step ran (its default name)
        app = next(
            (s.name for s in job.steps if s.name and s.id_parts.step not in _UNNAMED_STEPS), None
        )
    nodes: list[str] | None = None
    if cols.has("nodelist"):
        nodes = []
        for r in rows:
            nodes += [n for n in r.nodes if n not in nodes]
        # Right after a job ends, slurmdbd can still hold a half-written record (seen: job
        # name "allocation", NodeList the first node, NNodes the real count): its name and
        # node list are unknown then, so what the prolog/epilog said stands until a later
        # import brings the final record.
        if any(r.nnodes is not None and 0 < len(r.nodes) < r.nnodes for r in allocs):
            nodes, app = None, None
    starts = [r.start for r in rows if r.start is not None]
    ends = [r.end for r in rows if r.end is not None]
    running = head is not None and head.end is None
    state = head.state if head else job.steps[-1].state
    return {
        "job_id": job.key,
        "user": user,
        "app": app,
        "nodes": nodes,
        "nprocs": _nprocs(allocs, job.steps, cols),
        "start": to_utc(min(starts), tz) if starts else None,
        "end": to_utc(max(ends), tz) if ends and not running else None,
        # "CANCELLED by 10304007" -> CANCELLED: the state, not who caused it.
        "state": state.split()[0] if state else None,
        "source": SOURCE,
    }


def _nprocs(allocs: list[SacctRecord], steps: list[SacctRecord], cols: _Columns) -> int | None:
    """NTasks of the allocation, else the most tasks an application step ran, else CPUs.

    A job whose ranks `mpirun` started (its srun step runs an MPI launcher daemon per node)
    counts its allocated CPUs: mpirun fills the allocation's slots."""
    tasks = [n for r in allocs if (n := cols.int(r, "ntasks")) is not None]
    if tasks:
        return sum(tasks)
    cpus = [r.ncpus for r in allocs if r.ncpus]
    if cpus and any((r.name or "") in _LAUNCHER_STEPS for r in steps):
        return sum(cpus)
    tasks = [
        n
        for r in steps
        if r.id_parts.step not in _INTERNAL_STEPS and (n := cols.int(r, "ntasks")) is not None
    ]
    if tasks:
        return max(tasks)
    cpus = [r.ncpus for r in allocs if r.ncpus]
    return sum(cpus) if cpus else None


def batch_of_text(
    text: str,
    source: str,
    *,
    tz: str | None = None,
    fields: Sequence[str] | None = None,
    delimiter: str = "|",
) -> tuple[Batch, int]:
    """The batch of one sacct output, and how many sacct rows it had.

    The key hashes the text and the zone: importing the same file twice adds nothing, while
    re-importing it with a corrected `--tz` replaces the times.
    """
    if not delimiter:
        raise InputError(source, "empty delimiter: give the one sacct --delimiter used")
    zone = timezone(tz)
    first = next(((n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()), None)
    header = first is not None and any(
        c.strip().lower() in ("jobid", "jobidraw") for c in first[1].split(delimiter)
    )
    if header:
        fields = None  # the file names its columns: they win over --format
    elif fields is None and first is not None:
        raise InputError(
            source,
            f"no header line naming JobID (delimiter {delimiter!r}); for `sacct --noheader` "
            "output pass --format with the fields sacct printed",
            first[0],
        )
    records = parse_sacct(text, source, fields=fields, delimiter=delimiter)
    table = jobs_table(records, zone, source)
    digest = hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()[:32]
    batch = Batch(source=f"sacct:{source}", key=f"sacct:{digest}:{tz or 'local'}", jobs=table)
    return batch, len(records)


def batch_of_file(
    path: Path,
    *,
    tz: str | None = None,
    fields: Sequence[str] | None = None,
    delimiter: str = "|",
) -> tuple[Batch, int]:
    """Read saved sacct output; errors name the file (and line)."""
    with reading(path, directory="is a directory, not sacct output"):
        text = path.read_bytes().decode("utf-8", errors="replace")
    return batch_of_text(text, str(path), tz=tz, fields=fields, delimiter=delimiter)
