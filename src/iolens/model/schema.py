"""The iolens data model: one Arrow schema per table, shared by every layer.

Collectors, importers and the simulator build Arrow tables with these schemas; the
store creates its DuckDB tables from them; analyses read them back. Keeping the
columns in one place is what lets the tracer decoder, the agent and the simulator
feed the same ingest path. `docs/data-model.md` explains each column.

Conventions: times are UTC `timestamp[us]`; byte and op counts are int64; component
and node ids are the site's own names (host names, Lustre target names).
"""

from __future__ import annotations

import pyarrow as pa

#: Bumped whenever a table or column changes; the store migrates older files.
SCHEMA_VERSION = 13

TS = pa.timestamp("us")

#: Component kinds of the cluster topology (`mdt`: a metadata target, served by an `mds`;
#: `service`: any other node a site names, e.g. a data mover).
COMPONENT_KINDS = (
    "compute", "forwarder", "oss", "ost", "mds", "mdt", "switch", "login", "service",
)  # fmt: skip

#: Operation names in client records. Data ops move bytes; the rest are metadata.
DATA_OPS = ("read", "write")
METADATA_OPS = (
    "open",
    "close",
    "stat",
    "unlink",
    "rename",
    "mkdir",
    "rmdir",
    "fsync",
    "seek",
    "mmap",
    "dup",
    "flush",
    # trace format 6: truncate/fallocate, posix_fadvise, access, link/symlink, readdir entries
    "truncate",
    "fadvise",
    "access",
    "link",
    "readdir",
)
OPS = DATA_OPS + METADATA_OPS
#: Metadata ops that reach the metadata server (Beacon's "metadata operations"); readdir
#: counts directory entries read (several per request), fadvise stays on the client.
MDS_OPS = (
    "open", "close", "stat", "unlink", "rename", "mkdir", "rmdir",
    "truncate", "access", "link", "readdir",
)  # fmt: skip

IO_MODES = ("N-N", "N-1", "N-M", "1-1")

COMPONENTS = pa.schema(
    [
        pa.field("component_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        # The host that serves this component: an OST's OSS, a compute node's leaf switch.
        pa.field("parent", pa.string()),
        # Benchmarked peak bandwidth (bytes/s) and ops/s, used for load levels.
        pa.field("peak_bw", pa.float64()),
        pa.field("peak_ops", pa.float64()),
    ]
)

# Static compute -> I/O forwarding node mapping (Beacon section 2).
FORWARDING = pa.schema(
    [
        pa.field("compute_node", pa.string(), nullable=False),
        pa.field("forwarder", pa.string(), nullable=False),
    ]
)

# Other names of a host (schema version 6): Lustre NIDs (`10.0.0.11@o2ib`), IP addresses,
# short or long host names, so a server file that names a client by its NID (Lustre
# `exports/<nid>/stats`) names the host.
COMPONENT_ALIASES = pa.schema(
    [
        pa.field("alias", pa.string(), nullable=False),
        pa.field("component_id", pa.string(), nullable=False),
    ]
)

JOBS = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("user", pa.string(), nullable=False),
        pa.field("app", pa.string()),
        pa.field("nodes", pa.list_(pa.string())),
        pa.field("nprocs", pa.int32()),
        pa.field("start", TS),
        pa.field("end", TS),
        pa.field("state", pa.string()),
        # Where the job record came from: "slurm", "tracer", "darshan", "simulator"...
        pa.field("source", pa.string()),
    ]
)

#: How much each source's view of a job counts when several describe it: the accounting
#: database (sacct) over the prolog/epilog hook over anything else over one process's
#: trace. A view of the ended job (its `end` known) beats one of the running job first, so a
#: late prolog or epilog never undoes sacct's final record, while an epilog still completes
#: a record sacct took while the job ran.
JOB_SOURCE_RANK = {"slurm": 3, "slurm-hook": 2, "tracer": 0}


def job_precedence_sql(alias: str) -> str:
    """SQL for the precedence of `alias`'s job row (see `JOB_SOURCE_RANK`); higher wins."""
    ranks = " ".join(f"WHEN '{s}' THEN {r}" for s, r in JOB_SOURCE_RANK.items())
    return f'(({alias}."end" IS NOT NULL)::INTEGER * 10 + CASE {alias}.source {ranks} ELSE 1 END)'


#: Tables whose rows merge by key when loaded (`iolens.ingest.load`, and the same in the
#: scale-out dataset's views): a new row replaces the stored row of its key column by
#: column, except where it is null - a partial view (a trace that saw a file but not its
#: layout, an agent that knows an OST's server but not its peak) keeps what is known.
#: Jobs merge too, by source precedence (`job_precedence_sql`).
#: Nullable columns added after agents shipped the table without them: a batch that lacks
#: one (an older agent, another producer) gets NULLs instead of being refused.
LATER_COLUMNS = {"server_samples": ("source",)}

MERGED_BY_KEY = {
    "files": "file_id",
    "components": "component_id",
    "forwarding": "compute_node",
    "component_aliases": "alias",
}

FILES = pa.schema(
    [
        pa.field("file_id", pa.int64(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
        pa.field("stripe_size", pa.int64()),
        # OST ids the file stripes over, in stripe order (Lustre `lfs getstripe`).
        pa.field("osts", pa.list_(pa.string())),
    ]
)

# MPI-IO hints a traced process opened a file with (the tracer's HINTS section): what the
# application passed, or with IOLENS_MPI_HINTS the effective values the MPI library
# reported. `hints` is "key=value;key=value", keys sorted; one row per (process, file).
MPI_HINTS = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("file_id", pa.int64(), nullable=False),
        pa.field("node", pa.string()),
        pa.field("pid", pa.int32()),
        pa.field("rank", pa.int32()),
        pa.field("hints", pa.string(), nullable=False),
    ]
)

#: Level of each client I/O layer, lowest 0: an upper layer's calls are carried out by
#: calls of the layers below, which are recorded too (HDF5 over MPI-IO over POSIX, as
#: Darshan keeps its H5D, PnetCDF, MPI-IO and POSIX modules), so each I/O counts from one
#: level only. A layer not listed (None, a future one) is level 0.
LAYER_LEVELS = {"posix": 0, "stdio": 0, "mpiio": 1, "hdf5": 2, "pnetcdf": 2}
UPPER_LAYERS = tuple(name for name, level in LAYER_LEVELS.items() if level > 0)


def layer_level_sql(column: str = "layer") -> str:
    """SQL for the level (LAYER_LEVELS) of the layer in `column`."""
    whens = " ".join(f"WHEN '{n}' THEN {lv}" for n, lv in LAYER_LEVELS.items() if lv)
    return f"(CASE {column} {whens} ELSE 0 END)"


# Client I/O records in the tracer's compressed form (Beacon first-pass compression):
# `count` ops of `size` bytes each, the k-th at offset + k*stride, between t_start and t_end.
CLIENT_IO = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("node", pa.string(), nullable=False),
        pa.field("rank", pa.int32()),
        pa.field("pid", pa.int32()),
        pa.field("layer", pa.string()),
        pa.field("op", pa.string(), nullable=False),
        pa.field("file_id", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("size", pa.int64()),
        pa.field("stride", pa.int64()),
        pa.field("count", pa.int64(), nullable=False),
        pa.field("t_start", TS, nullable=False),
        pa.field("t_end", TS, nullable=False),
        # Total time spent inside the merged calls, in nanoseconds.
        pa.field("dur_ns", pa.int64()),
    ]
)

# Server-side samples: deltas over (ts - interval_s, ts]. A row with job_id set is that
# job's share (Lustre jobstats, or forwarder requests attributed through the client node).
SERVER_SAMPLES = pa.schema(
    [
        pa.field("ts", TS, nullable=False),
        pa.field("interval_s", pa.float64(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("component_id", pa.string(), nullable=False),
        pa.field("job_id", pa.string()),
        pa.field("read_bytes", pa.int64()),
        pa.field("write_bytes", pa.int64()),
        pa.field("read_ops", pa.int64()),
        pa.field("write_ops", pa.int64()),
        pa.field("md_ops", pa.int64()),
        # Mean request wait (queueing) and service time over the interval, microseconds.
        pa.field("wait_us", pa.float64()),
        pa.field("service_us", pa.float64()),
        pa.field("queue_len", pa.float64()),
        pa.field("active_threads", pa.float64()),
        # NULL: the server's own counters. 'trace': a job's row attributed from its traced
        # calls and its files' layouts, for servers with no per-job statistics (MooseFS);
        # its `service_us` is then the client-side time per call (ingest/traced_targets.py).
        pa.field("source", pa.string()),
    ]
)

# Every other server-side metric an agent reads (per-op Lustre stats, histograms, IB port
# counters, node load), in long form: one value per (time, component, metric). Counters
# arrive as per-second rates over the interval; gauges as read.
METRICS = pa.schema(
    [
        pa.field("ts", TS, nullable=False),
        pa.field("interval_s", pa.float64()),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("component_id", pa.string(), nullable=False),
        pa.field("job_id", pa.string()),
        pa.field("metric", pa.string(), nullable=False),
        pa.field("value", pa.float64(), nullable=False),
    ]
)

FINDINGS = pa.schema(
    [
        pa.field("subject_kind", pa.string(), nullable=False),  # job | component | system
        pa.field("subject_id", pa.string(), nullable=False),
        pa.field("code", pa.string(), nullable=False),
        pa.field("name", pa.string(), nullable=False),
        pa.field("severity", pa.string(), nullable=False),  # info | warning | critical
        pa.field("start", TS),
        pa.field("end", TS),
        pa.field("evidence", pa.string()),  # JSON object
        pa.field("recommendation", pa.string()),
        pa.field("created", TS),
        # schema version 3: who should act (user | developer | admin) and the estimated
        # gain as JSON ({"metric": "bandwidth", "factor": 4.0, "basis": "..."})
        pa.field("target", pa.string()),
        pa.field("gain", pa.string()),
    ]
)

# Per-job derived figures, cached by the analysis pipeline for fast listings
# (Beacon keeps the same summary per job in its job database).
JOB_SUMMARIES = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("io_mode", pa.string()),
        pa.field("read_bytes", pa.int64()),
        pa.field("write_bytes", pa.int64()),
        pa.field("read_bw_avg", pa.float64()),
        pa.field("read_bw_peak", pa.float64()),
        pa.field("write_bw_avg", pa.float64()),
        pa.field("write_bw_peak", pa.float64()),
        pa.field("iops_avg", pa.float64()),
        pa.field("md_ops", pa.int64()),
        pa.field("md_ops_rate", pa.float64()),
        pa.field("io_procs", pa.int32()),
        pa.field("io_nodes", pa.int32()),
        pa.field("io_time_s", pa.float64()),
        pa.field("findings", pa.int32()),
        pa.field("analyzed", TS),
    ]
)

# Keys of batches already loaded, so re-imported files and re-sent batches are not
# counted twice (agents retry; users re-run imports).
INGESTED = pa.schema(
    [
        pa.field("key", pa.string(), nullable=False),
        pa.field("source", pa.string()),
        pa.field("rows", pa.int64()),
        pa.field("loaded_at", TS),
    ]
)

# --- diagnosis results (schema version 2) ---------------------------------------------

# Component anomaly episodes (Beacon Table 2): a forwarder, OST, MDS or switch behaving
# abnormally from `start` to `end` (`end` null while ongoing). `kind` is the detector's
# verdict: slow_ost, slow_forwarder, metadata_storm, cache_thrashing, n1_interference,
# low_bandwidth, ... `component_id` uses the topology's ids.
ANOMALIES = pa.schema(
    [
        pa.field("kind", pa.string(), nullable=False),
        pa.field("component_kind", pa.string(), nullable=False),
        pa.field("component_id", pa.string(), nullable=False),
        pa.field("start", TS, nullable=False),
        pa.field("end", TS),
        pa.field("severity", pa.string(), nullable=False),  # info | warning | critical
        pa.field("evidence", pa.string()),  # JSON object
        pa.field("detector", pa.string()),  # the analysis plug-in that found it
        pa.field("created", TS),
    ]
)

# Who hurt whom: the victim job lost about `delay_s` seconds of I/O time while the culprit
# job's `feature` (n1, high_bw, high_iops, high_md) loaded the shared component.
INTERFERENCE = pa.schema(
    [
        pa.field("victim", pa.string(), nullable=False),
        pa.field("culprit", pa.string(), nullable=False),
        pa.field("component_id", pa.string(), nullable=False),
        pa.field("feature", pa.string(), nullable=False),
        pa.field("start", TS),
        pa.field("end", TS),
        pa.field("delay_s", pa.float64(), nullable=False),
        pa.field("score", pa.float64()),  # ranking within the victim, higher = surer
        pa.field("evidence", pa.string()),  # JSON object
        pa.field("created", TS),
    ]
)

# I/O phases of a job, found on its bandwidth series (wavelet transform, IOSI/Beacon).
JOB_PHASES = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("phase", pa.int32(), nullable=False),
        pa.field("start", TS, nullable=False),
        pa.field("end", TS, nullable=False),
        pa.field("read_bytes", pa.int64()),
        pa.field("write_bytes", pa.int64()),
        pa.field("md_ops", pa.int64()),
        pa.field("bw", pa.float64()),  # bytes/s over the phase
        pa.field("anomalous", pa.bool_()),  # outlier against earlier runs (DBSCAN)
        # first to last second moving its volume (edges' opens and unlinks left out): the
        # time earlier runs' phases are compared on; NULL before schema version 11
        pa.field("busy_s", pa.float64()),
    ]
)

# Alerts already sent, one row per (episode, channel): no repeats for an ongoing episode.
ALERTS = pa.schema(
    [
        pa.field("episode", pa.string(), nullable=False),  # kind:component:start
        pa.field("channel", pa.string(), nullable=False),  # email | webhook
        pa.field("sent_at", TS, nullable=False),
        pa.field("ok", pa.bool_(), nullable=False),
        pa.field("detail", pa.string()),
    ]
)

# --- Darshan logs and the zoom-in factors (schema version 3) ---------------------------

# One row per imported Darshan log (a job may have several: one per executable run).
# `modules` is JSON {name: {"version": int, "records": int, "partial": bool}}: the
# partial flags (Darshan ran out of records or memory) are kept and shown.
DARSHAN_LOGS = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("log_key", pa.string(), nullable=False),  # content hash: idempotent imports
        pa.field("path", pa.string()),
        pa.field("log_version", pa.string()),
        pa.field("lib_version", pa.string()),
        pa.field("exe", pa.string()),
        pa.field("uid", pa.int64()),
        pa.field("nprocs", pa.int32()),
        pa.field("start", TS),
        pa.field("end", TS),
        pa.field("run_time_s", pa.float64()),
        pa.field("metadata", pa.string()),  # JSON object: lib_ver, h (Darshan's own log hints)
        pa.field("mounts", pa.string()),  # JSON [[mount point, fs type], ...]
        pa.field("modules", pa.string()),  # JSON, see above
        pa.field("imported", TS),
    ]
)

# Counter names per (log, module): records store values only, in this order.
DARSHAN_MODULES = pa.schema(
    [
        pa.field("log_key", pa.string(), nullable=False),
        pa.field("module", pa.string(), nullable=False),
        pa.field("version", pa.int32()),
        pa.field("partial", pa.bool_()),
        pa.field("counter_names", pa.list_(pa.string())),
        pa.field("fcounter_names", pa.list_(pa.string())),
    ]
)

# One row per Darshan record (module, file, rank; rank -1 = shared file reduced over all
# ranks). `record_id` is Darshan's 64-bit name hash stored as signed int64.
DARSHAN_RECORDS = pa.schema(
    [
        pa.field("log_key", pa.string(), nullable=False),
        pa.field("module", pa.string(), nullable=False),
        pa.field("record_id", pa.int64(), nullable=False),
        pa.field("rank", pa.int32()),
        pa.field("path", pa.string()),
        pa.field("counters", pa.list_(pa.int64())),
        pa.field("fcounters", pa.list_(pa.float64())),
    ]
)

# The zoom-in paper's Table I factors per job (NaN/null when the data cannot tell), and the
# job's bandwidth they are correlated against.
JOB_FACTORS = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("user", pa.string()),
        pa.field("app", pa.string()),
        pa.field("bandwidth", pa.float64()),  # bytes/s over the job's I/O time
        pa.field("datasize", pa.float64()),  # 1: bytes read + written
        pa.field("nprocs", pa.float64()),  # 2
        pa.field("nnodes", pa.float64()),  # 3
        pa.field("mtime_pct", pa.float64()),  # 4: metadata time / I/O time, %
        pa.field("collective", pa.float64()),  # 5: 1 when collective MPI-IO is used
        pa.field("ost_count", pa.float64()),  # 6
        pa.field("small_pct", pa.float64()),  # 7: requests < 1 KiB, %
        pa.field("seq_pct", pa.float64()),  # 8: sequential requests, %
        pa.field("max_rank_io", pa.float64()),  # 9: S_max / sum S_i (Equation 1)
        pa.field("max_rank_req", pa.float64()),  # 10: same, request counts
        pa.field("max_ost_io", pa.float64()),  # 11: busiest OST's bytes / all
        pa.field("max_ost_req", pa.float64()),  # 12: busiest OST's requests / all
        pa.field("oss_cpu_pct", pa.float64()),  # 13: weather, 5 s before start
        pa.field("mds_cpu_pct", pa.float64()),  # 14
        pa.field("ost_io_mb", pa.float64()),  # 15
        pa.field("computed", TS),
    ]
)

#: The zoom-in paper's 15 factors (Table I), in its order: JOB_FACTORS' measured columns.
ZOOMIN_FACTORS = tuple(JOB_FACTORS.names[JOB_FACTORS.names.index("datasize") : -1])

# --- IO500 results (schema version 4) --------------------------------------------------

# One row per imported IO500 run (a result directory). `run_id` is the directory's name;
# (system, run_id) is the key a re-import replaces. Scores are IO500's own: bandwidth in
# GiB/s, metadata in kIOPS. `config` is JSON: the parsed config.ini / config-orig.ini (or
# the io500.sh variables of the 2018 format), empty values dropped.
IO500_RUNS = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("system", pa.string(), nullable=False),
        pa.field("api", pa.string()),  # IOR's API: POSIX, MPIIO, DFS, ...
        pa.field("path", pa.string()),
        pa.field("format", pa.string()),  # "io500" (C app, 2020-) | "io500.sh" (2018-19)
        pa.field("version", pa.string()),  # e.g. io500-isc24_v3
        pa.field("mode", pa.string()),  # standard | extended
        pa.field("nodes", pa.int32()),
        pa.field("procs", pa.int32()),
        pa.field("timestamp", TS),  # start of the run (site time as written, or --tz)
        pa.field("score", pa.float64()),
        pa.field("bw_score", pa.float64()),  # GiB/s
        pa.field("md_score", pa.float64()),  # kIOPS
        pa.field("valid", pa.bool_()),  # false when IO500 marked the score [INVALID]
        pa.field("config", pa.string()),  # JSON object
        pa.field("imported", TS),
    ]
)

# One row per phase of an IO500 run: its result and, where the directory has them, the
# per-rank figures behind the tail (stonewall progress, per-rank runtimes from the CSVs).
IO500_PHASES = pa.schema(
    [
        pa.field("system", pa.string(), nullable=False),
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("phase", pa.string(), nullable=False),  # ior-easy-write, mdtest-hard-stat...
        pa.field("value", pa.float64()),
        pa.field("unit", pa.string()),  # GiB/s | kIOPS
        pa.field("time_s", pa.float64()),  # the phase's runtime
        pa.field("valid", pa.bool_()),
        pa.field("t_start", TS),
        pa.field("t_end", TS),
        pa.field("value_stonewall", pa.float64()),  # rate up to the stonewall, same unit
        pa.field("command", pa.string()),  # the ior / mdtest / pfind command line
        pa.field("latency_s", pa.float64()),  # IOR's Latency(s) column, as printed
        # Work done by the slowest and fastest rank at the stonewall (IOR pairs, mdtest items)
        pa.field("rank_items_min", pa.int64()),
        pa.field("rank_items_max", pa.int64()),
        # Per-rank runtime percentiles (s), from the per-rank CSVs
        pa.field("rank_time_p50", pa.float64()),
        pa.field("rank_time_p90", pa.float64()),
        pa.field("rank_time_p99", pa.float64()),
        pa.field("rank_time_max", pa.float64()),
    ]
)

# --- Web UI accounts (schema version 5) -------------------------------------------------

# Built-in accounts of the web UI and REST API (`iolens user add`). Only a salted scrypt hash
# of each API token is kept (`scrypt$KEYID$N$R$P$SALT$DIGEST`, hex); the key id, also the
# token's prefix, finds the row without trying every hash. A user sees only jobs whose
# `jobs.user` is `name`; an admin sees everything.
USERS = pa.schema(
    [
        pa.field("name", pa.string(), nullable=False),
        pa.field("admin", pa.bool_(), nullable=False),
        pa.field("token_hash", pa.string(), nullable=False),
        pa.field("created", TS),
        pa.field("expires", TS),  # the token's end (NULL: created + 90 days, an old token)
        pa.field("revoked", TS),  # `iolens user revoke`: token and sessions end
        pa.field("generation", pa.int32()),  # sessions carry it; a revoke bumps it
    ]
)

# --- Per-job analysis errors (schema version 7, issue 19) ------------------------------

# An analysis that raised on one job: which (`report`, `diagnosis`, or a rule's code), the
# error, and the job's data stamp then (`store.queries.data_stamps`). Reads show it and do
# not retry the job until its data changes or someone re-runs `iolens analyze`.
ANALYSIS_ERRORS = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("analysis", pa.string(), nullable=False),
        pa.field("error", pa.string(), nullable=False),
        pa.field("iolens_version", pa.string()),
        pa.field("failed_at", TS),
        pa.field("data_stamp", pa.string()),
    ]
)

# --- Owner alerts (schema version 10, issue 22) -----------------------------------------

# A user's wish to hear about findings on their own jobs: one row per (user, channel),
# `target` the address (email) or URL (webhook). Sends are rows of `alerts`, keyed
# `job:JOB:CODE:USER`, so each (job, finding) reaches each channel once.
SUBSCRIPTIONS = pa.schema(
    [
        pa.field("user", pa.string(), nullable=False),
        pa.field("channel", pa.string(), nullable=False),  # email | webhook
        pa.field("target", pa.string(), nullable=False),
        pa.field("created", TS),
    ]
)

#: A trace-only job's row widened to all its processes (`store.queries.refresh_traced_jobs`)
#: where the analysis may not change `jobs`: on a scaled-out dataset the ingest servers own
#: it, and its view reads these columns through this table.
TRACED_JOBS = pa.schema(
    [
        pa.field("job_id", pa.string(), nullable=False),
        pa.field("nodes", pa.list_(pa.string())),
        pa.field("nprocs", pa.int32()),
        pa.field("start", TS),
        pa.field("end", TS),
    ]
)

#: Every table of the store, by name.
TABLES: dict[str, pa.Schema] = {
    "components": COMPONENTS,
    "forwarding": FORWARDING,
    "component_aliases": COMPONENT_ALIASES,
    "jobs": JOBS,
    "files": FILES,
    "client_io": CLIENT_IO,
    "mpi_hints": MPI_HINTS,
    "server_samples": SERVER_SAMPLES,
    "metrics": METRICS,
    "findings": FINDINGS,
    "job_summaries": JOB_SUMMARIES,
    "ingested": INGESTED,
    "anomalies": ANOMALIES,
    "interference": INTERFERENCE,
    "job_phases": JOB_PHASES,
    "alerts": ALERTS,
    "darshan_logs": DARSHAN_LOGS,
    "darshan_modules": DARSHAN_MODULES,
    "darshan_records": DARSHAN_RECORDS,
    "job_factors": JOB_FACTORS,
    "io500_runs": IO500_RUNS,
    "io500_phases": IO500_PHASES,
    "users": USERS,
    "analysis_errors": ANALYSIS_ERRORS,
    "subscriptions": SUBSCRIPTIONS,
    "traced_jobs": TRACED_JOBS,
}
