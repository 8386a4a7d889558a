"""The tracer's file decoder, fuzzed: byte damage to files the real tracer wrote (a traced
Python process writing, reading and listing files) and to the decoder tests' hand-built
files of every format version. Property: a TraceFile that `batch_of` turns into a batch,
or an InputError naming the file. The `@example`s are what it found
in issue 19, kept as regression cases."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from iolens.collect.sources.tracer_spool import check_framing
from iolens.tracefile import batch_of
from iolens.tracefile.trace import decode_bytes
from tests.fuzz.harness import fuzz, only_input_errors, scratch
from tests.fuzz.mutate import HOSTILE_BYTES
from tests.tracer.conftest import CC, ROOT
from tests.tracer.test_decoder import build

PROGRAM = """
import os, sys
d = sys.argv[1]
with open(os.path.join(d, "a.dat"), "wb") as f:
    for _ in range(64):
        f.write(b"x" * 4096)
with open(os.path.join(d, "a.dat"), "rb") as f:
    while f.read(65536):
        pass
os.listdir(d); os.stat(os.path.join(d, "a.dat")); os.unlink(os.path.join(d, "a.dat"))
"""


def _real_traces() -> list[bytes]:
    """Files the real tracer wrote for a small traced Python program ([] without cc)."""
    if shutil.which(CC) is None or shutil.which("make") is None:
        return []
    work = scratch("tracer")
    made = subprocess.run(
        ["make", "-s", "-C", str(ROOT / "tracer"), f"OUT={work}", f"CC={CC}"],
        capture_output=True,
    )
    if made.returncode != 0:
        return []
    spool, data = work / "spool", work / "data"
    spool.mkdir()
    data.mkdir()
    env = {"LD_PRELOAD": str(work / "libiolens.so"), "IOLENS_SPOOL": str(spool)}
    env |= {"IOLENS_JOB_ID": "fuzz-1", "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", PROGRAM, str(data)], env=env, check=True)
    return [p.read_bytes() for p in sorted(spool.rglob("*.iolens"))]


REAL = _real_traces()
SEEDS = REAL + [build(version=v) for v in (1, 2, 3)]


@st.composite
def damaged(draw: st.DrawFn) -> bytes:
    raw = bytearray(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 6))):
        at = draw(st.integers(0, len(raw)))
        kind = draw(st.integers(0, 4))
        if kind == 0:  # overwrite bytes
            junk = draw(st.binary(min_size=1, max_size=8) | st.sampled_from(HOSTILE_BYTES))
            raw[at : at + len(junk)] = junk
        elif kind == 1:  # a u32/u64 field becomes huge or zero
            raw[at : at + 4] = draw(
                st.sampled_from([b"\xff\xff\xff\xff", b"\0\0\0\0", b"\xff\xff\xff\x7f"])
            )
        elif kind == 2:  # truncate
            del raw[at:]
        elif kind == 3:  # cut a chunk out
            del raw[at : at + draw(st.integers(1, 64))]
        else:  # duplicate a chunk
            raw[at:at] = raw[at : at + draw(st.integers(1, 64))]
    return bytes(raw)


def test_seeds_include_real_traces() -> None:
    if not REAL:
        pytest.skip("no C compiler: fuzzing hand-built traces only")
    assert all(decode_bytes(b, "seed.iolens").records >= 0 for b in REAL)


@given(st.one_of(damaged(), damaged(), st.binary(max_size=512)))
@example(build(version=3)[:-16])  # issue 19: a truncated trace in the spool
@example(build(version=2)[:280] + b"\xa8" + build(version=2)[281:])  # IndexError, tables.py
@example(build(version=2).replace(b"/scratch/a.dat", b"/scratch/\xff.dat"))  # any path
@example(build(version=3).replace(b"node01", b"nod\xff01"))  # a non-UTF-8 host name
@fuzz(300)
def test_decode(data: bytes) -> None:
    name = "node01-4242-1-0.iolens"
    trace = only_input_errors(lambda: decode_bytes(data, name), name)
    if trace is not None:
        batch_of(trace)


@given(st.one_of(damaged(), st.binary(max_size=256)))
@example(build(version=3)[:-16])
@fuzz(300)
def test_agent_framing_check(data: bytes) -> None:
    """The node agent's own check (no decoder there): framing accepted means the
    server-side decoder sees a complete file; refused means an InputError to quarantine."""
    only_input_errors(lambda: check_framing(data, "n-1-1-0.iolens"), "n-1-1-0.iolens")
