"""Fixtures for the tracer tests: the library and the C workloads, built from source.

The library is compiled from tracer/ into a temporary directory (so the tests exercise
the sources in this checkout, not an installed copy); workloads are compiled with `cc`.
Everything skips cleanly on a machine without a C compiler.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from iolens.tracefile import TraceFile, decode_dir

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
CC = os.environ.get("CC", "cc")

needs_cc = pytest.mark.skipif(shutil.which(CC) is None, reason="no C compiler (cc)")


def compile_c(src: Path, out: Path, *flags: str) -> Path:
    res = subprocess.run(
        [CC, "-O2", "-o", str(out), str(src), *flags], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    return out


#: the library built by this test process, by compiler (see `tracer_lib`)
_BUILT: dict[str, Path] = {}


@pytest.fixture(scope="session")
def tracer_lib(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tracer, built once per test process (~15 s): every module that imports this
    fixture gets its own fixture definition from pytest, so the build itself is cached."""
    if shutil.which(CC) is None or shutil.which("make") is None:
        pytest.skip("no C compiler or make")
    if CC not in _BUILT:
        out = tmp_path_factory.mktemp("lib")
        res = subprocess.run(
            ["make", "-s", "-C", str(ROOT / "tracer"), f"OUT={out}", f"CC={CC}"],
            capture_output=True,
            text=True,
        )
        assert res.returncode == 0, res.stdout + res.stderr
        assert "warning" not in res.stderr, res.stderr
        _BUILT[CC] = out / "libiolens.so"
    return _BUILT[CC]


@pytest.fixture(scope="session")
def workload(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which(CC) is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("bin")
    return compile_c(HERE / "workloads" / "workload.c", out / "workload", "-pthread", "-ldl")


@pytest.fixture(scope="session")
def fake_darshan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which(CC) is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("darshan")
    return compile_c(
        HERE / "workloads" / "fake_darshan.c", out / "libfakedarshan.so", "-shared", "-fPIC", "-ldl"
    )


@pytest.fixture(scope="session")
def fake_lustre(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stand-in Lustre client to preload after the tracer (workloads/fake_lustre.c)."""
    if shutil.which(CC) is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("fakelustre")
    return compile_c(
        HERE / "workloads" / "fake_lustre.c", out / "libfakelustre.so", "-shared", "-fPIC", "-ldl"
    )


@pytest.fixture(scope="session")
def layouts_prog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which(CC) is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("layouts")
    return compile_c(HERE / "workloads" / "layouts.c", out / "layouts")


@dataclass
class Run:
    rc: int
    stdout: str
    stderr: str
    base: Path
    spool: Path
    counts: list[dict] = field(default_factory=list)

    def traces(self) -> list[TraceFile]:
        return list(decode_dir(self.spool)) if self.spool.exists() else []


def run(
    exe: Path | list[str],
    mode: str,
    tmp: Path,
    n: int = 4,
    lib: Path | None = None,
    preload: list[Path] | None = None,
    env: dict[str, str] | None = None,
    tag: str = "",
) -> Run:
    """Run a workload in a fresh BASE dir; preload `lib` (and others, in order)."""
    base = tmp / f"base-{mode}{tag}"
    spool = tmp / f"spool-{mode}{tag}"
    base.mkdir()
    e = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    e["IOLENS_SPOOL"] = str(spool)
    e["IOLENS_JOB_ID"] = "test-job"
    libs = preload if preload is not None else ([lib] if lib else [])
    if libs:
        e["LD_PRELOAD"] = " ".join(str(x) for x in libs)
    e.update(env or {})
    cmd = [str(exe), mode, str(base), str(n)] if isinstance(exe, Path) else exe
    res = subprocess.run(cmd, capture_output=True, text=True, env=e, timeout=120)
    counts = [json.loads(line) for line in res.stdout.splitlines() if line.startswith("{")]
    return Run(res.returncode, res.stdout, res.stderr, base, spool, counts)


def expected(r: Run) -> tuple[Counter, int, int]:
    ops: Counter = Counter()
    rb = wb = 0
    for c in r.counts:
        ops.update({k: v for k, v in c["ops"].items() if v})
        rb += c["read_bytes"]
        wb += c["write_bytes"]
    return ops, rb, wb


def paths_of(t: TraceFile) -> dict[int, str]:
    """file_id -> path of one trace's file table."""
    return dict(
        zip(t.files.column("file_id").to_pylist(), t.files.column("path").to_pylist(), strict=True)
    )


def traced(traces: list[TraceFile], base: Path) -> tuple[Counter, int, int]:
    """Ops and bytes from the decoded records on files under `base`."""
    ops: Counter = Counter()
    rb = wb = 0
    prefix = str(base)
    for t in traces:
        paths = paths_of(t)
        for row in t.client_io.to_pylist():
            if not paths[row["file_id"]].startswith(prefix):
                continue
            ops[row["op"]] += row["count"]
            if row["op"] == "read":
                rb += row["size"] * row["count"]
            elif row["op"] == "write":
                wb += row["size"] * row["count"]
    return ops, rb, wb


def summarised(traces: list[TraceFile], base: Path) -> tuple[Counter, int, int]:
    """The same totals from the per-file summaries."""
    ops: Counter = Counter()
    rb = wb = 0
    for t in traces:
        paths = paths_of(t)
        for row in t.summaries.to_pylist():
            if not paths[row["file_id"]].startswith(str(base)):
                continue
            for k, v in row.items():
                if k.endswith("_ops") and v:
                    ops[k[:-4]] += v
            rb += row["bytes_read"]
            wb += row["bytes_written"]
    return ops, rb, wb
