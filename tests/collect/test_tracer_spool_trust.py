"""The shared trace spool is a trust boundary (issue 19): the root agent trusts nothing in it.

Real traces from the real tracer, real files owned by another uid, planted symlinks, FIFOs
and hard links, non-UTF-8 names, the `.partial` file of a SIGKILLed process; shipped
through the real wire format into a real DuckDB store.
"""

from __future__ import annotations

import logging
import os
import pwd
import signal
import stat
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from iolens.collect.agent import Agent
from iolens.collect.sources.tracer_spool import DEFAULT_DIR, TracerSpoolSource
from iolens.ingest.http import IngestService
from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.schema import JOBS
from iolens.ship.shipper import Backoff, Shipper
from iolens.ship.spool import DiskSpool
from iolens.ship.transport import InMemoryTransport
from iolens.store import DuckDBStore
from iolens.tracefile import SUFFIX
from tests.traced import KILLED, tracer_library

HOST = os.uname().nodename
WRITE = "import sys\nwith open(sys.argv[1], 'wb') as f: f.write(b'x' * 1000)\n"
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="files of another uid need root")


def traced(
    spool: Path,
    out: bytes | str,
    job: str,
    user: str = "victim",
    code: str = WRITE,
    **more: str,
) -> subprocess.CompletedProcess[bytes]:
    """Run `code out` under the real tracer as job `job`, with $USER claiming `user`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env |= {"LD_PRELOAD": str(tracer_library()), "IOLENS_SPOOL": str(spool), **more}
    env |= {"IOLENS_JOB_ID": job, "USER": user, "LOGNAME": user}
    return subprocess.run([sys.executable, "-c", code, out], env=env, check=False)


def new_trace(spool: Path, out: Path, job: str, user: str = "victim") -> Path:
    before = set(spool.glob(f"*{SUFFIX}")) if spool.exists() else set()
    traced(spool, str(out), job, user)
    (path,) = set(spool.glob(f"*{SUFFIX}")) - before
    return path


def shared_spool(root: Path) -> Path:
    spool = root / DEFAULT_DIR.relative_to("/")
    spool.mkdir(parents=True)
    spool.chmod(0o1777)
    return spool


def ship(tmp_path: Path, root: Path, store: DuckDBStore, source: TracerSpoolSource) -> int:
    """One agent round through the wire into `store`; batches delivered."""
    transport = InMemoryTransport(IngestService(store).receive)
    shipper = Shipper(DiskSpool(tmp_path / "outbox"), transport, Backoff(base=0.0, cap=0.0))
    agent = Agent(HOST, root, [], batch_sources=[source])
    for batch, done in agent.collect_batches():
        shipper.submit(batch)
        done()
    assert agent.health[source.name].failures == 0
    return shipper.deliver(now=1e9)


def job_of_file(store: DuckDBStore, name: str) -> set[str]:
    rows = store.query(
        "SELECT DISTINCT c.job_id FROM client_io c JOIN files f USING (file_id) "
        f"WHERE f.path LIKE '%/{name}'"
    ).to_pylist()
    return {r["job_id"] for r in rows}


@needs_root
def test_user_is_the_files_owner_and_a_claimed_job_must_be_the_owners(tmp_path):
    root = tmp_path / "root"
    spool = shared_spool(root)
    nobody = pwd.getpwnam("nobody")
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        victims_job = {"job_id": "4242", "user": "victim", "nodes": [HOST], "source": "slurm"}
        load(store, Batch("slurm", jobs=pa.Table.from_pylist([victims_job], schema=JOBS)))
        # another user's files, claiming to be the victim's: into the victim's job, and a new one
        for name, job in (("into-victims-job.dat", "4242"), ("new-job.dat", "777")):
            os.chown(new_trace(spool, tmp_path / name, job), nobody.pw_uid, nobody.pw_gid)
        # root's own file: root could write anything anyway, its claim stands
        new_trace(spool, tmp_path / "roots.dat", "4242")

        assert ship(tmp_path, root, store, TracerSpoolSource(HOST)) == 3

        jobs = {r["job_id"]: r for r in store.query("SELECT * FROM jobs").to_pylist()}
        assert jobs["4242"]["user"] == "victim" and jobs["4242"]["source"] == "slurm"
        assert job_of_file(store, "into-victims-job.dat") == {f"unknown-{HOST}-nobody"}
        assert jobs[f"unknown-{HOST}-nobody"]["user"] == "nobody"
        assert job_of_file(store, "new-job.dat") == {"777"}
        assert jobs["777"]["user"] == "nobody"  # created in the owner's name, not the claim
        assert job_of_file(store, "roots.dat") == {"4242"}
        assert not list(spool.glob(f"*{SUFFIX}"))  # nothing lost, nothing left


@needs_root
def test_a_claim_on_another_users_job_goes_to_the_owners_scheduled_job(tmp_path):
    """The scheduler says which job the owner runs on this node now: the trace goes there."""
    root = tmp_path / "root"
    spool = shared_spool(root)
    nobody = pwd.getpwnam("nobody")
    now = datetime.now(UTC).replace(tzinfo=None)
    jobs = [
        {"job_id": "4242", "user": "victim", "nodes": [HOST], "source": "slurm"},
        {"job_id": "old", "user": "nobody", "nodes": [HOST], "source": "slurm",
         "start": now - timedelta(days=2), "end": now - timedelta(days=1)},
        {"job_id": "5000", "user": "nobody", "nodes": ["n1", HOST], "source": "slurm",
         "start": now - timedelta(hours=1)},
    ]  # fmt: skip
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        load(store, Batch("slurm", jobs=pa.Table.from_pylist(jobs, schema=JOBS)))
        os.chown(new_trace(spool, tmp_path / "a.dat", "4242"), nobody.pw_uid, nobody.pw_gid)
        assert ship(tmp_path, root, store, TracerSpoolSource(HOST)) == 1
        assert job_of_file(store, "a.dat") == {"5000"}
        assert store.query("SELECT count(*) AS n FROM jobs").to_pylist() == [{"n": 3}]


def test_symlinks_fifos_and_hard_links_are_never_followed(tmp_path, caplog):
    root = tmp_path / "root"
    spool = shared_spool(root)
    private = tmp_path / "root-only"
    private.mkdir(mode=0o700)
    secret = new_trace(tmp_path / "elsewhere", tmp_path / "secret.dat", "1")
    good = new_trace(spool, tmp_path / "good.dat", "2")
    (spool / f"to-file{SUFFIX}").symlink_to(secret)
    (spool / f"to-dir{SUFFIX}").symlink_to(private)
    (spool / f"dangling{SUFFIX}").symlink_to(tmp_path / "nothing")
    os.mkfifo(spool / f"fifo{SUFFIX}")
    os.link(secret, spool / f"hard{SUFFIX}")
    big = new_trace(spool, tmp_path / "big.dat", "3")
    big.rename(spool / f"big{SUFFIX}")
    # a `bad/` planted as a symlink to a root-only directory: nothing may land there
    (spool / "bad").symlink_to(private)
    (spool / f"junk{SUFFIX}").write_bytes(b"IOLTRACE but not really")

    source = TracerSpoolSource(HOST, max_file_bytes=good.stat().st_size)
    with os.fdopen(os.open(spool / f"big{SUFFIX}", os.O_WRONLY | os.O_APPEND), "wb") as f:
        f.write(b"\0" * (good.stat().st_size + 1))  # beyond the bound
    with DuckDBStore(tmp_path / "s.duckdb") as store, caplog.at_level(logging.ERROR):
        assert ship(tmp_path, root, store, source) == 1  # only the real file
        assert job_of_file(store, "good.dat") == {"2"} and not job_of_file(store, "secret.dat")
    assert not good.exists()
    assert secret.read_bytes()[:8] == b"IOLTRACE" and os.stat(secret).st_nlink == 2
    assert list(private.iterdir()) == []  # nothing moved into the symlinked directory
    assert (spool / "bad").is_symlink()
    refused = ["to-file", "to-dir", "dangling", "fifo", "hard", "junk", "big"]
    assert source.quarantined == len(refused)
    for name in refused:  # renamed aside in place, the links themselves, never their targets
        assert os.lstat(spool / f"{name}{SUFFIX}.bad")
        assert not os.path.lexists(spool / f"{name}{SUFFIX}")
        assert any(f"{name}{SUFFIX}" in r.message for r in caplog.records)
    assert stat.S_ISFIFO(os.lstat(spool / f"fifo{SUFFIX}.bad").st_mode)


def test_a_spool_that_is_a_symlink_is_not_read(tmp_path, caplog):
    root = tmp_path / "root"
    real = tmp_path / "real"
    new_trace(real, tmp_path / "a.dat", "1")
    spool = root / DEFAULT_DIR.relative_to("/")
    spool.parent.mkdir(parents=True)
    spool.symlink_to(real)
    agent = Agent(HOST, root, [], batch_sources=[TracerSpoolSource(HOST)])
    with caplog.at_level(logging.ERROR):
        assert list(agent.collect_batches()) == []
    assert len(list(real.glob(f"*{SUFFIX}"))) == 1
    assert any("not usable" in r.message for r in caplog.records)


def test_non_utf8_names_ship_like_any_other(tmp_path):
    """A spool file name and a traced path that are not UTF-8 (was: the source failed every
    round, 0 of 3 later traces shipped)."""
    root = tmp_path / "root"
    spool = shared_spool(root)
    odd = os.fsencode(tmp_path) + b"/caf\xe9-\xff.dat"
    traced(spool, odd, "9")  # the program opened a non-UTF-8 path
    (first,) = spool.glob(f"*{SUFFIX}")
    first.rename(os.fsdecode(os.fsencode(spool) + b"/\xfe\xff-1-1-0.iolens"))
    for i in range(3):
        new_trace(spool, tmp_path / f"later-{i}.dat", "9")
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        assert ship(tmp_path, root, store, TracerSpoolSource(HOST)) == 4
        paths = store.query("SELECT path FROM files").column("path").to_pylist()
        assert os.fsdecode(os.fsencode(tmp_path)) + "/caf\\xe9-\\xff.dat" in paths
        for i in range(3):
            assert job_of_file(store, f"later-{i}.dat") == {"9"}
    assert os.listdir(spool) == []


def test_partial_files_of_gone_processes_are_removed_and_logged(tmp_path, caplog):
    root = tmp_path / "root"
    spool = shared_spool(root)
    res = traced(spool, str(tmp_path / "k.dat"), "5", code=KILLED, IOLENS_BUFFER_MB="1")
    assert res.returncode == -signal.SIGKILL
    (killed,) = spool.glob("*.partial")
    assert stat.S_IMODE(killed.stat().st_mode) == 0o600
    running = spool / f"{HOST}-{os.getpid()}-{time.time_ns()}-0{SUFFIX}.partial"
    running.write_bytes(b"IOLTRACE being written")
    other_host = spool / f"elsewhere-1-1-0{SUFFIX}.partial"
    other_host.write_bytes(b"IOLTRACE")
    old = spool / f"elsewhere-2-2-0{SUFFIX}.partial"
    old.write_bytes(b"IOLTRACE")
    week = time.time() - 8 * 24 * 3600
    os.utime(old, (week, week))
    lost = spool / f"{HOST}-3-3-0{SUFFIX}.lost"
    lost.touch()

    source = TracerSpoolSource(HOST)
    agent = Agent(HOST, root, [], batch_sources=[source])
    with caplog.at_level(logging.WARNING):
        assert list(agent.collect_batches()) == []
    assert not killed.exists() and not old.exists() and not lost.exists()
    assert running.exists() and other_host.exists()  # a live process's, another node's
    assert (source.removed_partial, source.lost) == (2, 1)
    said = " ".join(r.message for r in caplog.records)
    assert killed.name in said and old.name in said and "could not write its trace" in said
