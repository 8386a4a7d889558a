"""The ingest side of the dataset: commits, restarts, keys, upserts, groups."""

from __future__ import annotations

import os
from datetime import datetime
from pathlib import Path

import pyarrow as pa
import pytest

from iolens.collect.config import AgentSection, site_server
from iolens.errors import InputError, StoreError
from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.schema import JOBS, SERVER_SAMPLES
from iolens.store import DuckDBStore
from iolens.store.dataset import DatasetStore
from iolens.store.dataset_layout import list_segments
from iolens.store.segments import SegmentWriter
from iolens.store.site_config import load_site
from iolens.store.visibility import Manifest, take_snapshot, visible

T0 = datetime(2025, 3, 3, 8, 59, 58)


def samples(n: int, start_s: int = 0, component: str = "ost1") -> pa.Table:
    ts = [T0.timestamp() + start_s + i for i in range(n)]
    return pa.table(
        {
            "ts": pa.array([int(t * 1e6) for t in ts], pa.timestamp("us")),
            "interval_s": [1.0] * n,
            "kind": ["ost"] * n,
            "component_id": [component] * n,
            "job_id": pa.nulls(n, pa.string()),
            "read_bytes": list(range(n)),
            "write_bytes": [0] * n,
            "read_ops": [1] * n,
            "write_ops": [0] * n,
            "md_ops": [0] * n,
            "wait_us": [1.0] * n,
            "service_us": [2.0] * n,
            "queue_len": [0.5] * n,
            "active_threads": [1.0] * n,
            "source": pa.nulls(n, pa.string()),
        },
        schema=SERVER_SAMPLES,
    )


def count(root: Path, table: str = "server_samples") -> int:
    with DatasetStore(root, read_only=True) as store:
        return store.query(f"SELECT count(*) AS n FROM {table}").to_pylist()[0]["n"]


def test_a_commit_spans_hours_and_lands_whole(tmp_path):
    with SegmentWriter(tmp_path / "ds", "g1", fsync=False) as w:
        counts = w.load_many([Batch("a", key="k1", server_samples=samples(5))])
    assert counts == [{"server_samples": 5}]
    files = sorted(f for f in list_segments(tmp_path / "ds") if f.startswith("server_samples"))
    assert [f.split("/")[2] for f in files] == ["hour=08", "hour=09"]  # 8:59:58 .. 9:00:02
    assert all("/group=g1/" in f for f in files)
    assert count(tmp_path / "ds") == 5


def test_a_killed_commit_is_finished_on_restart_and_hidden_until_then(tmp_path):
    root = tmp_path / "ds"
    w = SegmentWriter(root, "g1", fsync=False)
    m = w.commit({"server_samples": [samples(5)]})
    w.close()
    # As if killed after the manifest, before the second rename; and a stray staged file
    # of a commit that never reached its manifest.
    out = sorted(m.outputs)[1]
    os.rename(root / out, root / m.staged[out])
    (root / "_staging" / "g1" / "orphan.parquet").write_bytes(b"half written")
    assert count(root) == 0  # half a commit is not shown
    w2 = SegmentWriter(root, "g1", fsync=False)
    assert w2.recovered == 1
    assert not (root / "_staging" / "g1" / "orphan.parquet").exists()
    w2.close()
    assert count(root) == 5


def test_keys_survive_a_restart(tmp_path):
    root = tmp_path / "ds"
    with SegmentWriter(root, "g1", fsync=False) as w:
        assert w.load_many([Batch("a", key="k1", server_samples=samples(3))]) == [
            {"server_samples": 3}
        ]
        # repeated within one group commit, and again later: loaded once
        twice = [Batch("a", key="k2", server_samples=samples(2, 10))] * 2
        assert w.load_many(twice) == [{"server_samples": 2}, {}]
    with SegmentWriter(root, "g1", fsync=False) as w:
        assert w.load_many([Batch("a", key="k1", server_samples=samples(3))]) == [{}]
        assert len(w.keys) == 2
    assert count(root) == 5
    assert count(root, "ingested") == 2


def test_one_server_per_group(tmp_path):
    with SegmentWriter(tmp_path / "ds", "g1", fsync=False):
        with pytest.raises(StoreError, match="served by"):
            SegmentWriter(tmp_path / "ds", "g1")
        SegmentWriter(tmp_path / "ds", "g2").close()  # other groups are independent


def test_bad_batches_are_refused_by_column(tmp_path):
    with (
        SegmentWriter(tmp_path / "ds", "g1", fsync=False) as w,
        pytest.raises(InputError, match="server_samples: missing columns ts"),
    ):
        w.load_many([Batch("agent x", server_samples=samples(2).drop_columns(["ts"]))])
    with pytest.raises(InputError, match="bad group name"):
        SegmentWriter(tmp_path / "ds", "../etc")


def _jobs(rows: list[dict]) -> pa.Table:
    full = [{n: r.get(n) for n in JOBS.names} for r in rows]
    return pa.Table.from_pylist(full, schema=JOBS)


def test_jobs_and_files_merge_as_load_merges_them(tmp_path):
    """Prolog then epilog fill in one row; a tracer's partial view only adds unknown jobs."""
    t = datetime(2025, 3, 3, 8)
    batches = [
        Batch(
            "tracer",
            jobs=_jobs([{"job_id": "7", "user": "u7", "app": "trace"}]),
            keep_known_jobs=True,
        ),
        Batch("prolog", jobs=_jobs([{"job_id": "1", "user": "ann", "nodes": ["n1"], "start": t}])),
        Batch("epilog", jobs=_jobs([{"job_id": "1", "user": "ann", "end": t, "state": "DONE"}])),
        Batch(
            "tracer",
            jobs=_jobs([{"job_id": "1", "user": "x", "app": "a.out"}]),
            keep_known_jobs=True,
        ),
        Batch("sacct", jobs=_jobs([{"job_id": "7", "user": "bob", "nprocs": 4}])),
        # precedence: a late hook never undoes sacct's final record (job 3), while an epilog
        # completes what sacct saw running (job 4)
        *[
            Batch(src, jobs=_jobs([{"job_id": j, "user": "cy", "source": src, **row}]))
            for j, src, row in (
                ("3", "slurm", {"nodes": ["n1", "n2"], "start": t, "end": t, "state": "DONE"}),
                ("3", "slurm-hook", {"nodes": ["n1"], "start": t, "state": "RUNNING"}),
                ("3", "slurm-hook", {"end": t, "state": "FAILED"}),
                ("4", "slurm", {"nodes": ["n3"], "start": t, "state": "RUNNING"}),
                ("4", "slurm-hook", {"end": t, "state": "DONE"}),
            )
        ],
        Batch(
            "lfs",
            files=pa.table(
                {
                    "file_id": [1, 2],
                    "path": ["/a", "/b"],
                    "stripe_size": [1, 1],
                    "osts": [["o1"], ["o1"]],
                }
            ),
        ),
        Batch(
            "lfs",
            files=pa.table(
                {"file_id": [2], "path": ["/b"], "stripe_size": [4], "osts": [["o2", "o3"]]}
            ),
        ),
        # a trace that saw /a without its layout keeps the layout known
        Batch(
            "tracer",
            files=pa.table(
                {
                    "file_id": [1],
                    "path": ["/a"],
                    "stripe_size": pa.nulls(1, pa.int64()),
                    "osts": pa.nulls(1, pa.list_(pa.string())),
                }
            ),
        ),
        # the site's peaks, then an agent that knows the OST's server but not its peak
        Batch("site", components=_components([("o1", "ost", None, 2e9), ("o2", "ost", None, 3e9)])),
        Batch(
            "agent",
            components=_components([("o1", "ost", "oss1", None), ("oss1", "oss", None, None)]),
        ),
        Batch(
            "site", forwarding=pa.table({"compute_node": ["c1", "c2"], "forwarder": ["f1", "f1"]})
        ),
        Batch("site", forwarding=pa.table({"compute_node": ["c2"], "forwarder": ["f2"]})),
        Batch(
            "site", component_aliases=pa.table({"alias": ["10.0.0.1@o2ib"], "component_id": ["c1"]})
        ),
    ]
    ref = DuckDBStore(tmp_path / "ref.duckdb")
    writers = [SegmentWriter(tmp_path / "ds", g, fsync=False) for g in ("g1", "g2")]
    for i, b in enumerate(batches):
        load(ref, b)
        writers[i % 2].load_many([b])  # two servers, interleaved
    for w in writers:
        w.close()
    with DatasetStore(tmp_path / "ds", read_only=True) as ds:
        for table in ("jobs", "files", "components", "forwarding", "component_aliases"):
            sql = f"SELECT * FROM {table} ORDER BY ALL"
            assert ds.query(sql).to_pylist() == ref.query(sql).to_pylist(), sql
        assert ref.query(
            "SELECT peak_bw, parent FROM components WHERE component_id = 'o1'"
        ).to_pylist() == [{"peak_bw": 2e9, "parent": "oss1"}]
    ref.close()


def _components(rows: list[tuple]) -> pa.Table:
    return pa.table(
        {
            "component_id": [r[0] for r in rows],
            "kind": [r[1] for r in rows],
            "parent": pa.array([r[2] for r in rows], pa.string()),
            "peak_bw": pa.array([r[3] for r in rows], pa.float64()),
            "peak_ops": pa.nulls(len(rows), pa.float64()),
        }
    )


def test_readers_ignore_half_done_work():
    files = {"a/1", "a/2", "b/1", "c/1", "d/1", "e/1"}
    manifests = {
        "ingest-half": Manifest("ingest", ["a/1", "a/3"], staged={"a/3": "s/3"}),
        "compaction-done": Manifest("compaction", ["c/1"], inputs=["b/1", "a/2"]),
        "compaction-half": Manifest("compaction", ["c/2"], inputs=["c/1"], staged={"c/2": "s/2"}),
        "ingest-new": Manifest("ingest", ["d/1"]),  # written after the reader began
        "ingest-compacted": Manifest("ingest", ["e/1", "e/2"]),  # e/2 compacted away
    }
    known = set(manifests) - {"ingest-new"}
    assert visible(files, manifests, {"s/3", "s/2"}, known) == {"c/1", "e/1"}


def test_site_config_assigns_agents_to_groups(tmp_path):
    site = tmp_path / "site.toml"
    site.write_text(
        '[dataset]\npath = "/lustre/iolens"\nflush_s = 5\n'
        '[groups.g01]\nserver = "http://log01:8470"\nhosts = ["cn[0000-0511]"]\n'
        '[groups.g02]\nserver = "http://log02:8470"\nhosts = ["cn[0512-1023]", "login1"]\n'
        "[retention]\nfull_days = 3\n"
    )
    cfg = load_site(site)
    assert (cfg.group_of("cn0600"), cfg.group_of("login1"), cfg.group_of("x")) == (
        "g02",
        "g02",
        None,
    )
    assert cfg.retention.full_days == 3 and cfg.dataset.flush_s == 5
    assert site_server(AgentSection(host="cn0007", site=site)) == "http://log01:8470"
    assert site_server(AgentSection(host="x", group="g02", site=site)) == "http://log02:8470"
    assert site_server(AgentSection(server="http://me:1", site=site)) == "http://me:1"
    with pytest.raises(InputError, match="no group for host"):
        site_server(AgentSection(host="x", site=site))
    site.write_text('[groups._bad]\nserver = "http://x"\n')
    with pytest.raises(InputError, match="bad group name"):
        load_site(site)


def test_snapshot_restrict_prunes_hours(tmp_path):
    root = tmp_path / "ds"
    with SegmentWriter(root, "g1", fsync=False) as w:
        w.load_many([Batch("a", key="k", server_samples=samples(3, 3 * 3600))])
        w.load_many([Batch("a", key="j", jobs=_jobs([{"job_id": "1", "user": "u"}]))])
    snap = take_snapshot(root)
    near = snap.restrict(datetime(2025, 3, 3, 8, 0), datetime(2025, 3, 3, 8, 30))
    far = snap.restrict(datetime(2025, 3, 3, 12, 0), datetime(2025, 3, 3, 12, 30))
    assert near.files["server_samples"] == [] and len(far.files["server_samples"]) == 2
    assert near.files["jobs"] == far.files["jobs"] == snap.files["jobs"]  # untimed: all
