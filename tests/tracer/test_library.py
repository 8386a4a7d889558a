"""library_path() and the on/off switch."""

from __future__ import annotations

import pytest

from iolens.errors import IolensError
from iolens.tracefile import library_path
from tests.tracer.conftest import needs_cc, run


def test_library_path_prefers_the_environment(tmp_path, monkeypatch):
    lib = tmp_path / "libiolens.so"
    lib.write_bytes(b"")
    monkeypatch.setenv("IOLENS_LIBRARY", str(lib))
    assert library_path() == lib.resolve()
    monkeypatch.setenv("IOLENS_LIBRARY", str(tmp_path / "missing.so"))
    with pytest.raises(IolensError, match="does not exist"):
        library_path()


@needs_cc
def test_exports_only_wrappers(tracer_lib):
    import subprocess

    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(tracer_lib)], capture_output=True, text=True
    ).stdout
    names = {line.split()[-1] for line in out.splitlines() if line.strip()}
    assert {"open", "write", "pread64", "fopen", "fprintf", "__xstat", "_exit"} <= names
    assert not {n for n in names if n.startswith("iol_")}


@needs_cc
def test_disable_switch(tracer_lib, workload, tmp_path):
    r = run(workload, "nn", tmp_path, lib=tracer_lib, env={"IOLENS_DISABLE": "1"})
    assert r.rc == 0 and r.counts and r.traces() == []
