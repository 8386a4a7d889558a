"""Periodic interim files (IOLENS_FLUSH_S) and the final flush on a termination signal,
with real processes under the real tracer (workloads/live.c writes 4 KiB a millisecond)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from iolens.collect.agent import Agent
from iolens.collect.sources.tracer_spool import DEFAULT_DIR, TracerSpoolSource
from iolens.ingest.http import IngestService
from iolens.ship.shipper import Backoff, Shipper
from iolens.ship.spool import DiskSpool
from iolens.ship.transport import InMemoryTransport
from iolens.store import DuckDBStore
from iolens.tracefile import SUFFIX, TraceFile, batch_of, decode, decode_dir
from iolens.tracefile.trace import decode_bytes
from tests.tracer.conftest import HERE, compile_c, needs_cc

pytestmark = needs_cc


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("live")
    return compile_c(HERE / "workloads" / "live.c", out / "live")


def start(
    lib: Path,
    prog: Path,
    tmp: Path,
    seconds: float,
    flush: str,
    mode: str = "plain",
    spool: Path | None = None,
) -> tuple[subprocess.Popen[str], Path, Path]:
    base, spool = tmp / "base", spool or tmp / "spool"
    base.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env.update(
        LD_PRELOAD=str(lib), IOLENS_SPOOL=str(spool), IOLENS_JOB_ID="live", IOLENS_FLUSH_S=flush
    )
    cmd = [str(prog), mode, str(base), str(seconds)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env=env)
    return proc, base, spool


def interim_names(spool: Path) -> list[Path]:
    """`<host>-<pid>-<start>-<seg>.<k>.iolens`: the segment part holds a dot."""
    return sorted(p for p in spool.glob(f"*{SUFFIX}") if "." in p.name[: -len(SUFFIX)])


def wait_for(cond: Callable[[], object], timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.05)


def progress(out: str) -> list[tuple[int, int, int]]:
    """(wall ns, writes, bytes) of the workload's progress lines."""
    return [
        (int(w[1]), int(w[2]), int(w[3]))
        for w in (line.split() for line in out.splitlines())
        if w and w[0] == "progress"
    ]


def final_counts(out: str) -> dict[str, int]:
    return json.loads(next(line for line in out.splitlines() if line.startswith("{")))


def data_writes(t: TraceFile) -> tuple[int, int, list[tuple]]:
    """Bytes, calls and the record identities of the writes to BASE/data in one file."""
    ids = {r["file_id"] for r in t.files.to_pylist() if r["path"].endswith("/data")}
    rows = [r for r in t.client_io.to_pylist() if r["op"] == "write" and r["file_id"] in ids]
    recs = [(r["offset"], r["t_start"], r["t_end"], r["count"]) for r in rows]
    return sum(r["size"] * r["count"] for r in rows), sum(r["count"] for r in rows), recs


def summary_writes(t: TraceFile) -> tuple[int, int]:
    ids = {r["file_id"] for r in t.files.to_pylist() if r["path"].endswith("/data")}
    rows = [r for r in t.summaries.to_pylist() if r["file_id"] in ids and r["layer"] == "posix"]
    return sum(r["bytes_written"] for r in rows), sum(r["write_ops"] for r in rows)


def union(files: list[TraceFile]) -> tuple[int, int]:
    """Bytes and calls over a process's files, checking no record is in two of them."""
    recs: list[tuple] = []
    nbytes = calls = 0
    for t in files:
        b, c, r = data_writes(t)
        nbytes, calls = nbytes + b, calls + c
        recs += r
    assert len(recs) == len(set(recs)), "a record is in two files"
    return nbytes, calls


def test_interim_files_appear_while_running_and_add_up(tracer_lib, live, tmp_path):
    proc, _, spool = start(tracer_lib, live, tmp_path, 3.5, "1")
    try:
        wait_for(lambda: interim_names(spool) or proc.poll() is not None)
        assert proc.poll() is None, "no interim file before the process ended"
        first = decode(interim_names(spool)[0])
        assert first.interim and first.interval == 1 and data_writes(first)[0] > 0
    finally:
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    want = final_counts(out)
    files = [decode(p) for p in sorted(spool.glob(f"*{SUFFIX}"))]
    interim = [t for t in files if t.interim]
    (final,) = [t for t in files if not t.interim]
    assert len(interim) >= 2 and final.interval == len(interim)
    assert sorted(t.interval for t in interim) == list(range(1, len(interim) + 1))
    assert union(files) == (want["bytes"], want["writes"])
    assert summary_writes(final) == (want["bytes"], want["writes"])
    # header counters are cumulative: the final file's count every call of every file
    assert final.calls == sum(sum(t.client_io.column("count").to_pylist()) for t in files)
    (merged,) = decode_dir(spool)  # one process, reported once
    assert not merged.interim and not merged.partial
    assert data_writes(merged)[:2] == (want["bytes"], want["writes"])


def test_sigkill_keeps_the_interim_files(tracer_lib, live, tmp_path):
    proc, _, spool = start(tracer_lib, live, tmp_path, 60, "1")
    try:
        wait_for(lambda: len(interim_names(spool)) >= 2)
    finally:
        proc.kill()
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    files = [decode(p) for p in interim_names(spool)]
    assert files and all(t.interim for t in files)
    assert not [p for p in spool.glob(f"*{SUFFIX}") if p not in interim_names(spool)]
    last_flush = max(int(t.end.timestamp() * 1e9) for t in files)
    before = [b for ns, _, b in progress(out) if ns < last_flush]
    nbytes, calls = union(files)
    # everything written before the last completed interval is there, and no more than
    # the workload wrote (within the 50 ms after its last progress line)
    assert before and nbytes >= before[-1]
    assert nbytes <= progress(out)[-1][2] + 100 * 4096 and nbytes == 4096 * calls
    (merged,) = decode_dir(spool)
    assert merged.interim and merged.partial  # killed before its final flush


def test_unhandled_sigterm_writes_the_final_file(tracer_lib, live, tmp_path):
    proc, _, spool = start(tracer_lib, live, tmp_path, 60, "1")
    try:
        wait_for(lambda: len(interim_names(spool)) >= 1)
        time.sleep(0.3)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGTERM  # still dies of the signal
    files = [decode(p) for p in sorted(spool.glob(f"*{SUFFIX}"))]
    (final,) = [t for t in files if not t.interim]
    last = progress(out)[-1]
    nbytes, calls = union(files)
    # the signal lands after the last progress line, within the next 50 ms of writes
    # (one a millisecond; 100 allows for a slow machine)
    assert last[2] <= nbytes <= last[2] + 100 * 4096 and 0 <= calls - last[1] <= 100
    assert nbytes == 4096 * calls
    assert summary_writes(final) == (nbytes, calls)


def test_own_sigterm_handler_runs_and_the_trace_is_whole(tracer_lib, live, tmp_path):
    proc, _, spool = start(tracer_lib, live, tmp_path, 60, "1", mode="handler")
    try:
        wait_for(lambda: len(interim_names(spool)) >= 1)
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "handler ran" in out
    want = final_counts(out)
    files = [decode(p) for p in sorted(spool.glob(f"*{SUFFIX}"))]
    (final,) = [t for t in files if not t.interim]
    assert union(files) == (want["bytes"], want["writes"])
    assert summary_writes(final) == (want["bytes"], want["writes"])


def test_flush_off_is_one_file(tracer_lib, live, tmp_path):
    proc, _, spool = start(tracer_lib, live, tmp_path, 1.5, "0")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0
    want = final_counts(out)
    (path,) = spool.glob(f"*{SUFFIX}")
    t = decode(path)
    assert path.name.endswith(f"-0{SUFFIX}") and not t.interim and t.interval == 0
    assert data_writes(t)[:2] == (want["bytes"], want["writes"])


def ship_all(agent: Agent, shipper: Shipper, keys: list[str]) -> Iterator[str]:
    for batch, done in agent.collect_batches():
        name, data = batch.trace
        keys.append(batch_of(decode_bytes(data, name)).key)
        shipper.submit(batch)
        done()
        yield name


def test_agent_ships_interim_files_of_a_live_process(tracer_lib, live, tmp_path):
    root = tmp_path / "root"
    spool = root / DEFAULT_DIR.relative_to("/")
    keys: list[str] = []
    with DuckDBStore(tmp_path / "s.duckdb") as store:
        transport = InMemoryTransport(IngestService(store).receive)
        shipper = Shipper(DiskSpool(tmp_path / "outbox"), transport, Backoff(base=0.0, cap=0.0))
        agent = Agent("n1", root, [], batch_sources=[TracerSpoolSource("n1", ask_layouts=False)])
        proc, _, _ = start(tracer_lib, live, tmp_path, 3.5, "1", spool=spool)
        wait_for(lambda: interim_names(spool) or proc.poll() is not None)
        shipped_live = list(ship_all(agent, shipper, keys))
        assert shipped_live and proc.poll() is None  # shipped while the process runs
        assert all("." in n[: -len(SUFFIX)] for n in shipped_live)
        out, _ = proc.communicate(timeout=60)
        want = final_counts(out)
        shipped_after = list(ship_all(agent, shipper, keys))
        assert any("." not in n[: -len(SUFFIX)] for n in shipped_after)  # the final file
        shipper.deliver(now=1e9)
        assert len(keys) == len(set(keys))
        row = store.query(
            "SELECT sum(c.size * c.count) AS bytes, sum(c.count) AS ops FROM client_io c "
            "JOIN files f USING (file_id) WHERE c.op = 'write' AND f.path LIKE '%/data'"
        ).to_pylist()[0]
        assert (row["bytes"], row["ops"]) == (want["bytes"], want["writes"])


def test_batch_keys_one_per_file_old_key_kept(tracer_lib, live, tmp_path):
    from dataclasses import replace

    from iolens.tracefile import writer

    proc, _, spool = start(tracer_lib, live, tmp_path, 0.2, "0")
    proc.communicate(timeout=60)
    (t,) = decode_dir(spool)
    old = f"trace:{t.host}:{t.pid}:{t.start.isoformat()}"
    assert batch_of(t).key == old  # the final file of segment 0: as before version 4
    seg1 = replace(t, segment=1)
    interim = replace(t, interim=True, interval=2)
    assert batch_of(seg1).key == old + ":s1"
    assert batch_of(interim).key == old + ":i2"
    assert batch_of(replace(seg1, interim=True, interval=2)).key == old + ":s1:i2"
    # the Python writer names and flags an interim file as the tracer does
    path = writer.write(interim, tmp_path / "w")
    assert path.name.endswith(f"-0.2{SUFFIX}")
    back = decode(path)
    assert back.interim and back.interval == 2 and batch_of(back).key == old + ":i2"


def test_iolens_trace_reports_a_killed_process_once_as_partial(tracer_lib, live, tmp_path):
    from tests.conftest import run_cli

    base = tmp_path / "base"
    base.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env.update(IOLENS_LIBRARY=str(tracer_lib), IOLENS_FLUSH_S="1")
    db = str(tmp_path / "db.duckdb")
    spool = str(tmp_path / "spool")
    res = run_cli(
        "trace", "--db", db, "--job-id", "k1", "--spool", spool, "--json", "--",
        str(live), "selfkill", str(base), "2.5", env=env,
    )  # fmt: skip
    assert res.returncode == 128 + signal.SIGKILL, res.stderr
    # the workload's progress lines come first on the shared stdout
    summary = json.loads(res.stdout[res.stdout.index("{") :])
    assert summary["processes"] == 1 and summary["interrupted"] == 1
    assert summary["files"] >= 2 and summary["records"] > 0
    assert any("killed before its final flush" in w for w in summary["lost"])
    assert not any("was lost: killed" in w for w in summary["lost"])
