"""MooseFS layouts of traced files: the agent's pure-Python path walk agrees with the
server's decoder on a real trace, and the layouts it ships fill the files' `osts`."""

from __future__ import annotations

from pathlib import Path

import pytest

from iolens.collect.file_layouts import MoosefsLayouts, trace_paths
from iolens.collect.sources.tracer_spool import TracerSpoolSource
from iolens.errors import InputError
from iolens.ship.wire import decode, encode
from iolens.tracefile.reader import read
from tests.traced import traced_python

WRITE_TWO = """
import os, sys
for name in ("a.dat", "b\\udcffx.dat"):  # one name not UTF-8
    p = os.path.join(sys.argv[1].encode(), os.fsencode(name))
    fd = os.open(p, os.O_CREAT | os.O_WRONLY, 0o600)
    os.write(fd, b"x" * 4096)
    os.close(fd)
"""


@pytest.fixture
def one_trace(tmp_path: Path) -> Path:
    spool, data = tmp_path / "spool", tmp_path / "data"
    spool.mkdir()
    data.mkdir()
    traced_python(spool, WRITE_TWO, str(data), job="j1")
    (trace,) = spool.glob("*.iolens")
    return trace


def test_paths_walk_matches_the_decoder(one_trace: Path) -> None:
    got = trace_paths(one_trace.read_bytes())
    assert set(got) == set(read(one_trace).paths.values())
    assert any(p.endswith("b\\xffx.dat") for p in got)  # escaped as the server escapes it


def test_shipped_layouts_fill_the_files_osts(one_trace: Path, tmp_path: Path) -> None:
    src = TracerSpoolSource("n1", one_trace.parent, ask_layouts=False)
    ((batch, _done),) = list(src.batches(Path("/")))
    wanted = next(p for p in trace_paths(batch.trace[1]) if p.endswith("a.dat"))  # type: ignore[index]
    batch.extra["layouts"] = {wanted: ["192.0.2.2:19423", "192.0.2.2:19425"]}
    files = decode(encode(batch)).files
    assert files is not None
    osts = dict(
        zip(files.column("path").to_pylist(), files.column("osts").to_pylist(), strict=True)
    )
    assert osts[wanted] == ["192.0.2.2:19423", "192.0.2.2:19425"]
    assert all(v is None for p, v in osts.items() if p != wanted)


def test_garbage_layouts_are_refused_naming_the_part(one_trace: Path) -> None:
    src = TracerSpoolSource("n1", one_trace.parent, ask_layouts=False)
    ((batch, _done),) = list(src.batches(Path("/")))
    batch.extra["layouts"] = {"/x": [1, 2]}
    with pytest.raises(InputError, match="layouts"):
        decode(encode(batch))


def test_no_moosefs_mount_no_question(tmp_path: Path) -> None:
    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "mounts").write_text("/dev/sda1 / ext4 rw 0 0\n")
    assert MoosefsLayouts(tmp_path).of(["/a"], 0) == {}
