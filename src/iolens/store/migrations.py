"""Schema migrations for the embedded store, applied in order on open.

Each migration is frozen once released: a later schema change is a new entry, never an
edit of an old one. `tests/store/test_migrations.py` checks that the migrated tables
match `iolens.model.schema.TABLES`, so the Arrow model and the SQL cannot drift apart.
"""

from __future__ import annotations

MIGRATIONS: list[tuple[int, str]] = [
    (
        1,
        """
        CREATE TABLE components (
            component_id VARCHAR NOT NULL, kind VARCHAR NOT NULL, parent VARCHAR,
            peak_bw DOUBLE, peak_ops DOUBLE);
        CREATE TABLE forwarding (compute_node VARCHAR NOT NULL, forwarder VARCHAR NOT NULL);
        CREATE TABLE jobs (
            job_id VARCHAR NOT NULL, "user" VARCHAR NOT NULL, app VARCHAR, nodes VARCHAR[],
            nprocs INTEGER, "start" TIMESTAMP, "end" TIMESTAMP, state VARCHAR, source VARCHAR);
        CREATE TABLE files (
            file_id BIGINT NOT NULL, path VARCHAR NOT NULL, stripe_size BIGINT, osts VARCHAR[]);
        CREATE TABLE client_io (
            job_id VARCHAR NOT NULL, node VARCHAR NOT NULL, rank INTEGER, pid INTEGER,
            layer VARCHAR, op VARCHAR NOT NULL, file_id BIGINT, "offset" BIGINT, size BIGINT,
            stride BIGINT, count BIGINT NOT NULL, t_start TIMESTAMP NOT NULL,
            t_end TIMESTAMP NOT NULL, dur_ns BIGINT);
        CREATE TABLE server_samples (
            ts TIMESTAMP NOT NULL, interval_s DOUBLE NOT NULL, kind VARCHAR NOT NULL,
            component_id VARCHAR NOT NULL, job_id VARCHAR, read_bytes BIGINT,
            write_bytes BIGINT, read_ops BIGINT, write_ops BIGINT, md_ops BIGINT,
            wait_us DOUBLE, service_us DOUBLE, queue_len DOUBLE, active_threads DOUBLE);
        CREATE TABLE metrics (
            ts TIMESTAMP NOT NULL, interval_s DOUBLE, kind VARCHAR NOT NULL,
            component_id VARCHAR NOT NULL, job_id VARCHAR, metric VARCHAR NOT NULL,
            value DOUBLE NOT NULL);
        CREATE TABLE findings (
            subject_kind VARCHAR NOT NULL, subject_id VARCHAR NOT NULL, code VARCHAR NOT NULL,
            name VARCHAR NOT NULL, severity VARCHAR NOT NULL, "start" TIMESTAMP,
            "end" TIMESTAMP, evidence VARCHAR, recommendation VARCHAR, created TIMESTAMP);
        CREATE TABLE job_summaries (
            job_id VARCHAR NOT NULL, io_mode VARCHAR, read_bytes BIGINT, write_bytes BIGINT,
            read_bw_avg DOUBLE, read_bw_peak DOUBLE, write_bw_avg DOUBLE, write_bw_peak DOUBLE,
            iops_avg DOUBLE, md_ops BIGINT, md_ops_rate DOUBLE, io_procs INTEGER,
            io_nodes INTEGER, io_time_s DOUBLE, findings INTEGER, analyzed TIMESTAMP);
        CREATE TABLE ingested (
            key VARCHAR NOT NULL, source VARCHAR, rows BIGINT, loaded_at TIMESTAMP);
        """,
    ),
    (
        2,
        """
        CREATE TABLE anomalies (
            kind VARCHAR NOT NULL, component_kind VARCHAR NOT NULL,
            component_id VARCHAR NOT NULL, "start" TIMESTAMP NOT NULL, "end" TIMESTAMP,
            severity VARCHAR NOT NULL, evidence VARCHAR, detector VARCHAR, created TIMESTAMP);
        CREATE TABLE interference (
            victim VARCHAR NOT NULL, culprit VARCHAR NOT NULL, component_id VARCHAR NOT NULL,
            feature VARCHAR NOT NULL, "start" TIMESTAMP, "end" TIMESTAMP,
            delay_s DOUBLE NOT NULL, score DOUBLE, evidence VARCHAR, created TIMESTAMP);
        CREATE TABLE job_phases (
            job_id VARCHAR NOT NULL, phase INTEGER NOT NULL, "start" TIMESTAMP NOT NULL,
            "end" TIMESTAMP NOT NULL, read_bytes BIGINT, write_bytes BIGINT, md_ops BIGINT,
            bw DOUBLE, anomalous BOOLEAN);
        CREATE TABLE alerts (
            episode VARCHAR NOT NULL, channel VARCHAR NOT NULL, sent_at TIMESTAMP NOT NULL,
            ok BOOLEAN NOT NULL, detail VARCHAR);
        """,
    ),
    (
        3,
        """
        ALTER TABLE findings ADD COLUMN target VARCHAR;
        ALTER TABLE findings ADD COLUMN gain VARCHAR;
        CREATE TABLE darshan_logs (
            job_id VARCHAR NOT NULL, log_key VARCHAR NOT NULL, path VARCHAR,
            log_version VARCHAR, lib_version VARCHAR, exe VARCHAR, uid BIGINT,
            nprocs INTEGER, "start" TIMESTAMP, "end" TIMESTAMP, run_time_s DOUBLE,
            metadata VARCHAR, mounts VARCHAR, modules VARCHAR, imported TIMESTAMP);
        CREATE TABLE darshan_modules (
            log_key VARCHAR NOT NULL, module VARCHAR NOT NULL, version INTEGER,
            partial BOOLEAN, counter_names VARCHAR[], fcounter_names VARCHAR[]);
        CREATE TABLE darshan_records (
            log_key VARCHAR NOT NULL, module VARCHAR NOT NULL, record_id BIGINT NOT NULL,
            rank INTEGER, path VARCHAR, counters BIGINT[], fcounters DOUBLE[]);
        CREATE TABLE job_factors (
            job_id VARCHAR NOT NULL, "user" VARCHAR, app VARCHAR, bandwidth DOUBLE,
            datasize DOUBLE, nprocs DOUBLE, nnodes DOUBLE, mtime_pct DOUBLE,
            collective DOUBLE, ost_count DOUBLE, small_pct DOUBLE, seq_pct DOUBLE,
            max_rank_io DOUBLE, max_rank_req DOUBLE, max_ost_io DOUBLE,
            max_ost_req DOUBLE, oss_cpu_pct DOUBLE, mds_cpu_pct DOUBLE, ost_io_mb DOUBLE,
            computed TIMESTAMP);
        """,
    ),
    (
        4,
        """
        CREATE TABLE io500_runs (
            run_id VARCHAR NOT NULL, system VARCHAR NOT NULL, api VARCHAR, path VARCHAR,
            format VARCHAR, version VARCHAR, mode VARCHAR, nodes INTEGER, procs INTEGER,
            "timestamp" TIMESTAMP, score DOUBLE, bw_score DOUBLE, md_score DOUBLE,
            valid BOOLEAN, config VARCHAR, imported TIMESTAMP);
        CREATE TABLE io500_phases (
            system VARCHAR NOT NULL, run_id VARCHAR NOT NULL, phase VARCHAR NOT NULL,
            value DOUBLE, unit VARCHAR, time_s DOUBLE, valid BOOLEAN, t_start TIMESTAMP,
            t_end TIMESTAMP, value_stonewall DOUBLE, command VARCHAR, latency_s DOUBLE,
            rank_items_min BIGINT, rank_items_max BIGINT, rank_time_p50 DOUBLE,
            rank_time_p90 DOUBLE, rank_time_p99 DOUBLE, rank_time_max DOUBLE);
        """,
    ),
    (
        5,
        """
        CREATE TABLE users (
            name VARCHAR NOT NULL, admin BOOLEAN NOT NULL, token_hash VARCHAR NOT NULL,
            created TIMESTAMP);
        """,
    ),
    (
        6,
        """
        CREATE TABLE component_aliases (alias VARCHAR NOT NULL, component_id VARCHAR NOT NULL);
        """,
    ),
    # Issue 19, sessions: API tokens expire and can be revoked; a session carries its
    # account's generation, which a revoke bumps (NULLs: tokens from before, see accounts.py).
    (
        7,
        """
        ALTER TABLE users ADD COLUMN expires TIMESTAMP;
        ALTER TABLE users ADD COLUMN revoked TIMESTAMP;
        ALTER TABLE users ADD COLUMN generation INTEGER;
        """,
    ),
    (
        # issue 19, per-job analysis errors: recorded on the job, not retried on every read
        8,
        """
        CREATE TABLE analysis_errors (
            job_id VARCHAR NOT NULL, analysis VARCHAR NOT NULL, error VARCHAR NOT NULL,
            iolens_version VARCHAR, failed_at TIMESTAMP, data_stamp VARCHAR);
        """,
    ),
    (
        # issue 20: per-job rows attributed from traces (servers without jobstats) are marked
        9,
        """
        ALTER TABLE server_samples ADD COLUMN source VARCHAR;
        """,
    ),
    (
        # issue 22: owners subscribe to alerts on their own jobs' findings
        10,
        """
        CREATE TABLE subscriptions (
            "user" VARCHAR NOT NULL, channel VARCHAR NOT NULL, target VARCHAR NOT NULL,
            created TIMESTAMP);
        """,
    ),
    (
        # a phase's busy span: the history comparison leaves its edges' metadata out
        11,
        """
        ALTER TABLE job_phases ADD COLUMN busy_s DOUBLE;
        """,
    ),
    (
        # issue 23: the MPI-IO hints traced at MPI_File_open, learned by `advise`
        12,
        """
        CREATE TABLE mpi_hints (
            job_id VARCHAR NOT NULL, file_id BIGINT NOT NULL, node VARCHAR, pid INTEGER,
            rank INTEGER, hints VARCHAR NOT NULL);
        """,
    ),
    (
        # issue 22: trace-only jobs widened where `jobs` is read-only (a scaled-out dataset)
        13,
        """
        CREATE TABLE traced_jobs (
            job_id VARCHAR NOT NULL, nodes VARCHAR[], nprocs INTEGER, "start" TIMESTAMP,
            "end" TIMESTAMP);
        """,
    ),
]

LATEST = MIGRATIONS[-1][0]
