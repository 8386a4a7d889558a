"""Programs LD_PRELOAD cannot trace: `iolens trace` says which and why (issue 23)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from iolens.tracefile.preloadable import untraceable
from tests.conftest import run_cli

C_PROGRAM = (
    '#include <stdio.h>\nint main(int c, char **v) { FILE *f = fopen(v[1], "w");\n'
    'fputs("hello\\n", f); return fclose(f); }\n'
)
GO_PROGRAM = (
    'package main\nimport "os"\nfunc main() { os.WriteFile(os.Args[1], []byte("hello"), 0o644) }\n'
)


def _build_static(tmp: Path) -> Path:
    (tmp / "s.c").write_text(C_PROGRAM)
    res = subprocess.run(["gcc", "-static", "-o", str(tmp / "s"), str(tmp / "s.c")],
                         capture_output=True, text=True)  # fmt: skip
    if res.returncode != 0:
        pytest.skip(f"no static libc to link against: {res.stderr[-200:]}")
    return tmp / "s"


def _build_go(tmp: Path) -> Path:
    if shutil.which("go") is None:
        pytest.skip("no Go toolchain")
    (tmp / "g.go").write_text(GO_PROGRAM)
    env = dict(os.environ, GOCACHE=str(tmp / "cache"), GOPATH=str(tmp / "gopath"),
               GOFLAGS="", GO111MODULE="off", CGO_ENABLED="0")  # fmt: skip
    res = subprocess.run(["go", "build", "-o", str(tmp / "g"), str(tmp / "g.go")],
                         env=env, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert res.returncode == 0, res.stderr
    return tmp / "g"


@pytest.mark.parametrize("kind", ["static", "go"])
def test_untraceable_programs_are_named_with_their_reason(kind, tmp_path):
    prog = _build_static(tmp_path) if kind == "static" else _build_go(tmp_path)
    out = tmp_path / "out.txt"
    res = run_cli("trace", "--db", str(tmp_path / "t.duckdb"), "--json", "--", str(prog), str(out))
    assert res.returncode == 0, res.stderr
    assert out.read_bytes().startswith(b"hello")  # the program ran, untouched
    summary = json.loads(res.stdout)
    assert summary["processes"] == 0
    word = "statically linked" if kind == "static" else "Go program"
    assert any(word in w for w in summary["lost"]), summary["lost"]
    plain = run_cli("trace", "--db", str(tmp_path / "t.duckdb"), "--", str(prog), str(out))
    assert "traced no process" in plain.stderr and word in plain.stderr
    assert "see `iolens job" not in plain.stderr


def test_dynamic_programs_and_their_scripts_are_not_flagged(tmp_path):
    assert untraceable(Path(shutil.which("cat") or "/bin/cat")) is None
    script = tmp_path / "run.sh"
    script.write_text("#!/usr/bin/env sh\nexit 0\n")
    assert untraceable(script) is None
    static = _build_static(tmp_path)
    wrapper = tmp_path / "wrap"
    wrapper.write_text(f"#!{static}\n")
    assert "statically linked" in (untraceable(wrapper) or "")
    (tmp_path / "junk").write_bytes(b"\x7fELF\x02\x01" + b"\x00" * 10)  # truncated: no guess
    assert untraceable(tmp_path / "junk") is None
