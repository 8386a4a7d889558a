"""The metadata calls of trace format 6 (issue 23): truncate/fallocate, posix_fadvise,
access, link/symlink and readdir, probed with real programs under the real tracer.

The C probe (workloads/fsmeta.c, compiled plain and with -D_FORTIFY_SOURCE=2) reports
every successful call as the record the tracer must hold; the decoded trace must hold
exactly those, runs expanded, and the same counts in the summaries. Its stdout (each
call's return value and errno) must be the same traced and untraced.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from iolens.model.schema import MDS_OPS
from tests.conftest import run_cli
from tests.tracer.conftest import HERE, compile_c, needs_cc, paths_of, run

pytestmark = needs_cc

NEW_OPS = ("truncate", "fadvise", "access", "link", "readdir")
FORTIFY = {"plain": (), "fortified": ("-D_FORTIFY_SOURCE=2",)}


@pytest.fixture(scope="module", params=sorted(FORTIFY))
def probe(request, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp(f"fsmeta-{request.param}")
    return compile_c(HERE / "workloads" / "fsmeta.c", out / "fsmeta", *FORTIFY[request.param])


def recorded(traces, base: Path) -> Counter:
    """(op, path, offset) of every new-op call on paths under `base`, runs expanded."""
    got: Counter = Counter()
    for t in traces:
        paths = paths_of(t)
        for row in t.client_io.to_pylist():
            path = paths[row["file_id"]]
            if row["op"] in NEW_OPS and path.startswith(str(base)):
                for k in range(row["count"]):
                    got[(row["op"], path, row["offset"] + k * row["stride"])] += 1
    return got


def summed(traces, base: Path) -> Counter:
    """Calls per new op on paths under `base`, from the summaries."""
    got: Counter = Counter()
    for t in traces:
        paths = paths_of(t)
        for s in t.summaries.to_pylist():
            if paths[s["file_id"]].startswith(str(base)):
                got.update({op: s[f"{op}_ops"] for op in NEW_OPS if s[f"{op}_ops"]})
    return got


def test_probe_calls_are_recorded_and_unchanged(probe, tracer_lib, tmp_path):
    plain = run(probe, "fsmeta", tmp_path, tag="-untraced")
    traced = run(probe, "fsmeta", tmp_path, lib=tracer_lib)
    assert plain.rc == traced.rc == 0, traced.stderr
    # same return values and errnos with and without the tracer
    assert traced.stdout == plain.stdout
    assert "entries 5" in traced.stdout
    want = Counter(
        tuple(json.loads(x)["ev"]) for x in traced.stderr.splitlines() if x.startswith('{"ev"')
    )
    assert {op for op, *_ in want} == set(NEW_OPS), traced.stderr
    traces = traced.traces()
    assert recorded(traces, traced.base) == want
    by_op = Counter()
    for (op, _path, _off), n in want.items():
        by_op[op] += n
    assert summed(traces, traced.base) == by_op
    # nothing lost to re-entry: the wrappers never call each other
    assert all(t.missed_calls == 0 for t in traces)


PY_PROBE = r"""
import os, sys
base = sys.argv[1]
f, d = os.path.join(base, "f"), os.path.join(base, "d")
os.mkdir(d)
for i in range(4):
    open(os.path.join(d, f"e{i}"), "w").close()
with open(f, "w") as fh:
    fh.write("x" * 1000)
os.truncate(f, 10)
os.truncate(f, 20)
fd = os.open(f, os.O_RDWR)
os.truncate(fd, 30)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
os.close(fd)
assert os.access(f, os.R_OK) and not os.access(os.path.join(base, "none"), os.R_OK)
os.link(f, os.path.join(d, "hard"))
os.symlink(f, os.path.join(base, "soft"))
assert len(os.listdir(d)) == 5
assert len(list(os.scandir(d))) == 5
"""


def test_python_os_calls_are_recorded(tracer_lib, tmp_path):
    """os.truncate (path and fd), posix_fadvise, access, link, symlink, listdir, scandir."""
    base = tmp_path / "base"
    base.mkdir()
    spool = tmp_path / "spool"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env |= {"IOLENS_SPOOL": str(spool), "IOLENS_JOB_ID": "t", "LD_PRELOAD": str(tracer_lib)}
    res = subprocess.run(
        [sys.executable, "-c", PY_PROBE, str(base)], env=env, capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    from iolens.tracefile import decode_dir

    traces = list(decode_dir(spool))
    got = Counter()
    for (op, path, off), n in recorded(traces, base).items():
        got[(op, Path(path).relative_to(base).as_posix(), off)] += n
    # readdir: ".", "..", four files and the hard link, for listdir and for scandir
    assert got == Counter(
        {
            ("truncate", "f", 10): 1,
            ("truncate", "f", 20): 1,
            ("truncate", "f", 30): 1,
            ("fadvise", "f", -1): 1,
            ("access", "f", -1): 1,
            ("link", "d/hard", -1): 1,
            ("link", "soft", -1): 1,
            ("readdir", "d", -1): 14,
        }
    )


def test_iolens_job_counts_them_as_metadata(probe, tracer_lib, tmp_path):
    """`iolens trace` then `iolens job --json`: md_ops holds the new ops (fadvise aside,
    it stays on the client) with the ones the probe's set-up makes, as the trace has them."""
    base = tmp_path / "base"
    base.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    env["IOLENS_LIBRARY"] = str(tracer_lib)
    db = str(tmp_path / "db.duckdb")
    cmd = [sys.executable, "-m", "iolens", "trace", "--db", db, "--job-id", "fsm"]
    res = subprocess.run(
        [*cmd, "--", str(probe), "fsmeta", str(base)], capture_output=True, env=env, timeout=120
    )
    assert res.returncode == 0, res.stderr
    want = Counter(
        tuple(json.loads(x)["ev"])
        for x in res.stderr.decode().splitlines()
        if x.startswith('{"ev"')
    )
    job = json.loads(run_cli("job", "fsm", "--db", db, "--json", env=env).stdout)
    new_md = sum(n for (op, *_), n in want.items() if op in MDS_OPS)
    assert new_md == 8 + 4 + 6 + 10  # truncate, access, link, readdir entries
    # the rest: mkdir (3), open+close of d/e* (6) and of f (2), unlink of the links (5),
    # the open of d for fdopendir (1)
    assert job["md_ops"] == new_md + 3 + 6 + 2 + 5 + 1
