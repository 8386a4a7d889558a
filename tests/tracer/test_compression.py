"""zstd-compressed RECORDS sections (format version 5): a real random-offset workload under
the real tracer decodes to the same records with compression on and off, the compressed
file is smaller, and a damaged frame is an InputError naming the file."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from iolens.errors import InputError
from iolens.tracefile import decode
from iolens.tracefile import format as fmt

from .conftest import expected, paths_of, run, traced

N = 20_000  # random-offset pwrites: ~20 RECORDS chunks, each 64 KiB uncompressed


def sections(path: Path) -> list[tuple[int, int, int]]:
    """(type, offset, length) of every section, read straight from the bytes."""
    data = path.read_bytes()
    pos, out = fmt.PREAMBLE.itemsize, []
    while pos < len(data):
        kind, _aux, length = struct.unpack_from("<IIQ", data, pos)
        out.append((kind, pos, length))
        pos += fmt.SECTION.itemsize + length
    return out


def records(path: Path) -> list[tuple]:
    """The scatter file's records, without times and ids (which differ between runs)."""
    t = decode(path)
    paths = paths_of(t)
    cols = ("op", "file_id", "offset", "size", "stride", "count")
    rows = zip(*(t.client_io.column(c).to_pylist() for c in cols), strict=True)
    return sorted((r[0], *r[2:]) for r in rows if "/scatter" in paths[r[1]])


@pytest.fixture(scope="module")
def pair(tracer_lib, workload, tmp_path_factory):
    """The same scatter workload traced compressed (default) and with IOLENS_COMPRESS=0."""
    tmp = tmp_path_factory.mktemp("zstd")
    on = run(workload, "scatter", tmp, n=N, lib=tracer_lib, tag="on")
    plain = {"IOLENS_COMPRESS": "0"}
    off = run(workload, "scatter", tmp, n=N, lib=tracer_lib, tag="off", env=plain)
    assert on.rc == 0 and off.rc == 0, on.stderr + off.stderr
    (f_on,) = on.spool.glob("*.iolens")
    (f_off,) = off.spool.glob("*.iolens")
    return on, off, f_on, f_off


def test_compressed_and_plain_decode_to_the_workloads_calls(pair):
    on, off, f_on, f_off = pair
    kinds_on = {k for k, _, _ in sections(f_on)}
    kinds_off = {k for k, _, _ in sections(f_off)}
    assert fmt.SEC_ZSTD in kinds_on and fmt.SEC_RECORDS not in kinds_on
    assert fmt.SEC_ZSTD not in kinds_off and fmt.SEC_RECORDS in kinds_off
    # both against the workload's own counts of calls and bytes
    assert traced(on.traces(), on.base) == expected(on)
    assert traced(off.traces(), off.base) == expected(off)
    assert expected(on)[0]["write"] == N


def test_compressed_records_equal_plain_records(pair):
    """Same program, same pseudo-random offsets: the same records, call for call."""
    _, _, f_on, f_off = pair
    a, b = records(f_on), records(f_off)
    assert len(a) > N // 2  # random offsets barely merge
    assert a == b


def test_compressed_file_is_smaller(pair):
    _, _, f_on, f_off = pair
    on, off = f_on.stat().st_size, f_off.stat().st_size
    assert on * 2 < off, (on, off)


def test_corrupt_frame_names_the_file(pair, tmp_path):
    _, _, f_on, _ = pair
    data = bytearray(f_on.read_bytes())
    _, at, length = next(s for s in sections(f_on) if s[0] == fmt.SEC_ZSTD)
    body = at + fmt.SECTION.itemsize + fmt.ZSECTION.itemsize
    mid = body + length // 2
    data[mid : mid + 16] = bytes(16)  # zero 16 bytes inside the frame
    bad = tmp_path / "damaged.iolens"
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError) as e:
        decode(bad)
    msg = str(e.value)
    assert "damaged.iolens" in msg and f"compressed section at byte {at}" in msg


def test_wrong_length_in_head_is_caught(pair, tmp_path):
    _, _, f_on, _ = pair
    data = bytearray(f_on.read_bytes())
    _, at, _ = next(s for s in sections(f_on) if s[0] == fmt.SEC_ZSTD)
    head = at + fmt.SECTION.itemsize
    raw_len = struct.unpack_from("<Q", data, head + 8)[0]
    struct.pack_into("<Q", data, head + 8, raw_len - 64)
    bad = tmp_path / "short.iolens"
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"short.iolens: compressed section at byte \d+"):
        decode(bad)


def test_compressed_section_in_an_older_version_is_refused(pair, tmp_path):
    """A compressed section exists only from format version 5: in a file that says 4 it
    is damage, not something to decompress."""
    _, _, f_on, _ = pair
    data = bytearray(f_on.read_bytes())
    struct.pack_into("<I", data, 8, 4)
    bad = tmp_path / "old.iolens"
    bad.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"old.iolens: compressed section in a version-4 file"):
        decode(bad)
