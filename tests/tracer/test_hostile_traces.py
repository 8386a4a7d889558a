"""Hostile and broken traces (issue 19): corrupt files cost only themselves, any byte string
is a path, `iolens trace` always exits with the program's status and says what was lost.

Real processes under the real tracer (built from this checkout), the real CLI, real
DuckDB files.
"""

from __future__ import annotations

import contextlib
import os
import random
import stat
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from iolens.errors import InputError
from iolens.store import DuckDBStore
from iolens.tracefile import SUFFIX, batch_of, decode
from iolens.tracefile import format as fmt
from tests.tmpfs import small_tmpfs
from tests.traced import KILLED
from tests.tracer.conftest import needs_cc

pytestmark = needs_cc

WRITE = "import sys\nwith open(sys.argv[1], 'wb') as f: f.write(b'x' * 1000)\n"


def env_for(lib: Path, **more: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    return env | {"IOLENS_LIBRARY": str(lib), **more}


def iolens(*args: str | bytes, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "iolens", *args],
        capture_output=True,
        text=True,
        errors="backslashreplace",
        env=env,
        timeout=300,
    )


def trace_file(lib: Path, spool: Path, out: Path) -> Path:
    env = env_for(lib, LD_PRELOAD=str(lib), IOLENS_SPOOL=str(spool), IOLENS_JOB_ID="j")
    before = set(spool.glob(f"*{SUFFIX}")) if spool.exists() else set()
    subprocess.run([sys.executable, "-c", WRITE, str(out)], env=env, check=True)
    (path,) = set(spool.glob(f"*{SUFFIX}")) - before
    return path


def test_trace_files_are_private(tracer_lib, tmp_path):
    path = trace_file(tracer_lib, tmp_path / "spool", tmp_path / "a.dat")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "spool").stat().st_mode) == 0o700


def test_an_unsafe_spool_is_refused_and_said_once(tracer_lib, tmp_path):
    """World-writable without the sticky bit: anyone could swap the files; nothing written."""
    spool = tmp_path / "open"
    spool.mkdir()
    spool.chmod(0o777)
    env = env_for(tracer_lib, LD_PRELOAD=str(tracer_lib), IOLENS_SPOOL=str(spool))
    code = WRITE + "print('done', flush=True)\n"
    res = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "a.dat")], env=env, capture_output=True
    )
    assert res.returncode == 0 and res.stdout == b"done\n"
    assert res.stderr.decode().count("iolens: cannot write") == 1
    assert "sticky" in res.stderr.decode() and os.listdir(spool) == []


def test_the_lost_trace_line_never_lands_in_the_programs_files(tracer_lib, tmp_path):
    """A program that closed stderr and opened its own file as fd 2: not a byte of ours."""
    spool = tmp_path / "open"
    spool.mkdir()
    spool.chmod(0o777)
    code = (
        "import os, sys\nos.close(2)\n"
        "fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o600)\n"
        "assert fd == 2\nos.write(fd, b'data')\n"
    )
    env = env_for(tracer_lib, LD_PRELOAD=str(tracer_lib), IOLENS_SPOOL=str(spool))
    out = tmp_path / "data"
    subprocess.run([sys.executable, "-c", code, str(out)], env=env, check=True)
    assert out.read_bytes() == b"data"
    assert os.listdir(spool) == []


@pytest.mark.filterwarnings("error::RuntimeWarning")  # no silent garbage (NaN clock, overflow)
def test_corrupt_traces_are_input_errors_naming_the_file(tracer_lib, tmp_path):
    """Random damage to a real trace: an InputError naming the file, never another error."""
    data = trace_file(tracer_lib, tmp_path / "spool", tmp_path / "a.dat").read_bytes()
    rnd = random.Random(19)
    name = os.fsdecode(b"n\xff.iolens")  # a file name that is not UTF-8
    for _ in range(1500):
        d = bytearray(data)
        for _ in range(rnd.randint(1, 4)):
            d[rnd.randrange(len(d))] = rnd.randrange(256)
        if rnd.random() < 0.2:
            d = d[: rnd.randrange(len(d))]
        try:
            batch_of(decode(name, bytes(d))).conformed()
        except InputError as exc:
            assert str(exc).startswith("n\\xff.iolens")  # the file, printable


@pytest.mark.parametrize("clock", [float("nan"), float("inf"), -1.0, 1e300])
@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_a_damaged_clock_calibration_is_an_input_error(clock, tracer_lib, tmp_path):
    """Was: NaN or overflowing times cast silently to garbage timestamps."""
    data = bytearray(trace_file(tracer_lib, tmp_path / "spool", tmp_path / "a.dat").read_bytes())
    pos = fmt.PREAMBLE.itemsize
    while True:  # to the HEADER section
        sec = np.frombuffer(bytes(data), fmt.SECTION, 1, pos)[0]
        if int(sec["type"]) == fmt.SEC_HEADER:
            break
        pos += fmt.SECTION.itemsize + int(sec["length"])
    at = pos + fmt.SECTION.itemsize + fmt.HEADER.fields["ns_per_tick"][1]
    data[at : at + 8] = struct.pack("<d", clock)
    with pytest.raises(InputError, match="clock"):
        decode("x.iolens", bytes(data))


def test_import_reports_each_bad_file_and_imports_the_others(tracer_lib, tmp_path):
    spool = tmp_path / "spool"
    good = [trace_file(tracer_lib, spool, tmp_path / f"g{i}.dat") for i in range(2)]
    data = good[0].read_bytes()
    (spool / f"a-cut{SUFFIX}").write_bytes(data[: len(data) // 2])
    (spool / f"b-junk{SUFFIX}").write_bytes(b"IOLTRACE" + b"\xff" * 100)
    db = tmp_path / "db.duckdb"
    res = iolens("import", "trace", str(spool), "--db", str(db), env=env_for(tracer_lib))
    assert res.returncode == 2, res.stderr
    errors = [x for x in res.stderr.splitlines() if x.startswith("error:")]
    assert len(errors) == 2 and "Traceback" not in res.stderr
    assert f"a-cut{SUFFIX}" in errors[0] and f"b-junk{SUFFIX}" in errors[1]
    assert "Imported 2 trace file(s)" in res.stdout
    assert sorted(p.name for p in (spool / "bad").iterdir()) == [
        f"a-cut{SUFFIX}",
        f"b-junk{SUFFIX}",
    ]
    with DuckDBStore(db) as store:
        paths = store.query("SELECT path FROM files").column("path").to_pylist()
    assert {str(tmp_path / "g0.dat"), str(tmp_path / "g1.dat")} <= set(paths)
    again = iolens("import", "trace", str(spool), "--db", str(db), env=env_for(tracer_lib))
    assert again.returncode == 0 and "2 already loaded." in again.stdout  # bad/ set aside


def test_trace_of_a_program_opening_a_non_utf8_name(tracer_lib, tmp_path):
    """Was: exit 1 with a traceback although the program exited 0 (a Slurm job FAILED)."""
    db = tmp_path / "db.duckdb"
    name = os.fsencode(tmp_path) + b"/bad\xff\xfe"
    res = iolens(
        "trace", "--db", str(db), "--spool", str(tmp_path / "sp"), "--", "touch", name,
        env=env_for(tracer_lib),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "Traceback" not in res.stderr and "cannot take" not in res.stderr
    with DuckDBStore(db) as store:
        paths = store.query("SELECT path FROM files").column("path").to_pylist()
    assert f"{tmp_path}/bad\\xff\\xfe" in paths


def test_a_sigkilled_process_is_reported_and_its_partial_trace_removed(tracer_lib, tmp_path):
    spool = tmp_path / "sp"
    res = iolens(
        "trace", "--db", str(tmp_path / "db.duckdb"), "--spool", str(spool), "--",
        sys.executable, "-c", KILLED, str(tmp_path / "k.dat"),
        env=env_for(tracer_lib, IOLENS_BUFFER_MB="1"),
    )  # fmt: skip
    assert res.returncode == 137, res.stderr
    assert "killed before it could finish its trace" in res.stderr
    assert list(spool.rglob("*")) == []  # no .partial left behind, no run folder


@pytest.fixture
def full_disk(tmp_path):
    with small_tmpfs(tmp_path / "full", "64k") as mnt:
        (mnt / "sp").mkdir(mode=0o700)
        with open(mnt / "fill", "wb") as f, contextlib.suppress(OSError):
            f.write(b"\0" * (1 << 20))
        yield mnt / "sp"


def test_a_trace_lost_to_a_full_disk_is_said(tracer_lib, tmp_path, full_disk):
    """The tracer says so once on stderr; the program's own output and status are intact;
    `iolens trace` reports the lost trace in its exit warning."""
    code = WRITE + "import os\nprint('errno kept' if os.write(1, b'') == 0 else '')\n"
    res = iolens(
        "trace", "--db", str(tmp_path / "db.duckdb"), "--spool", str(full_disk), "--",
        sys.executable, "-c", code, str(tmp_path / "a.dat"),
        env=env_for(tracer_lib),
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout == "errno kept\n" and (tmp_path / "a.dat").stat().st_size == 1000
    assert res.stderr.count("no space left on device") == 1
    assert "the tracer could not write it" in res.stderr
    assert list(full_disk.iterdir()) == []  # no mark or run folder left behind


def test_iolens_trace_exits_with_the_programs_status_whatever_fails_in_iolens(
    tracer_lib, tmp_path, monkeypatch, capsys
):
    from iolens.present.cli import tracing

    def broken(*_args: object) -> None:
        raise RuntimeError("something inside iolens")

    monkeypatch.setenv("IOLENS_LIBRARY", str(tracer_lib))
    monkeypatch.setattr(tracing, "_after_run", broken)
    with pytest.raises(SystemExit) as ended:
        tracing.trace(["sh", "-c", "exit 3"], db=tmp_path / "db.duckdb", spool=tmp_path / "sp")
    assert ended.value.code == 3
    said = capsys.readouterr().err
    assert "warning: the trace was not handled (something inside iolens)" in said
