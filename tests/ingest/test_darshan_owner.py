"""Who owns an imported Darshan log's job (issue 21): the log's uid, never a name looked up
on the importing machine, and an account only where the site's uid map names one.

mpi-io-test-x86_64-3.4.0 ran as uid 1000 on a laptop; here uid 1000 may be anyone (it is
`cloudsdk` on the machine this was written on): today's code made them the job's owner.
The same import also shows Darshan's own log-writing hints labelled as such in the report
and the file system of each busiest file from the log's mount table.
"""

from __future__ import annotations

import json
import pwd
from pathlib import Path

import darshan
import pytest

from iolens.errors import InputError
from iolens.ingest.importers import darshan as imp
from iolens.ingest.importers import sacct
from iolens.ingest.load import load
from iolens.ingest.uid_map import UidMap, load_uid_map
from iolens.present import html_report, views
from iolens.store import DuckDBStore
from tests.conftest import SHARED_DATA, run_cli

LOG = SHARED_DATA / "darshan-logs" / "release_logs" / "mpi-io-test-x86_64-3.4.0.darshan"
EXAMPLE = Path(darshan.__file__).parent / "examples" / "example_logs" / "example.darshan"
needs_log = pytest.mark.skipif(not LOG.exists(), reason="../shared/data not available")


def _owner(store: DuckDBStore) -> tuple[str, int]:
    row = store.query(
        'SELECT j."user", d.uid FROM jobs j JOIN darshan_logs d USING (job_id)'
    ).to_pylist()
    assert len(row) == 1
    return row[0]["user"], row[0]["uid"]


@needs_log
def test_the_job_keeps_its_uid_and_gets_no_local_name(tmp_path: Path):
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        imp.import_logs(store, [LOG])
        assert _owner(store) == ("uid:1000", 1000)


@needs_log
def test_the_sites_map_names_the_owner_also_of_logs_loaded_before(tmp_path: Path):
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        imp.import_logs(store, [LOG])
        (again,) = imp.import_logs(store, [LOG], owners=UidMap(uids={1000: "alice"}))
        assert again.status == "skipped" and _owner(store) == ("alice", 1000)
        imp.import_logs(store, [LOG], owners=UidMap(uids={1001: "bob"}))  # map corrected
        assert _owner(store) == ("uid:1000", 1000)
        imp.import_logs(store, [LOG], owners=UidMap(local_accounts=True))
        try:
            here = pwd.getpwuid(1000).pw_name
        except KeyError:
            here = "uid:1000"
        assert _owner(store) == (here, 1000)  # only when the site says accounts are shared


def test_a_scheduler_record_keeps_its_owner(tmp_path: Path):
    """example.darshan (uid 69615) is job 4478544, which sacct says is alice's."""
    text = (
        "JobID|User|State|Start|End\n"
        "4478544|alice|COMPLETED|2017-03-20T10:00:00|2017-03-20T11:00:00\n"
    )
    batch, _ = sacct.batch_of_text(text, "jobs.txt", tz="UTC")
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        load(store, batch)
        imp.import_logs(store, [EXAMPLE], owners=UidMap(uids={69615: "mallory"}))
        assert _owner(store) == ("alice", 69615)


def test_the_map_file_is_checked(tmp_path: Path):
    good = tmp_path / "uids.toml"
    good.write_text('[uids]\n1000 = "alice"\n31074 = "bob"\n')
    owners = load_uid_map(good)
    assert owners.owner(1000) == "alice" and owners.owner(31074) == "bob"
    assert owners.owner(7) == "uid:7" and load_uid_map(None).owner(1000) == "uid:1000"
    for text in ('[uids]\n1000 = "uid:5"\n', '[uids]\n1000 = "a b"\n', "[users]\n"):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(InputError):
            load_uid_map(bad)


@needs_log
def test_cli_import_with_a_uid_map(tmp_path: Path):
    db, uids = tmp_path / "s.duckdb", tmp_path / "uids.toml"
    uids.write_text('[uids]\n1000 = "alice"\n')
    res = run_cli("import", "darshan", str(LOG), "--uid-map", str(uids), "--db", str(db))
    assert res.returncode == 0, res.stderr
    jobs = json.loads(run_cli("jobs", "--json", "--db", str(db)).stdout)
    assert [j["user"] for j in jobs] == ["alice"]


@needs_log
def test_report_labels_darshans_hints_and_names_each_files_fs(tmp_path: Path):
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        imp.import_logs(store, [LOG])
        job_id = store.query("SELECT job_id FROM jobs").to_pylist()[0]["job_id"]
        page = html_report.render(store, job_id)
        top = views.job(store, job_id)["top_files"]
    assert "<code>h=" not in page  # not among the job's metadata any more
    assert "MPI-IO hints <code>romio_no_indep_rw=true;cb_nodes=4</code>: its own" in page
    fs = {f["path"]: f["fs"] for f in top}
    assert fs["/tmp/test/mpi-io-test.tmp.dat"] == "ext4"
    assert "<STDOUT>" not in fs  # a stream is no file of the job's
