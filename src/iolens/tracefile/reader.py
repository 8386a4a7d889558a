"""Split a tracer output file into its raw parts, validating as it goes.

Everything a later step relies on is checked here (magic, version, section bounds, the
END marker, file indexes), so a corrupt or truncated file fails with one InputError that
names the file and the problem, never with an IndexError deep inside numpy.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import zstandard

from iolens.errors import InputError
from iolens.tracefile import format as fmt
from iolens.tracefile.layout import Layout


@dataclass(frozen=True)
class RawTrace:
    """The sections of one file, still in the tracer's own units (ticks, indexes)."""

    header: np.void
    job_id: str
    host: str
    exe: str
    user: str
    records: np.ndarray  # fmt.RECORD
    thread_ids: np.ndarray  # uint32, one per record
    paths: dict[int, str]
    parents: dict[int, int]
    summaries: np.ndarray  # fmt.SUMMARY
    #: file index -> the MPI_Info hints passed when MPI-IO opened it ("key=value" lines)
    hints: dict[int, str] = field(default_factory=dict)
    #: file index -> its Lustre layout (format version 3, files on Lustre only)
    layouts: dict[int, Layout] = field(default_factory=dict)
    version: int = fmt.FORMAT_VERSION


def _text(b: bytes) -> str:
    """Any byte string is a valid path: bytes that are not UTF-8 become `\\xNN` escapes, so
    the text is valid UTF-8 for Arrow, DuckDB and JSON (a name with a literal backslash
    sequence reads the same: accepted, paths are for people to read)."""
    return b.decode("utf-8", "backslashreplace")


def read(path: str | Path, data: bytes | None = None) -> RawTrace:
    """Parse `path` (or `data`, the file's bytes, shipped by an agent); raise InputError if
    it is not a complete tracer file."""
    src = os.fsencode(path).decode("utf-8", "backslashreplace")
    if data is None:
        try:
            data = Path(path).read_bytes()
        except OSError as e:
            raise InputError(src, f"cannot read: {e.strerror or e}") from None
    if len(data) < fmt.PREAMBLE.itemsize:
        raise InputError(src, "truncated: shorter than the file preamble")
    pre = np.frombuffer(data, fmt.PREAMBLE, 1)[0]
    if bytes(pre["magic"]) != fmt.MAGIC:
        raise InputError(src, "not an iolens trace (bad magic)")
    version = int(pre["version"])
    if version not in fmt.READABLE_VERSIONS:
        raise InputError(
            src,
            f"format version {int(pre['version'])} (this iolens reads "
            f"{', '.join(map(str, fmt.READABLE_VERSIONS))})",
        )
    if int(pre["endian"]) != fmt.ENDIAN_MARK:
        raise InputError(src, "written on a big-endian host (not supported)")

    pos = fmt.PREAMBLE.itemsize
    blocks: list[np.ndarray] = []
    tids: list[np.ndarray] = []
    summaries: list[np.ndarray] = []
    header: np.void | None = None
    strings = b""
    paths: dict[int, str] = {}
    parents: dict[int, int] = {}
    hints: dict[int, str] = {}
    layouts: dict[int, Layout] = {}
    header_type = fmt.header_dtype(version)
    summary_type = fmt.summary_dtype(version)
    ended = False
    while pos < len(data):
        if ended:
            raise InputError(src, f"data after the END section at byte {pos}")
        if pos + fmt.SECTION.itemsize > len(data):
            raise InputError(src, f"truncated: partial section header at byte {pos}")
        sec = np.frombuffer(data, fmt.SECTION, 1, pos)[0]
        kind, aux, length = int(sec["type"]), int(sec["aux"]), int(sec["length"])
        body_at = pos + fmt.SECTION.itemsize
        if body_at + length > len(data):
            raise InputError(
                src, f"truncated: section at byte {pos} needs {length} bytes, file ends first"
            )
        body = data[body_at : body_at + length]
        if kind == fmt.SEC_ZSTD:
            if version < 5:
                raise InputError(
                    src, f"compressed section in a version-{version} file at byte {pos}"
                )
            kind, body = _unzstd(src, body, pos)
            length = len(body)
        if kind == fmt.SEC_RECORDS:
            if length % fmt.RECORD.itemsize:
                raise InputError(src, f"record block at byte {pos} has a partial record")
            recs = np.frombuffer(body, fmt.RECORD)
            blocks.append(recs)
            tids.append(np.full(len(recs), aux, np.uint32))
        elif kind == fmt.SEC_FILES:
            _files(src, body, pos, paths, parents, layouts)
        elif kind == fmt.SEC_SUMMARY:
            if length % summary_type.itemsize:
                raise InputError(src, f"summary section at byte {pos} has a partial entry")
            summaries.append(_summaries(np.frombuffer(body, summary_type)))
        elif kind == fmt.SEC_HEADER:
            if header is not None:
                raise InputError(src, f"second header at byte {pos}")
            if length < header_type.itemsize:
                raise InputError(src, f"header at byte {pos} is too short")
            header = np.frombuffer(body, header_type, 1)[0]
            strings = body[header_type.itemsize :]
        elif kind == fmt.SEC_HINTS:
            _hints(src, body, pos, hints)
        elif kind == fmt.SEC_END:
            ended = True
        else:
            raise InputError(src, f"unknown section type {kind:#x} at byte {pos}")
        pos = body_at + int(sec["length"])
    if not ended:
        raise InputError(src, "truncated: no END section (the process may have been killed)")
    if header is None:
        raise InputError(src, "no header section")

    lens = [int(header[k]) for k in ("len_job_id", "len_host", "len_exe", "len_user")]
    if sum(lens) > len(strings):
        raise InputError(src, "header strings are truncated")
    parts, at = [], 0
    for n in lens:
        parts.append(_text(strings[at : at + n]))
        at += n

    records = np.concatenate(blocks) if blocks else np.zeros(0, fmt.RECORD)
    summ = np.concatenate(summaries) if summaries else np.zeros(0, fmt.SUMMARY)
    known = set(paths) | {fmt.FILE_NONE}
    if layouts and version < 3:
        raise InputError(src, f"file layouts in a version-{version} file (added in version 3)")
    if set(hints) - known:
        bad_hint = min(set(hints) - known)
        raise InputError(src, f"hints refer to file index {bad_hint} not in the table")
    for name, arr in (("record", records["file"]), ("summary", summ["file"])):
        bad = set(np.unique(arr).tolist()) - known
        if bad:
            raise InputError(src, f"{name} refers to file index {min(bad)} not in the table")
    if len(records) and (
        int(records["op"].max()) >= fmt.op_count(version)
        or int(records["layer"].max()) >= len(fmt.LAYER_NAMES)
    ):
        raise InputError(src, "record with an unknown op or layer code")
    return RawTrace(
        header=header,
        job_id=parts[0],
        host=parts[1],
        exe=parts[2],
        user=parts[3],
        records=records,
        thread_ids=np.concatenate(tids) if tids else np.zeros(0, np.uint32),
        paths=paths,
        parents=parents,
        summaries=summ,
        hints=hints,
        layouts=layouts,
        version=version,
    )


def _files(
    src: str,
    body: bytes,
    at: int,
    paths: dict[int, str],
    parents: dict[int, int],
    layouts: dict[int, Layout],
) -> None:
    pos = 0
    size = fmt.FILE_ENTRY.itemsize
    while pos < len(body):
        if pos + size > len(body):
            raise InputError(src, f"file table at byte {at} ends inside an entry")
        e = np.frombuffer(body, fmt.FILE_ENTRY, 1, pos)[0]
        n = int(e["path_len"])
        padded = (n + 7) & ~7
        if pos + size + padded > len(body):
            raise InputError(src, f"file table at byte {at} ends inside a path")
        idx = int(e["index"])
        paths[idx] = _text(body[pos + size : pos + size + n])
        parents[idx] = int(e["parent"])
        pos += size + padded
        if int(e["flags"]) & fmt.FE_LAYOUT:
            layouts[idx], pos = _layout(src, body, at, pos)


def _layout(src: str, body: bytes, at: int, pos: int) -> tuple[Layout, int]:
    """The layout entry at `pos` of a FILES section and the position after it."""
    size = fmt.LAYOUT_ENTRY.itemsize
    if pos + size > len(body):
        raise InputError(src, f"file table at byte {at} ends inside a layout")
    e = np.frombuffer(body, fmt.LAYOUT_ENTRY, 1, pos)[0]
    n = int(e["nosts"])
    padded = (4 * n + 7) & ~7
    if pos + size + padded > len(body):
        raise InputError(src, f"file table at byte {at} ends inside a layout's OST list")
    osts = np.frombuffer(body, "<u4", n, pos + size)
    layout = Layout(
        stripe_size=int(e["stripe_size"]),
        stripe_count=int(e["stripe_count"]),
        osts=tuple(int(i) for i in osts),
        fsname=_text(bytes(e["fsname"]).rstrip(b"\0")),
        magic=int(e["magic"]),
        flags=int(e["flags"]),
        components=int(e["components"]),
    )
    return layout, pos + size + padded


def _hints(src: str, body: bytes, at: int, hints: dict[int, str]) -> None:
    """HINTS entries; a file opened several times keeps the hints of its last open."""
    pos = 0
    size = fmt.HINTS_ENTRY.itemsize
    while pos < len(body):
        if pos + size > len(body):
            raise InputError(src, f"hints section at byte {at} ends inside an entry")
        e = np.frombuffer(body, fmt.HINTS_ENTRY, 1, pos)[0]
        n = int(e["len"])
        padded = (n + 7) & ~7
        if pos + size + padded > len(body):
            raise InputError(src, f"hints section at byte {at} ends inside a text")
        hints[int(e["file"])] = _text(body[pos + size : pos + size + n])
        pos += size + padded


def _summaries(raw: np.ndarray) -> np.ndarray:
    """Summaries of any version in the current layout (ops a version lacks count 0)."""
    if raw.dtype == fmt.SUMMARY:
        return raw
    out = np.zeros(len(raw), fmt.SUMMARY)
    for name in raw.dtype.names:
        if name == "ops":
            out["ops"][:, : raw.dtype["ops"].shape[0]] = raw["ops"]
        else:
            out[name] = raw[name]
    return out


#: What may be compressed: the sections whose payload is data, never HEADER or END.
_COMPRESSIBLE = (fmt.SEC_RECORDS, fmt.SEC_FILES, fmt.SEC_SUMMARY, fmt.SEC_HINTS)
#: Far above any section the tracer writes (a RECORDS chunk is 64 KiB): a bound on what a
#: corrupt head can make the reader allocate.
_MAX_RAW = 1 << 30


def _unzstd(src: str, body: bytes, at: int) -> tuple[int, bytes]:
    """The inner section type and payload of the SEC_ZSTD section at byte `at`."""
    size = fmt.ZSECTION.itemsize
    if len(body) < size:
        raise InputError(src, f"compressed section at byte {at} is shorter than its head")
    z = np.frombuffer(body, fmt.ZSECTION, 1)[0]
    kind, flen, raw_len = int(z["type"]), int(z["frame_len"]), int(z["raw_len"])
    if kind not in _COMPRESSIBLE:
        raise InputError(src, f"compressed section at byte {at} holds section type {kind:#x}")
    if size + flen > len(body):
        raise InputError(src, f"compressed section at byte {at} ends inside its zstd frame")
    frame = body[size : size + flen]
    try:
        # a frame's content size, when it has one (-1: not recorded), must agree with the
        # head before anything is allocated; max_output_size bounds the rest
        claimed = zstandard.frame_content_size(frame)
        if claimed not in (-1, raw_len) or raw_len > _MAX_RAW:
            raise InputError(
                src,
                f"compressed section at byte {at}: its zstd frame holds {claimed} bytes, "
                f"its head says {raw_len}",
            )
        raw = zstandard.ZstdDecompressor().decompress(frame, max_output_size=raw_len)
    except zstandard.ZstdError as e:
        raise InputError(
            src, f"compressed section at byte {at}: corrupt zstd frame ({e})"
        ) from None
    if len(raw) != raw_len:
        raise InputError(
            src,
            f"compressed section at byte {at} decompresses to {len(raw)} bytes, "
            f"its head says {raw_len}",
        )
    return kind, raw
