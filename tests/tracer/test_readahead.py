"""The read-ahead plug-in (SIOX FadviseReadAhead, `IOLENS_READAHEAD=1`).

It must never change what the application reads (bytes, return values, errno), must
issue `posix_fadvise(WILLNEED)` for the next block of a confirmed strided stream (seen
with strace, and in the page cache with mincore), and nothing for random or contiguous
reads or when it is off.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.tracer.conftest import HERE, compile_c, needs_cc

pytestmark = needs_cc

STRIDE = 20 * 1024
COUNT = 200


@pytest.fixture(scope="module")
def strided(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("ra-bin")
    return compile_c(HERE / "workloads" / "strided.c", out / "strided", "-Wall", "-Wextra")


@pytest.fixture(scope="module")
def datafile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("ra-data") / "data.bin"
    with open(path, "wb") as f:
        f.write(os.urandom(16 << 20))
        f.flush()
        os.fsync(f.fileno())  # dirty pages cannot be dropped
    return path


def env_for(lib: Path | None, spool: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    if lib is not None:
        env |= {"LD_PRELOAD": str(lib), "IOLENS_SPOOL": str(spool), "IOLENS_JOB_ID": "ra"}
    return env | extra


def run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(cmd, env=env, capture_output=True, timeout=120)


def test_reads_are_byte_identical_with_and_without(
    tracer_lib: Path, strided: Path, datafile: Path, tmp_path: Path
) -> None:
    cmd = [str(strided), "data", str(datafile), str(STRIDE), "1024", str(COUNT)]
    plain = run(cmd, env_for(None, tmp_path))
    assert plain.returncode == 0, plain.stderr
    assert len(plain.stdout) == COUNT * 1024 + 512  # the blocks and the short tail read
    assert b"pread-negative rc=-1 errno=22" in plain.stderr
    assert b"read-closed rc=-1 errno=9" in plain.stderr
    variants = [
        {},
        {"IOLENS_READAHEAD": "0"},
        {"IOLENS_READAHEAD": "1"},
        {"IOLENS_READAHEAD": "1", "IOLENS_READAHEAD_AFTER": "1", "IOLENS_READAHEAD_DEPTH": "8"},
    ]
    for i, extra in enumerate(variants):
        res = run(cmd, env_for(tracer_lib, tmp_path / f"spool{i}", **extra))
        assert res.returncode == 0, (extra, res.stderr)
        assert res.stdout == plain.stdout, extra
        assert res.stderr == plain.stderr, extra  # every return value and errno


def test_trace_is_unchanged_by_the_plugin(
    tracer_lib: Path, strided: Path, datafile: Path, tmp_path: Path
) -> None:
    from iolens.tracefile import decode_dir

    cmd = [str(strided), "data", str(datafile), str(STRIDE), "1024", str(COUNT)]
    reads = {}
    for on in ("0", "1"):
        spool = tmp_path / f"spool{on}"
        assert run(cmd, env_for(tracer_lib, spool, IOLENS_READAHEAD=on)).returncode == 0
        traces = list(decode_dir(spool))
        rows = [r for t in traces for r in t.client_io.to_pylist()]
        # the plug-in's own posix_fadvise hints are not the program's: never recorded
        assert not [r for r in rows if r["op"] == "fadvise"]
        assert sum(t.missed_calls for t in traces) == 0
        reads[on] = sorted(
            (r["offset"], r["size"], r["stride"], r["count"]) for r in rows if r["op"] == "read"
        )
    assert reads["0"] == reads["1"]
    # + the short tail read and the two reads at EOF (successful, 0 bytes)
    assert sum(c for *_x, c in reads["1"]) == COUNT + 3


def fadvise_calls(
    tracer_lib: Path, cmd: list[str], tmp_path: Path, **extra: str
) -> list[tuple[int, int, str]]:
    """(offset, length, advice) of every fadvise64 system call the program made."""
    if shutil.which("strace") is None:
        pytest.skip("strace not installed")
    tmp_path.mkdir(parents=True, exist_ok=True)
    log = tmp_path / "strace.txt"
    env = env_for(None, tmp_path) | {"IOLENS_SPOOL": str(tmp_path / "spool")} | extra
    res = run(
        ["strace", "-f", "-qq", "-o", str(log), "-e", "trace=fadvise64", "-E",
         f"LD_PRELOAD={tracer_lib}", *cmd],
        env,
    )  # fmt: skip
    if res.returncode != 0 and b"ptrace" in res.stderr:
        pytest.skip("strace cannot trace here: " + res.stderr.decode()[:200])
    assert res.returncode == 0, res.stderr
    pat = re.compile(r"fadvise64\(\d+, (\d+), (\d+), (POSIX_FADV_\w+)\)")
    return [(int(a), int(b), c) for a, b, c in pat.findall(log.read_text())]


def test_willneed_issued_for_the_next_strided_block(
    tracer_lib: Path, strided: Path, datafile: Path, tmp_path: Path
) -> None:
    cmd = [str(strided), "data", str(datafile), str(STRIDE), "1024", str(COUNT)]
    hints = fadvise_calls(tracer_lib, cmd, tmp_path, IOLENS_READAHEAD="1")
    # reads 0 and 1 give the stride, reads 2 and 3 confirm it (IOLENS_READAHEAD_AFTER=2):
    # from read 3 on, every read asks for the block after it
    assert hints == [(k * STRIDE, 4096, "POSIX_FADV_WILLNEED") for k in range(4, COUNT + 1)]
    assert fadvise_calls(tracer_lib, cmd, tmp_path / "off", IOLENS_READAHEAD="0") == []
    assert fadvise_calls(tracer_lib, cmd, tmp_path / "unset") == []
    # deeper: the next 4 blocks stay advised, each hint once
    deep = fadvise_calls(tracer_lib, cmd, tmp_path / "deep", IOLENS_READAHEAD="1",
                         IOLENS_READAHEAD_DEPTH="4")  # fmt: skip
    offsets = [o for o, _n, _a in deep]
    assert offsets == [k * STRIDE for k in range(4, COUNT + 4)]


def test_no_hints_for_random_or_contiguous_reads(
    tracer_lib: Path, strided: Path, datafile: Path, tmp_path: Path
) -> None:
    for i, pattern in enumerate((["random", "1024", "300"], ["seq", "4096", "300"])):
        cmd = [str(strided), pattern[0], str(datafile), *pattern[1:]]
        assert fadvise_calls(tracer_lib, cmd, tmp_path / str(i), IOLENS_READAHEAD="1") == []


def test_predicted_block_is_in_the_page_cache(
    tracer_lib: Path, strided: Path, datafile: Path, tmp_path: Path
) -> None:
    stride = 1 << 20  # beyond the kernel's own read-around of a 1 KiB miss
    cmd = [str(strided), "resident", str(datafile), str(stride), "10"]
    seen = {}
    for on in ("0", "1"):
        res = run(cmd, env_for(tracer_lib, tmp_path / f"spool{on}", IOLENS_READAHEAD=on))
        assert res.returncode == 0, res.stderr
        kv = dict(line.split() for line in res.stdout.decode().splitlines())
        if kv["resident_before"] != "0":
            pytest.skip("cannot drop this file system's pages (tmpfs?)")
        seen[on] = kv
    assert seen["0"]["next"] == "0"
    assert seen["1"]["next"] == "1"  # posix_fadvise(WILLNEED) brought it in
    assert seen["1"]["later"] == "0"  # and only the next block (IOLENS_READAHEAD_DEPTH=1)
