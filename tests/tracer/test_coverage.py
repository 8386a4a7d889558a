"""Calls the tracer must see, probed with real programs under the real tracer.

Each probe (workloads/coverage.c, or a stock tool such as `cp`) reports its own data
calls on files under BASE; the decoded trace must hold exactly those (path, op, offset,
size) events - after expanding each record's fixed-stride run - and the same bytes per
file in the summaries.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.tracer.conftest import HERE, compile_c, needs_cc, paths_of, run

pytestmark = needs_cc

FORTIFY = {"plain": (), "fortified": ("-D_FORTIFY_SOURCE=2",)}


@pytest.fixture(scope="session", params=sorted(FORTIFY))
def probe(request, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp(f"coverage-{request.param}")
    return compile_c(HERE / "workloads" / "coverage.c", out / "coverage", *FORTIFY[request.param])


def events(traces, base: Path, also: set[str] = frozenset()) -> Counter:
    """(path, op, offset, size) of every data call on files under `base` (or named in
    `also`), runs expanded."""
    got: Counter = Counter()
    for t in traces:
        paths = paths_of(t)
        for row in t.client_io.to_pylist():
            path = paths[row["file_id"]]
            if row["op"] not in ("read", "write") or row["size"] == 0:
                continue
            if not path.startswith(str(base)) and path not in also:
                continue
            for k in range(row["count"]):
                got[(path, row["op"], row["offset"] + k * row["stride"], row["size"])] += 1
    return got


def claimed(stderr: str) -> Counter:
    """The events the probe reported for itself."""
    evs = [json.loads(x)["ev"] for x in stderr.splitlines() if x.startswith('{"ev"')]
    return Counter(tuple(e) for e in evs)


def per_file(traces, base: Path, layer: str) -> dict[str, tuple[int, int]]:
    """Bytes read and written per file under `base`, from the summaries."""
    out: dict[str, tuple[int, int]] = {}
    for t in traces:
        paths = paths_of(t)
        for s in t.summaries.to_pylist():
            p = paths[s["file_id"]]
            moved = s["bytes_read"] or s["bytes_written"]
            if p.startswith(str(base)) and s["layer"] == layer and moved:
                rb, wb = out.get(p, (0, 0))
                out[p] = (rb + s["bytes_read"], wb + s["bytes_written"])
    return out


def run_probe(probe: Path, mode: str, tmp: Path, lib: Path):
    r = run([str(probe), mode, str(tmp / f"base-{mode}")], mode, tmp, lib=lib)
    assert r.rc == 0, r.stderr
    return r


def totals(c: Counter) -> dict[str, tuple[int, int]]:
    out: dict[str, list[int]] = {}
    for (path, op, _off, size), n in c.items():
        out.setdefault(path, [0, 0])[op == "write"] += size * n
    return {p: (v[0], v[1]) for p, v in out.items()}


# ---- 1. copy_file_range, sendfile, splice ------------------------------------------------


def test_transfer_calls_are_a_read_and_a_write(probe, tracer_lib, tmp_path):
    r = run_probe(probe, "transfer", tmp_path, tracer_lib)
    want = claimed(r.stderr)
    assert want, r.stderr
    got = events(r.traces(), r.base)
    assert got == want
    assert per_file(r.traces(), r.base, "posix") == totals(want)


def _env(lib: Path, spool: Path) -> dict[str, str]:
    e = {k: v for k, v in os.environ.items() if not k.startswith(("IOLENS_", "LD_PRELOAD"))}
    return e | {"IOLENS_SPOOL": str(spool), "IOLENS_JOB_ID": "t", "LD_PRELOAD": str(lib)}


@pytest.mark.parametrize("tool", ["cp", "cat", "shutil"])
def test_copy_tools_bytes_are_seen(tool, tracer_lib, tmp_path):
    """`cp`, `cat` (copy_file_range) and shutil.copyfile (sendfile): the source's size
    read, the destination's size written."""
    base = tmp_path / "base"
    base.mkdir()
    src, dst = base / "src.bin", base / "dst.bin"
    src.write_bytes(os.urandom(3 * 1024 * 1024 + 17))
    size = src.stat().st_size
    spool = tmp_path / "spool"
    cmds = {
        "cp": ["cp", str(src), str(dst)],
        "cat": ["cat", str(src)],
        "shutil": [
            sys.executable,
            "-c",
            f"import shutil; shutil.copyfile({str(src)!r}, {str(dst)!r})",
        ],
    }
    if shutil.which(cmds[tool][0]) is None:
        pytest.skip(f"no {tool}")
    with open(dst, "wb") as out:
        res = subprocess.run(cmds[tool], stdout=out, env=_env(tracer_lib, spool), timeout=60)
    assert res.returncode == 0
    assert dst.stat().st_size == size
    from iolens.tracefile import decode_dir

    files = per_file(list(decode_dir(spool)), base, "posix")
    assert files[str(src)][0] == size
    if tool != "cat":  # cat writes to its stdout, "<STDOUT>"
        assert files[str(dst)][1] == size


# ---- 2. stdio characters, lines, formatted output, positions -------------------------------


def test_stdio_text_calls_are_seen_at_their_offsets(probe, tracer_lib, tmp_path):
    """fputc/putc/fgetc/getc (and *_unlocked), getline/getdelim, puts/printf/vprintf/
    putchar, dprintf, with rewind, ungetc and fgetpos/fsetpos moving the stream."""
    r = run_probe(probe, "text", tmp_path, tracer_lib)
    want = claimed(r.stderr)
    assert want, r.stderr
    assert events(r.traces(), r.base) == want
    stdio = per_file(r.traces(), r.base, "stdio")
    posix = per_file(r.traces(), r.base, "posix")
    assert {**stdio, **posix} == totals(want)
    assert set(posix) == {str(r.base / "dp")}


def test_single_characters_merge_into_one_record(probe, tracer_lib, tmp_path):
    """1000 fputc calls in a row are one record of count 1000, not 1000 records."""
    r = run_probe(probe, "text", tmp_path, tracer_lib)
    (t,) = r.traces()
    paths = paths_of(t)
    s1 = str(r.base / "s1")
    ones = [
        x for x in t.client_io.to_pylist()
        if paths[x["file_id"]] == s1 and x["op"] == "write" and x["size"] == 1
    ]  # fmt: skip
    assert ones[0]["offset"] == 0 and ones[0]["count"] >= 1000 and ones[0]["stride"] == 1


# ---- 3. temporary files ---------------------------------------------------------------------


def test_temporary_files_keep_their_io(probe, tracer_lib, tmp_path):
    """mkstemp/mkostemp/mkstemps/mkostemps files by their generated names, and tmpfile's
    unnamed file by its /proc link, with every byte at its offset."""
    r = run_probe(probe, "tmp", tmp_path, tracer_lib)
    want = claimed(r.stderr)
    tmp = {p for p, *_ in want if not p.startswith(str(r.base))}
    assert len(tmp) == 1 and next(iter(tmp)).endswith("(deleted)")
    assert len({p for p, *_ in want}) == 5
    assert events(r.traces(), r.base, also=tmp) == want


# ---- 5. close_range / closefrom ----------------------------------------------------------------


@pytest.mark.parametrize("mode", ["close_range", "closefrom"])
def test_closed_range_forgets_its_fds(mode, probe, tracer_lib, tmp_path):
    """After the file's fds are closed in one call, a pipe reusing them is not the file."""
    r = run_probe(probe, mode, tmp_path, tracer_lib)
    want = claimed(r.stderr)
    assert events(r.traces(), r.base) == want
    (t,) = r.traces()
    closes = [x for x in t.summaries.to_pylist() if paths_of(t)[x["file_id"]].endswith("/f")]
    assert closes[0]["close_ops"] == 2  # the file's fd and its dup


# ---- 6. POSIX AIO -----------------------------------------------------------------------------


def test_aio_bytes_are_counted(probe, tracer_lib, tmp_path):
    """aio_write, aio_read and a lio_listio of a write, a read and a no-op."""
    r = run_probe(probe, "aio", tmp_path, tracer_lib)
    want = claimed(r.stderr)
    assert len(want) == 4, r.stderr
    assert events(r.traces(), r.base) == want
    assert per_file(r.traces(), r.base, "posix") == totals(want)
