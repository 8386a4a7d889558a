"""The scale-out store: a partitioned Parquet dataset read through DuckDB.

Layout under the dataset root (`docs/scale-out.md` has the full story):

```
iolens-dataset.json                          marker (format version)
<table>/date=YYYY-MM-DD/hour=HH/group=G/*.parquet   immutable segments
client_io_merged/date=.../hour=.../group=_compacted/*.parquet   second-pass client records
_staging/<group>/                            segments being written (invisible)
_commits/<group>/<commit>.json               ingest commit manifests (roll-forward log)
_compactions/<id>.json                       compaction manifests (inputs -> outputs)
_results/HEAD.json, _results/<table>-<v>.parquet   analysis results, one snapshot per table
_locks/                                      one writer per group, one results writer, one compactor
```

Ingest servers (`iolens.store.segments`) write the ingest tables (client records, server
samples, metrics, jobs, files, topology, batch keys) as segments of their own group; the
query/analysis server reads them all through `DatasetStore`, whose SQL views have the
model's table names, so `iolens.store.queries` and every analysis run unchanged.

Visibility without a coordinator: writers stage files, write their manifest (the commit
point), then rename each staged file into its partition; a compaction's inputs (and any
manifest) are deleted only after a grace period. A reader lists the manifest names, then
the staging area, then the segment files, then reads the manifests: a commit whose
manifest it had not seen yet, or whose files are still staged, may be half renamed, so
its outputs are hidden (until the next listing); a finished compaction hides its inputs.
A reader thus sees each row exactly once, and a commit all at once or not at all.

Analysis results (findings, summaries, anomalies, ...) are small and rewritten by the
analyses, so they live in DuckDB tables in memory, loaded from `_results/` and published
back (one Parquet file per changed table, then `HEAD.json` atomically) when a write
commits. One process at a time publishes (the results lock): the analysis server.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import duckdb
import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

from iolens.errors import InputError, StoreError
from iolens.model.schema import MERGED_BY_KEY, TABLES, job_precedence_sql
from iolens.store.duckdb_store import arrow_query, first_line
from iolens.store.migrations import LATEST, MIGRATIONS
from iolens.tomlconfig import load_toml

MARKER = "iolens-dataset.json"
FORMAT = 1

#: Tables the ingest servers write as segments; every other table is an analysis result.
INGEST_TABLES = (
    "components",
    "forwarding",
    "component_aliases",
    "jobs",
    "files",
    "client_io",
    "server_samples",
    "metrics",
    "ingested",
)
#: Second-pass (inter-node) client records, written by compaction only.
MERGED = "client_io_merged"
#: Time column that places a row in its hourly partition; other tables use commit time.
TIME_COLUMN = {"client_io": "t_start", "server_samples": "ts", "metrics": "ts"}
TIMED = (*TIME_COLUMN, MERGED)
#: Group of the segments compaction writes for timed tables (all groups merged).
COMPACTED = "_compacted"
#: Dataset-only columns: the commit order of upserted rows and the partial-view flag.
SEQ, PARTIAL = "_seq", "_partial"

_GROUP_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_PART_RE = re.compile(r"^date=(\d{4}-\d{2}-\d{2})$|^hour=(\d{2})$|^group=([A-Za-z0-9_.-]+)$")
_WRITE_RE = re.compile(
    r"^\s*(?:DELETE\s+FROM|INSERT\s+(?:OR\s+\w+\s+)?INTO|UPDATE|ALTER\s+TABLE|TRUNCATE)"
    r"\s+\"?(\w+)\"?",
    re.IGNORECASE,
)


def check_group(name: str) -> str:
    """A group name usable in paths (`g01`, `fwd-a`); names starting with `_` are reserved."""
    if not _GROUP_RE.match(name):
        raise InputError("--group", f"bad group name {name!r}: letters, digits, '.', '_', '-'")
    return name


# -- site configuration ------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DatasetSection(_Strict):
    path: Path | None = Field(None, description="Dataset root on the shared file system")
    flush_s: float = Field(
        2.0, gt=0, le=25, description="Ingest servers commit segments at least this often (s)"
    )
    key_days: int = Field(
        7, ge=1, description="Days of batch keys an ingest server remembers for deduplication"
    )


class GroupSection(_Strict):
    server: str = Field(description="URL of the ingest server that owns the group")
    hosts: list[str] = Field(
        default_factory=list, description="Slurm hostlists of the group's agents"
    )


class RetentionSection(_Strict):
    full_days: int = Field(7, ge=0, description="Days server samples keep their own interval")
    downsample_s: int = Field(60, ge=1, description="Interval of older server samples (s)")
    keep_days: int = Field(0, ge=0, description="Days any timed data is kept (0: forever)")
    grace_s: float = Field(
        600.0, ge=0, description="Seconds before replaced segments are deleted (readers)"
    )
    settle_s: float = Field(
        3600.0, ge=0, description="Compact an hour's partition this long after it ends"
    )


class SiteConfig(_Strict):
    """The scale-out site: where the dataset is, the static agent groups, retention."""

    dataset: DatasetSection = Field(default_factory=DatasetSection)
    groups: dict[str, GroupSection] = Field(default_factory=dict)
    retention: RetentionSection = Field(default_factory=RetentionSection)

    def group_of(self, host: str) -> str | None:
        """The group whose hostlists name `host` (static assignment, as Beacon's groups)."""
        from iolens.parse.slurm import expand_hostlist

        for name, g in self.groups.items():
            for expr in g.hosts:
                if host in expand_hostlist(expr):
                    return name
        return None


def load_site(path: Path) -> SiteConfig:
    cfg = load_toml(path, SiteConfig, "site config")
    for name in cfg.groups:
        try:
            check_group(name)
        except InputError as exc:
            raise InputError(str(path), f"groups.{name}: {exc.message}") from None
    return cfg


# -- files and manifests -----------------------------------------------------------------


def is_dataset(path: str | Path) -> bool:
    return (Path(path) / MARKER).is_file()


def init_dataset(root: str | Path) -> Path:
    """Create the dataset root (idempotent; several servers may race to do it)."""
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise StoreError(f"{root} exists and is not a directory")
    root.mkdir(parents=True, exist_ok=True)
    if not is_dataset(root):
        if any(p.name != MARKER for p in root.iterdir()):
            raise StoreError(f"{root} is not empty and not an iolens dataset")
        atomic_write(root / MARKER, json.dumps({"format": FORMAT, "created": _now_iso()}))
    meta = json.loads((root / MARKER).read_text())
    if meta.get("format", 0) > FORMAT:
        raise StoreError(f"{root} has dataset format {meta['format']}; upgrade iolens")
    for d in ("_staging", "_commits", "_compactions", "_results", "_locks"):
        (root / d).mkdir(exist_ok=True)
    return root


def _now_iso() -> str:
    return datetime.now(UTC).replace(tzinfo=None).isoformat()


def fsync_dir(path: Path) -> None:
    with contextlib.suppress(OSError):
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, text: str, fsync: bool = True) -> None:
    """Write `text` to `path` all at once: a temporary name, fsync, rename."""
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}.tmp")
    with open(tmp, "w") as f:
        f.write(text)
        if fsync:
            f.flush()
            os.fsync(f.fileno())
    os.rename(tmp, path)
    if fsync:
        fsync_dir(path.parent)


def new_id() -> str:
    """Sortable unique id: microseconds since the epoch, then random bits."""
    return f"{time.time_ns() // 1000:014x}-{uuid.uuid4().hex[:10]}"


def partition_dir(table: str, hour_us: int, group: str) -> str:
    """Relative directory of `table`'s partition holding the hour starting at `hour_us`."""
    t = datetime(1970, 1, 1) + timedelta(microseconds=hour_us)
    return f"{table}/date={t:%Y-%m-%d}/hour={t:%H}/group={group}"


@dataclass(frozen=True)
class Part:
    """Where a segment file sits: table, hour (naive UTC start) and group."""

    table: str
    hour: datetime
    group: str

    @property
    def date(self) -> str:
        return f"{self.hour:%Y-%m-%d}"


def part_of(relpath: str) -> Part:
    bits = relpath.split("/")
    if len(bits) != 5:
        raise StoreError(f"not a segment path: {relpath}")
    date = hour = group = None
    for b in bits[1:4]:
        m = _PART_RE.match(b)
        if not m:
            raise StoreError(f"not a segment path: {relpath}")
        date, hour, group = m.group(1) or date, m.group(2) or hour, m.group(3) or group
    if date is None or hour is None or group is None:
        raise StoreError(f"not a segment path: {relpath}")
    return Part(bits[0], datetime.fromisoformat(f"{date}T{hour}:00:00"), group)


def list_segments(root: Path, tables: Sequence[str] = (*INGEST_TABLES, MERGED)) -> set[str]:
    """Relative paths of every `*.parquet` segment under the tables' partitions."""
    out: set[str] = set()
    for table in tables:
        base = root / table
        if not base.is_dir():
            continue
        for d in _subdirs(base, "date="):
            for h in _subdirs(d, "hour="):
                for g in _subdirs(h, "group="):
                    with os.scandir(g) as it:
                        for e in it:
                            if e.name.endswith(".parquet") and not e.name.startswith("."):
                                out.add(f"{table}/{d.name}/{h.name}/{g.name}/{e.name}")
    return out


def _subdirs(path: Path, prefix: str) -> list[Path]:
    with os.scandir(path) as it:
        return [Path(e.path) for e in it if e.name.startswith(prefix) and e.is_dir()]


@dataclass
class Manifest:
    """An ingest commit or a compaction: what it adds (outputs) and replaces (inputs)."""

    kind: Literal["ingest", "compaction"]
    outputs: list[str]
    inputs: list[str] = field(default_factory=list)
    staged: dict[str, str] = field(default_factory=dict)  # output -> staging path
    created: str = field(default_factory=_now_iso)
    info: dict[str, Any] = field(default_factory=dict)

    def dumps(self) -> str:
        return json.dumps(self.__dict__, sort_keys=True)

    @classmethod
    def load(cls, path: Path) -> Manifest:
        return cls(**json.loads(path.read_text()))


class ManifestCache:
    """Manifests are immutable once written: each is read once per process."""

    def __init__(self) -> None:
        self._seen: dict[str, Manifest] = {}

    @staticmethod
    def names(root: Path) -> set[str]:
        out: list[Path] = []
        commits = root / "_commits"
        if commits.is_dir():
            for g in _subdirs(commits, ""):
                out += g.glob("*.json")
        out += (root / "_compactions").glob("*.json")
        return {str(p) for p in out if not p.name.startswith(".")}

    def current(self, root: Path) -> dict[str, Manifest]:
        out: dict[str, Manifest] = {}
        live = self.names(root)
        for key in live:
            if key not in self._seen:
                try:
                    self._seen[key] = Manifest.load(Path(key))
                except FileNotFoundError:  # deleted after its grace period meanwhile
                    continue
            out[key] = self._seen[key]
        for key in set(self._seen) - live:
            del self._seen[key]
        return out


def list_staging(root: Path) -> set[str]:
    """Relative paths of every file waiting in `_staging/` (renames not done yet)."""
    out: set[str] = set()
    staging = root / "_staging"
    if staging.is_dir():
        for d in _subdirs(staging, ""):
            with os.scandir(d) as it:
                out.update(f"_staging/{d.name}/{e.name}" for e in it)
    return out


def visible(
    files: set[str],
    manifests: dict[str, Manifest],
    staged: set[str],
    known: set[str] | None = None,
) -> set[str]:
    """The files a reader may use, from (in this order) the manifest names `known`, the
    `staged` files, the segment `files` and the `manifests`: a manifest that was not yet
    known or still has staged files may be half renamed, so what it wrote is hidden; a
    finished compaction hides its inputs."""
    out = set(files)
    for key, m in manifests.items():
        if (known is not None and key not in known) or any(s in staged for s in m.staged.values()):
            out.difference_update(m.outputs)
        elif m.kind == "compaction":
            out.difference_update(m.inputs)
    return out


@dataclass
class Snapshot:
    """The segment files a reader uses (relative paths by table) and the results head."""

    root: str
    files: dict[str, list[str]]
    results: dict[str, Any] = field(default_factory=dict)
    taken: float = field(default_factory=time.time)
    #: Only these jobs' client records and job-attributed samples (a per-job task's view).
    jobs: list[str] | None = None

    def restrict(self, lo: datetime | None, hi: datetime | None, margin_h: int = 1) -> Snapshot:
        """Only the hourly partitions of timed tables overlapping [lo - margin, hi + margin]:
        what a task working on that period needs (partition pruning by construction)."""
        if lo is None or hi is None:
            return self
        a = lo.replace(minute=0, second=0, microsecond=0) - timedelta(hours=margin_h)
        b = hi + timedelta(hours=margin_h)
        files = {
            t: [f for f in fs if t not in TIMED or a <= part_of(f).hour <= b]
            for t, fs in self.files.items()
        }
        return Snapshot(self.root, files, self.results, self.taken, self.jobs)

    def scope(self, jobs: list[str]) -> Snapshot:
        """Only `jobs`' rows of `client_io` and `server_samples` (rows without a job go)."""
        return Snapshot(self.root, self.files, self.results, self.taken, list(jobs))

    def count(self) -> int:
        return sum(len(v) for v in self.files.values())


def take_snapshot(root: Path, cache: ManifestCache | None = None) -> Snapshot:
    """What a reader sees now (the order of the listings matters: see `visible`)."""
    cache = cache or ManifestCache()
    known = cache.names(root)
    staged = list_staging(root)
    files = list_segments(root)
    manifests = cache.current(root)
    seen = sorted(visible(files, manifests, staged, known))
    by_table: dict[str, list[str]] = {t: [] for t in (*INGEST_TABLES, MERGED)}
    for f in seen:
        by_table.setdefault(f.split("/", 1)[0], []).append(f)
    return Snapshot(str(root), by_table, read_head(root))


def read_head(root: Path) -> dict[str, Any]:
    head = root / "_results" / "HEAD.json"
    try:
        return json.loads(head.read_text())
    except FileNotFoundError:
        return {"version": 0, "tables": {}}


class FileLock:
    """An exclusive advisory lock on a file (held until release or process death)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None

    def acquire(self, wait: bool = False) -> bool:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return False
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()} {os.uname().nodename}\n".encode())
        self.fd = fd
        return True

    def holder(self) -> str:
        try:
            return self.path.read_text().strip() or "another process"
        except OSError:
            return "another process"

    def release(self) -> None:
        if self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


# -- the views ---------------------------------------------------------------------------


def _quote_list(root: Path, files: Sequence[str]) -> str:
    return "[" + ", ".join("'" + str(root / f).replace("'", "''") + "'" for f in files) + "]"


def _cols(table: str) -> str:
    return ", ".join(f'"{n}"' for n in TABLES[table].names)


def _sql_type(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"{_sql_type(t.value_type)}[]"
    for test, name in (
        (pa.types.is_string, "VARCHAR"),
        (pa.types.is_int64, "BIGINT"),
        (pa.types.is_int32, "INTEGER"),
        (pa.types.is_floating, "DOUBLE"),
        (pa.types.is_timestamp, "TIMESTAMP"),
        (pa.types.is_boolean, "BOOLEAN"),
    ):
        if test(t):
            return name
    raise StoreError(f"no SQL type for {t}")


def _typed_cols(table: str) -> str:
    """The model's columns cast to the model's types (segments written by an older or
    newer writer, or widened by an aggregate, still read as the model says)."""
    return ", ".join(f'"{f.name}"::{_sql_type(f.type)} AS "{f.name}"' for f in TABLES[table])


_MERGED_EXPAND = """
SELECT job_id, unnest(nodes) AS node, unnest(ranks) AS rank, unnest(pids) AS pid, layer, op,
  unnest(coalesce(file_ids, list_resize([file_id], members, file_id))) AS file_id,
  unnest(offsets) AS "offset", size, stride, count,
  t_start + to_microseconds(unnest(coalesce(dt_start, list_resize([0::BIGINT], members, 0))))
    AS t_start,
  t_end + to_microseconds(unnest(coalesce(dt_end, list_resize([0::BIGINT], members, 0))))
    AS t_end,
  unnest(coalesce(durs, list_resize([dur_ns], members, dur_ns))) AS dur_ns
FROM read_parquet({files})
"""


def merged_by_key_sql(table: str, src: str) -> str:
    """Rows of a `MERGED_BY_KEY` table over `src` as `ingest.load` keeps them: per key
    and column, the newest non-null value (segments written before the table merged
    have no `_seq` and count as oldest), with the newest `_seq` of the key."""
    key = MERGED_BY_KEY[table]
    seq = f"coalesce({SEQ}, 0)"
    picks = ", ".join(
        f'arg_max("{c}", {seq}) FILTER (WHERE "{c}" IS NOT NULL) AS "{c}"'
        for c in TABLES[table].names
        if c != key
    )
    return f'SELECT "{key}", {picks}, max({seq}) AS {SEQ} FROM {src} GROUP BY "{key}"'


def view_sql(table: str, root: Path, files: Sequence[str], merged: Sequence[str] = ()) -> str:
    """SELECT giving `table` in model form over segment files (None: no files)."""
    cols = _cols(table)
    if not files and not (table == "client_io" and merged):
        return ""
    src = f"read_parquet({_quote_list(root, files)}, union_by_name = true)"
    if table == "jobs":
        # Jobs merge by id as ingest.load merges them: per column, the non-null value of
        # the full source of highest precedence (the newest on a tie) wins; a partial view
        # (one process's trace) counts only if it came first, and then only where no full
        # source says anything.
        order = f"{{'p': {job_precedence_sql('r')}, 's': {SEQ}}}"
        picks = ", ".join(
            f'coalesce(arg_max("{c}", {order}) FILTER (WHERE NOT {PARTIAL}), '
            f'CASE WHEN arg_min({PARTIAL}, {SEQ}) THEN arg_min_null("{c}", {SEQ}) END) AS "{c}"'
            for c in TABLES["jobs"].names
            if c != "job_id"
        )
        return f"SELECT job_id, {picks} FROM {src} AS r GROUP BY job_id"
    if table in MERGED_BY_KEY:
        return f"SELECT {cols} FROM ({merged_by_key_sql(table, src)})"
    sql = f"SELECT {_typed_cols(table)} FROM {src}" if files else ""
    if table == "client_io" and merged:
        expand = _MERGED_EXPAND.format(files=_quote_list(root, merged))
        sql = f"{sql} UNION ALL {expand}" if sql else expand
    return sql


# -- the store ---------------------------------------------------------------------------


class DatasetStore:
    """The Store protocol over a dataset: segment views plus in-memory result tables.

    `snapshot` pins the files (a Dask task gets the slice of partitions it needs);
    otherwise the listing is refreshed at most every `refresh_s` seconds between queries.
    `journal=True` records every write instead of publishing it (workers of a distributed
    analysis hand the journal back to the process that owns the results).
    """

    def __init__(
        self,
        root: str | Path,
        *,
        create: bool = False,
        read_only: bool = False,
        snapshot: Snapshot | None = None,
        journal: bool = False,
        refresh_s: float = 5.0,
        threads: int | None = None,
    ) -> None:
        self.root = Path(root)
        self.location = str(self.root)
        if not is_dataset(self.root):
            if not create:
                raise StoreError(f"{self.root} is not an iolens dataset (no {MARKER})")
            init_dataset(self.root)
        self.refresh_s = refresh_s
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET enable_progress_bar = false")  # servers and Dask workers
        if threads:
            self.con.execute(f"SET threads = {int(threads)}")
        self.con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
        for _number, sql in MIGRATIONS:
            self.con.execute(sql)
        self.con.execute("INSERT INTO meta VALUES ('schema_version', ?)", [str(LATEST)])
        # Every table the migrations create that ingest servers do not write (the model's
        # result tables, meta, and whatever later migrations add, e.g. web users).
        made = self.con.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'main'"
        ).fetchall()
        self._results = sorted(t for (t,) in made if t not in INGEST_TABLES)
        self._cache = ManifestCache()
        self._fixed = snapshot is not None
        self._snapshot = snapshot or take_snapshot(self.root, self._cache)
        self._views: dict[str, str] = {}
        self._dirty: set[str] = set()
        self._wrote = False
        self._in_tx = False
        self.journal: list[tuple[Any, ...]] | None = [] if journal else None
        self._lock = FileLock(self.root / "_locks" / "results.lock")
        self.publishing = not read_only and not journal and self._lock.acquire()
        self._head_version = -1
        self._lazy: dict[str, str] = {}  # result table -> snapshot file it still reads
        self._copied: set[str] = set()  # result tables in memory (written here)
        self._load_results(self._snapshot.results)
        self._make_views()

    # -- results -----------------------------------------------------------------------
    def _load_results(self, head: dict[str, Any]) -> None:
        """Result tables read their published snapshot through a view until this process
        first writes them (then they are copied into memory): a task that only reads a
        few findings never loads every table."""
        if head.get("schema_version", 0) > LATEST:
            raise StoreError(
                f"{self.root} has results of schema version {head['schema_version']}; this "
                f"iolens knows up to {LATEST}. Upgrade iolens."
            )
        for table, name in head.get("tables", {}).items():
            if table not in self._results or table in self._copied or self._lazy.get(table) == name:
                continue
            path = str(self.root / "_results" / name).replace("'", "''")
            self.con.execute(
                f'CREATE OR REPLACE TEMP VIEW "{table}" AS SELECT * FROM memory.main."{table}" '
                f"UNION ALL BY NAME SELECT * FROM read_parquet('{path}')"
            )
            self._lazy[table] = name
        self._head_version = int(head.get("version", 0))

    def _materialize(self, table: str) -> None:
        self._copied.add(table)
        name = self._lazy.pop(table, None)
        if name is None:
            return
        path = str(self.root / "_results" / name).replace("'", "''")
        self.con.execute(f'DROP VIEW temp."{table}"')
        self.con.execute(
            f"INSERT INTO memory.main.\"{table}\" BY NAME SELECT * FROM read_parquet('{path}')"
        )

    def publish(self) -> None:
        """Write changed result tables and a new HEAD (the results writer only)."""
        if not self._dirty or not self.publishing:
            return
        head = read_head(self.root)
        version = int(head.get("version", 0)) + 1
        tables = dict(head.get("tables", {}))
        out = self.root / "_results"
        for table in sorted(self._dirty):
            name = f"{table}-{version:08d}.parquet"
            tmp = out / f".{name}.tmp"
            self.con.execute(
                f"COPY (SELECT * FROM memory.main.\"{table}\") TO '{tmp}' "
                "(FORMAT parquet, COMPRESSION zstd)"
            )
            os.rename(tmp, out / name)
            tables[table] = name
        atomic_write(
            out / "HEAD.json",
            json.dumps(
                {"version": version, "schema_version": LATEST, "tables": tables},
                sort_keys=True,
            ),
        )
        self._dirty.clear()
        self._head_version = version
        self._cleanup_results(set(tables.values()))

    def _cleanup_results(self, keep: set[str], grace_s: float = 600.0) -> None:
        now = time.time()
        for p in (self.root / "_results").glob("*.parquet"):
            if p.name not in keep:
                with contextlib.suppress(OSError):
                    if now - p.stat().st_mtime > grace_s:
                        p.unlink()

    # -- listing -----------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The files and results head this store reads (publish first to include writes)."""
        self.publish()
        snap = self._snapshot
        return Snapshot(snap.root, snap.files, read_head(self.root), snap.taken)

    def refresh(self, force: bool = True) -> None:
        """Pick up new segments (and, unless this process writes results, new results)."""
        if self._fixed or self._in_tx:
            return
        if not force and time.time() - self._snapshot.taken < self.refresh_s:
            return
        snap = take_snapshot(self.root, self._cache)
        if snap.files != self._snapshot.files:
            self._snapshot = snap
            self._make_views()
        else:
            self._snapshot.taken = snap.taken
        if (
            not self.publishing
            and not self._wrote
            and snap.results.get("version", 0) > max(0, self._head_version)
        ):
            self._load_results(snap.results)

    def _make_views(self) -> None:
        files = self._snapshot.files
        for table in INGEST_TABLES:
            sql = view_sql(table, self.root, files.get(table, []), files.get(MERGED, []))
            if not sql:
                empty = f"_iolens_empty_{table}"
                self.con.register(empty, TABLES[table].empty_table())
                sql = f"SELECT {_cols(table)} FROM {empty}"
            jobs = self._snapshot.jobs
            if jobs is not None and table in ("client_io", "server_samples"):
                quoted = ", ".join("'" + j.replace("'", "''") + "'" for j in jobs) or "NULL"
                sql = f"SELECT * FROM ({sql}) WHERE job_id IN ({quoted})"
            if self._views.get(table) != sql:
                self.con.execute(f'CREATE OR REPLACE TEMP VIEW "{table}" AS {sql}')
                self._views[table] = sql

    # -- Store protocol ----------------------------------------------------------------
    def append(self, table: str, data: pa.Table) -> int:
        schema = TABLES.get(table)
        if schema is None:
            raise ValueError(f"unknown table {table!r}")
        if table in INGEST_TABLES:
            raise StoreError(
                f"{self.root}: {table} is written by the ingest servers (iolens serve --group)"
            )
        if data.num_rows == 0:
            return 0
        data = data.select(schema.names).cast(schema)
        self._materialize(table)
        self.con.register("_iolens_append", data)
        try:
            self.con.execute(
                f'INSERT INTO memory.main."{table}" BY NAME SELECT * FROM _iolens_append'
            )
        finally:
            self.con.unregister("_iolens_append")
        self._note(table)
        if self.journal is not None:
            self.journal.append(("append", table, data))
        return data.num_rows

    def query(self, sql: str, params: Sequence[Any] = ()) -> pa.Table:
        self.refresh(force=False)
        return arrow_query(self.con, sql, params, str(self.root))

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        m = _WRITE_RE.match(sql)
        if m and m.group(1) in INGEST_TABLES:
            raise StoreError(f"{self.root}: {m.group(1)} is read-only here (ingest servers own it)")
        if m:
            self._materialize(m.group(1))
        try:
            self.con.execute(sql, list(params))
        except duckdb.Error as exc:
            raise StoreError(f"{self.root}: {first_line(exc)}") from exc
        if m:
            self._note(m.group(1))
        if self.journal is not None:
            self.journal.append(("execute", sql, list(params)))

    def _note(self, table: str) -> None:
        self._dirty.add(table)
        self._wrote = True
        if not self._in_tx:
            self.publish()

    def register(self, name: str, data: pa.Table) -> None:
        self.con.register(name, data)
        if self.journal is not None:
            self.journal.append(("register", name, data))

    def unregister(self, name: str) -> None:
        self.con.unregister(name)
        if self.journal is not None:
            self.journal.append(("unregister", name))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        mark = len(self.journal) if self.journal is not None else 0
        self.con.execute("BEGIN TRANSACTION")
        self._in_tx = True
        if self.journal is not None:
            self.journal.append(("begin",))
        try:
            yield
        except BaseException:
            self._in_tx = False
            self.con.execute("ROLLBACK")
            if self.journal is not None:
                del self.journal[mark:]  # nothing of a rolled-back block is replayed
            raise
        self._in_tx = False
        self.con.execute("COMMIT")
        if self.journal is not None:
            self.journal.append(("commit",))
        self.publish()

    def close(self) -> None:
        try:
            self.publish()
        finally:
            self._lock.release()
            self.con.close()

    def __enter__(self) -> DatasetStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def replay(journal: list[tuple[Any, ...]], store: Any) -> None:
    """Apply the writes a journaling store recorded, in order, to `store`."""
    stack: list[contextlib.AbstractContextManager[None]] = []
    for entry in journal:
        op = entry[0]
        if op == "begin":
            tx = store.transaction()
            tx.__enter__()
            stack.append(tx)
        elif op == "commit":
            stack.pop().__exit__(None, None, None)
        elif op == "append":
            store.append(entry[1], entry[2])
        elif op == "execute":
            store.execute(entry[1], entry[2])
        elif op == "register":
            store.register(entry[1], entry[2])
        elif op == "unregister":
            store.unregister(entry[1])
    if stack:
        raise StoreError("journal ends inside a transaction")
