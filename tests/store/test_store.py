"""The embedded DuckDB store: migrations, appends, and clear errors on bad files."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pytest

from iolens.errors import InputError, StoreError
from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.schema import SCHEMA_VERSION, TABLES
from iolens.store import DuckDBStore
from iolens.store.migrations import LATEST

DUCK_TYPES = {
    pa.string(): "VARCHAR",
    pa.int32(): "INTEGER",
    pa.int64(): "BIGINT",
    pa.float64(): "DOUBLE",
    pa.timestamp("us"): "TIMESTAMP",
    pa.list_(pa.string()): "VARCHAR[]",
    pa.list_(pa.int64()): "BIGINT[]",
    pa.list_(pa.float64()): "DOUBLE[]",
    pa.bool_(): "BOOLEAN",
}


def test_migrated_tables_match_the_model(tmp_path):
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        assert store.schema_version() == LATEST == SCHEMA_VERSION
        for name, schema in TABLES.items():
            cols = store.query(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_name = ? ORDER BY ordinal_position",
                [name],
            ).to_pylist()
            assert [c["column_name"] for c in cols] == schema.names, name
            assert [c["data_type"] for c in cols] == [DUCK_TYPES[f.type] for f in schema], name


def test_reopen_keeps_data(tmp_path):
    path = tmp_path / "s.duckdb"
    rows = pa.table({"compute_node": ["cn1", "cn2"], "forwarder": ["f1", "f1"]})
    with DuckDBStore(path) as store:
        assert store.append("forwarding", rows) == 2
    with DuckDBStore(path, create=False) as store:
        assert store.query("SELECT count(*) AS n FROM forwarding").to_pylist() == [{"n": 2}]


def test_missing_db_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match=r"no iolens database at .*nope\.duckdb"):
        DuckDBStore(tmp_path / "nope.duckdb", create=False)


def test_corrupt_db_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.duckdb"
    bad.write_bytes(b"this is not a database" * 100)
    with pytest.raises(StoreError, match=r"bad\.duckdb"):
        DuckDBStore(bad)


def test_foreign_duckdb_file_is_refused(tmp_path):
    path = tmp_path / "other.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE customers (id INTEGER)")
    con.close()
    with pytest.raises(StoreError, match="not an iolens database"):
        DuckDBStore(path)


def test_newer_schema_is_refused(tmp_path):
    path = tmp_path / "s.duckdb"
    with DuckDBStore(path) as store:
        store.execute("UPDATE meta SET value = '999' WHERE key = 'schema_version'")
    with pytest.raises(StoreError, match="schema version 999"):
        DuckDBStore(path)


def test_directory_is_refused(tmp_path):
    with pytest.raises(StoreError, match="is a directory"):
        DuckDBStore(tmp_path)


def test_failed_batch_leaves_nothing_behind(tmp_path):
    good = pa.table({"compute_node": ["cn1"], "forwarder": ["f1"]})
    bad_jobs = pa.table({"job_id": ["1"]})  # missing required columns
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        with pytest.raises(InputError, match="jobs: missing columns"):
            load(store, Batch("test", forwarding=good, jobs=bad_jobs))
        assert store.query("SELECT count(*) AS n FROM forwarding").to_pylist() == [{"n": 0}]


def test_jobs_are_upserted_by_id(tmp_path):
    def job(state: str) -> pa.Table:
        return pa.table(
            {
                "job_id": ["7"],
                "user": ["u"],
                "app": ["a"],
                "nodes": [["n1"]],
                "nprocs": [1],
                "start": [None],
                "end": [None],
                "state": [state],
                "source": ["test"],
            }
        ).cast(TABLES["jobs"])

    with DuckDBStore(tmp_path / "s.duckdb") as store:
        load(store, Batch("t", jobs=job("RUNNING")))
        load(store, Batch("t", jobs=job("COMPLETED")))
        assert store.query("SELECT state FROM jobs").to_pylist() == [{"state": "COMPLETED"}]


def test_batch_with_a_known_key_is_skipped(tmp_path):
    rows = pa.table({"compute_node": ["cn1"], "forwarder": ["f1"]})
    other = pa.table({"compute_node": ["cn2"], "forwarder": ["f1"]})
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        assert load(store, Batch("t", key="host:1:2", forwarding=rows)) == {"forwarding": 1}
        assert load(store, Batch("t", key="host:1:2", forwarding=other)) == {}
        assert load(store, Batch("t", key="host:1:3", forwarding=other)) == {"forwarding": 1}
        assert store.query("SELECT count(*) AS n FROM forwarding").to_pylist() == [{"n": 2}]


def test_topology_and_files_merge_by_key_and_nulls_keep_what_is_known(tmp_path):
    comp = pa.schema(
        [("component_id", pa.string()), ("kind", pa.string()), ("parent", pa.string()),
         ("peak_bw", pa.float64()), ("peak_ops", pa.float64())]
    )  # fmt: skip
    site = pa.Table.from_pylist(
        [
            {
                "component_id": "fs-OST0000",
                "kind": "ost",
                "parent": None,
                "peak_bw": 2e9,
                "peak_ops": None,
            }
        ],
        schema=comp,
    )
    agent = pa.Table.from_pylist(
        [
            {"component_id": "fs-OST0000", "kind": "ost", "parent": "oss1", "peak_bw": None},
            {"component_id": "oss1", "kind": "oss", "parent": None, "peak_bw": None},
        ],
        schema=comp,
    )
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        load(store, Batch("site", components=site))
        load(store, Batch("agent", components=agent))
        load(store, Batch("agent", components=agent))  # every round: still one row each
        rows = store.query("SELECT * FROM components ORDER BY component_id").to_pylist()
        assert rows == [
            {
                "component_id": "fs-OST0000",
                "kind": "ost",
                "parent": "oss1",
                "peak_bw": 2e9,
                "peak_ops": None,
            },
            {
                "component_id": "oss1",
                "kind": "oss",
                "parent": None,
                "peak_bw": None,
                "peak_ops": None,
            },
        ]
        # a compute node moved to another forwarder: its row is replaced, others kept
        fwd = pa.table({"compute_node": ["c1", "c2"], "forwarder": ["f1", "f1"]})
        load(store, Batch("site", forwarding=fwd))
        load(
            store, Batch("site", forwarding=pa.table({"compute_node": ["c2"], "forwarder": ["f2"]}))
        )
        got = store.query("SELECT * FROM forwarding ORDER BY compute_node").to_pylist()
        assert got == [
            {"compute_node": "c1", "forwarder": "f1"},
            {"compute_node": "c2", "forwarder": "f2"},
        ]
        # a trace of a file without its layout does not erase the layout another traced
        files = pa.schema(
            [("file_id", pa.int64()), ("path", pa.string()), ("stripe_size", pa.int64()),
             ("osts", pa.list_(pa.string()))]
        )  # fmt: skip
        known = [{"file_id": 7, "path": "/l/a", "stripe_size": 1 << 20, "osts": ["fs-OST0000"]}]
        load(store, Batch("t1", files=pa.Table.from_pylist(known, schema=files)))
        unknown = [{"file_id": 7, "path": "/l/a", "stripe_size": None, "osts": None}]
        load(store, Batch("t2", files=pa.Table.from_pylist(unknown, schema=files)))
        assert store.query("SELECT * FROM files").to_pylist() == known
        # within one batch the later row wins where both say something
        two = [
            {"alias": "10.0.0.1@o2ib", "component_id": "c1"},
            {"alias": "10.0.0.1@o2ib", "component_id": "c9"},
        ]
        load(store, Batch("site", component_aliases=pa.Table.from_pylist(two)))
        got = store.query("SELECT * FROM component_aliases").to_pylist()
        assert got == [{"alias": "10.0.0.1@o2ib", "component_id": "c9"}]


def test_keep_known_jobs_does_not_clobber_the_scheduler(tmp_path):
    def job(state: str, source: str) -> pa.Table:
        return pa.table(
            {
                "job_id": ["7"],
                "user": ["u"],
                "app": ["a"],
                "nodes": [["n1"]],
                "nprocs": [1],
                "start": [None],
                "end": [None],
                "state": [state],
                "source": [source],
            }
        ).cast(TABLES["jobs"])

    with DuckDBStore(tmp_path / "s.duckdb") as store:
        load(store, Batch("slurm", jobs=job("COMPLETED", "slurm")))
        load(store, Batch("tracer", jobs=job("UNKNOWN", "tracer"), keep_known_jobs=True))
        assert store.query("SELECT source FROM jobs").to_pylist() == [{"source": "slurm"}]


def test_job_rows_merge_what_each_source_knows(tmp_path):
    from datetime import datetime

    start, end = datetime(2025, 1, 1, 8), datetime(2025, 1, 1, 9)
    prolog = pa.table(
        {
            "job_id": ["9"],
            "user": ["u"],
            "app": ["a"],
            "nodes": [["n1", "n2"]],
            "nprocs": [8],
            "start": [start],
            "end": [None],
            "state": ["RUNNING"],
            "source": ["slurm"],
        }
    ).cast(TABLES["jobs"])
    epilog = pa.table(
        {
            "job_id": ["9"],
            "user": ["u"],
            "app": [None],
            "nodes": [None],
            "nprocs": [None],
            "start": [None],
            "end": [end],
            "state": ["COMPLETED"],
            "source": ["slurm"],
        }
    ).cast(TABLES["jobs"])
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        load(store, Batch("prolog", jobs=prolog))
        load(store, Batch("epilog", jobs=epilog))
        rows = store.query("SELECT * FROM jobs").to_pylist()
    assert len(rows) == 1
    row = rows[0]
    assert (row["start"], row["end"], row["state"], row["nodes"], row["nprocs"], row["app"]) == (
        start,
        end,
        "COMPLETED",
        ["n1", "n2"],
        8,
        "a",
    )


def test_a_late_hook_does_not_undo_the_accounting_record(tmp_path):
    """sacct's record of the ended job outranks a prolog or epilog that arrives after it;
    an epilog still completes what sacct saw while the job ran."""
    from datetime import datetime

    t0, t1, late = datetime(2025, 1, 1, 8), datetime(2025, 1, 1, 9), datetime(2025, 1, 1, 10)

    def row(job: str, source: str, **cols: object) -> Batch:
        full = {n: cols.get(n) for n in TABLES["jobs"].names}
        full.update(job_id=job, user="u", source=source)
        return Batch(source, jobs=pa.Table.from_pylist([full], schema=TABLES["jobs"]))

    final = {"nodes": ["c1", "c2"], "start": t0, "end": t1, "state": "COMPLETED"}
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        load(store, row("1", "slurm", **final))
        load(store, row("1", "slurm-hook", nodes=["c1"], start=late, state="RUNNING"))
        load(store, row("1", "slurm-hook", nodes=["c1"], end=late, state="FAILED"))
        load(store, row("2", "slurm", nodes=["c3"], start=t0, state="RUNNING"))
        load(store, row("2", "slurm-hook", end=t1, state="COMPLETED"))
        got = {r["job_id"]: r for r in store.query("SELECT * FROM jobs").to_pylist()}
    assert len(got) == 2
    assert {k: got["1"][k] for k in final} == final and got["1"]["source"] == "slurm"
    assert (got["2"]["nodes"], got["2"]["start"], got["2"]["end"]) == (["c3"], t0, t1)
    assert (got["2"]["state"], got["2"]["source"]) == ("COMPLETED", "slurm-hook")


def test_a_version_1_file_is_migrated_and_keeps_its_data(tmp_path):
    import duckdb

    from iolens.store.migrations import MIGRATIONS

    path = tmp_path / "v1.duckdb"
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE meta (key VARCHAR PRIMARY KEY, value VARCHAR)")
    con.execute(MIGRATIONS[0][1])
    con.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    con.execute("INSERT INTO jobs (job_id, \"user\") VALUES ('7', 'alice')")
    con.close()
    with DuckDBStore(path) as store:
        assert store.schema_version() == LATEST
        assert store.query('SELECT "user" FROM jobs').to_pylist() == [{"user": "alice"}]
        assert store.query("SELECT count(*) AS n FROM anomalies").to_pylist() == [{"n": 0}]
