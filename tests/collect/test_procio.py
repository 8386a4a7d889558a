"""The server-process source: a real process's /proc files (golden, checked against what
it wrote) and a live child doing known I/O."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from iolens.collect.config import AgentConfig
from iolens.collect.runner import build_agent
from iolens.collect.sources import SOURCES
from iolens.collect.sources.procio import ProcioSource
from iolens.errors import InputError
from tests.golden import check_golden, reading_rows

CASE = Path(__file__).resolve().parents[1] / "cases" / "collect" / "procio" / "writer-3mib"


def test_golden_and_what_the_process_wrote() -> None:
    got = reading_rows(list(ProcioSource("oss1", names=["python3"]).collect(CASE)))
    check_golden(CASE / "expected.json", got)
    by = {r["metric"]: r["value"] for r in got}
    assert by["wchar"] >= 3 << 20 and by["write_bytes"] >= 3 << 20  # PROVENANCE.md
    assert by["syscw"] >= 3
    assert {r["component"] for r in got} == {"oss1:python3:9450"}
    assert list(ProcioSource("oss1", names=["mfsmaster"]).collect(CASE)) == []


def test_a_live_process_is_read_with_its_cpu() -> None:
    code = (
        "import os, sys, time\n"
        "fd = os.open(os.devnull, os.O_WRONLY)\n"
        "for _ in range(4): os.write(fd, bytes(1 << 18))\n"
        "t = time.process_time()\n"
        "while time.process_time() - t < 0.2: pass\n"
        "os.write(1, b'r'); sys.stdin.read()"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert child.stdout is not None and child.stdout.read(1) == b"r"
        comm = Path(f"/proc/{child.pid}/comm").read_text().strip()
        got = {
            r.metric: r
            for r in ProcioSource("h", names=[comm]).collect(Path("/"))
            if r.component == f"h:{comm}:{child.pid}"
        }
        assert got["wchar"].value >= 1 << 20  # what it wrote to /dev/null
        assert got["cpu_seconds"].value >= 0.2  # what it burnt
        assert all(r.counter for r in got.values())
    finally:
        child.kill()
        child.wait()


def test_names_come_from_the_config_and_are_checked() -> None:
    cfg = AgentConfig.model_validate(
        {
            "agent": {"spool": "/tmp/iolens-test-spool-procio"},
            "sources": {"procio": {"names": ["mfsmaster"]}},
        }
    )
    (src,) = [s for s in build_agent(cfg).sources if s.name == "procio"]
    assert src.names == frozenset({"mfsmaster"})  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="list of names"):
        ProcioSource("h", names="mfsmaster")
    assert SOURCES["procio"] is ProcioSource and not ProcioSource.DEFAULT_ENABLED


def test_damaged_stat_names_the_file(tmp_path: Path) -> None:
    d = tmp_path / "proc" / "42"
    d.mkdir(parents=True)
    (d / "comm").write_text("mfsmaster\n")
    (d / "io").write_text("rchar: 1\nwchar: 2\n")
    (d / "stat").write_text("42 (mfsmaster) S 1\n")
    with pytest.raises(InputError, match="stat"):
        list(ProcioSource("h").collect(tmp_path))
