"""MooseFS statistics as `mfscli -s '|'` prints them, and `mfsfileinfo` layouts.

`mfscli` (package moosefs-cli) asks the master, and through it every chunkserver, for the
numbers its web interface draws; with `-s SEP` each table row is one line
`<table title>:SEP<cell>SEP<cell>...`. Read here (MooseFS 3.0.38+ column sets):

- `-SCS`: `chunk servers:` ip, port, id, labels, version, load, maintenance, chunks, used,
  total, then the same three for disks marked for removal (with a status first);
- `-SHD -m 1`: `disks:` ip:port:path, chunks, last error, status, then over the last
  minute: read and write bytes/s, mean read/write/fsync time (us), read/write/fsync ops,
  then used and total bytes (`-` cells: no statistics yet);
- `-SCC -d IP:PORT:+col,...` and `-SMC -b +col,...`: per-minute chart rows
  `<title>:SEP<YYYY-MM-DD HH:MM>SEP<v>...`, newest first; the label is the minute's start in
  the clock of whoever ran mfscli (run it with TZ=UTC); the minute in progress is not
  listed. A cell of 2^64-1 (chunkserver) or `-` (master) means no data for that minute;
  the chunkserver `load` column carries a ` threads` suffix and the master `cpu` a `%`;
- `-SMO -m 1`: `active mounts, operations:` ip, mount point, then this hour's count of
  each master operation (`MOUNT_OPS`) and their total.

Malformed text is one `InputError` naming the input and the line.
"""

from __future__ import annotations

import functools
import re
import socket
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from iolens.errors import InputError
from iolens.parse._common import U64_MAX, parse_int, shown

#: `-SMO` operation columns, in mfscli's order (then `total`).
MOUNT_OPS = (
    "statfs",
    "getattr",
    "setattr",
    "lookup",
    "mkdir",
    "rmdir",
    "symlink",
    "readlink",
    "mknod",
    "unlink",
    "rename",
    "link",
    "readdir",
    "open",
    "read",
    "write",
)

#: The master operations that are metadata: `read`/`write` at the master are chunk
#: location requests of data I/O, which a Lustre MDT never sees.
METADATA_OPS = tuple(op for op in MOUNT_OPS if op not in ("read", "write"))

_MINUTE = re.compile(r"^(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d)$", re.ASCII)
_DECIMAL = re.compile(r"^\d+(\.\d+)?$", re.ASCII)


@dataclass(frozen=True)
class Chunkserver:
    ip: str
    port: int
    csid: int
    load: int
    chunks: int
    used_bytes: int
    total_bytes: int

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"


@dataclass(frozen=True)
class Disk:
    """One chunkserver disk over the last minute (`None`: no statistics yet)."""

    chunkserver: str  # ip:port
    path: str
    status: str
    read_us: float | None
    write_us: float | None
    fsync_us: float | None
    read_ops: int | None
    write_ops: int | None
    fsync_ops: int | None
    used_bytes: int
    total_bytes: int


@dataclass(frozen=True)
class ChartRow:
    """One minute of chart data: `values[i]` is the i-th requested column, None if no data."""

    start: float  # epoch seconds of the minute's start (the label read as UTC)
    values: tuple[float | None, ...]


@dataclass(frozen=True)
class Mount:
    ip: str
    mount_point: str
    ops: dict[str, int]  # MOUNT_OPS -> this hour's count


@dataclass
class FileLayout:
    """`mfsfileinfo FILE`: the chunkservers holding each chunk's copies, in chunk order."""

    path: str
    chunks: list[list[str]] = field(default_factory=list)

    def chunkservers(self) -> list[str]:
        """Every chunkserver (ip:port) with a copy, in order of first appearance."""
        return list(dict.fromkeys(c for copies in self.chunks for c in copies))


def _rows(text: str, title: str, source: str, sep: str, ncols: int) -> list[tuple[int, list[str]]]:
    """The cells of every line whose table is `title`, checked to have `ncols` cells."""
    out = []
    prefix = f"{title}:{sep}"
    for no, line in enumerate(text.splitlines(), 1):
        if not line.startswith(prefix):
            continue
        cells = line[len(prefix) :].split(sep)
        if len(cells) != ncols:
            raise InputError(
                source, f"{title}: expected {ncols} cells, got {len(cells)} ({shown(line)})", no
            )
        out.append((no, cells))
    return out


def _maybe_int(token: str, source: str, line: int, what: str) -> int | None:
    return None if token == "-" else parse_int(token, source, line, what)


def parse_chunkservers(text: str, source: str = "mfscli -SCS", sep: str = "|") -> list[Chunkserver]:
    out = []
    for no, c in _rows(text, "chunk servers", source, sep, 14):
        out.append(
            Chunkserver(
                ip=_ip(c[0], source, no),
                port=parse_int(c[1], source, no, "port"),
                csid=parse_int(c[2], source, no, "id"),
                load=parse_int(c[5], source, no, "load"),
                chunks=parse_int(c[7], source, no, "chunks"),
                used_bytes=parse_int(c[8], source, no, "used"),
                total_bytes=parse_int(c[9], source, no, "total"),
            )
        )
    return out


def parse_disks(text: str, source: str = "mfscli -SHD", sep: str = "|") -> list[Disk]:
    out = []
    for no, c in _rows(text, "disks", source, sep, 14):
        ip, port, path = _split_disk(c[0], source, no)
        n = [_maybe_int(c[i], source, no, what) for i, what in _DISK_NUMBERS]
        out.append(
            Disk(
                chunkserver=f"{ip}:{port}",
                path=path,
                status=c[3],
                read_us=_float(n[0]),
                write_us=_float(n[1]),
                fsync_us=_float(n[2]),
                read_ops=n[3],
                write_ops=n[4],
                fsync_ops=n[5],
                used_bytes=parse_int(c[12], source, no, "used"),
                total_bytes=parse_int(c[13], source, no, "total"),
            )
        )
    return out


_DISK_NUMBERS = (
    (6, "read time"),
    (7, "write time"),
    (8, "fsync time"),
    (9, "read ops"),
    (10, "write ops"),
    (11, "fsync ops"),
)


def parse_chart(
    text: str, title: str, ncols: int, source: str = "mfscli chart", sep: str = "|"
) -> list[ChartRow]:
    """Rows of a `-SCC`/`-SMC` chart (`title`: `Chunkserver chart data` or `Master chart
    data`) with `ncols` value columns, oldest first."""
    out = []
    for no, c in _rows(text, title, source, sep, ncols + 1):
        m = _MINUTE.match(c[0])
        if m is None:
            raise InputError(source, f"{title}: bad minute label {shown(c[0])}", no)
        try:
            start = datetime(*(int(g) for g in m.groups()), tzinfo=UTC).timestamp()
        except ValueError as exc:
            raise InputError(
                source, f"{title}: bad minute label {shown(c[0])}: {exc}", no
            ) from None
        out.append(ChartRow(start, tuple(_chart_value(v, source, no) for v in c[1:])))
    out.sort(key=lambda r: r.start)
    return out


def _chart_value(token: str, source: str, line: int) -> float | None:
    token = token.removesuffix(" threads").removesuffix("%")
    if token == "-":
        return None
    if not _DECIMAL.match(token):
        raise InputError(source, f"chart cell: expected a number, got {shown(token)}", line)
    if "." in token:
        return float(token)
    value = parse_int(token, source, line, "chart cell")
    return None if value == U64_MAX else float(value)


def parse_mounts(text: str, source: str = "mfscli -SMO", sep: str = "|") -> list[Mount]:
    out = []
    for no, c in _rows(text, "active mounts, operations", source, sep, 2 + len(MOUNT_OPS) + 1):
        ops = {op: parse_int(v, source, no, op) for op, v in zip(MOUNT_OPS, c[2:], strict=False)}
        out.append(Mount(_ip(c[0], source, no), c[1], ops))
    return out


def parse_fileinfo(text: str, source: str = "mfsfileinfo") -> list[FileLayout]:
    """Every file `mfsfileinfo` described: a `PATH:` line, then `chunk N:` lines each
    followed by `copy N: IP:PORT (status:...)` lines. Empty files have no chunks. A path
    it could not describe gets one `PATH: message` line (removed since, a directory) and
    is left out: the files asked with it keep their layouts."""
    out: list[FileLayout] = []
    for no, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not raw.startswith(("\t", " ")) and line.endswith(":"):
            out.append(FileLayout(line[:-1]))
        elif line.startswith("/") and ": " in line and not raw.startswith(("\t", " ")):
            continue  # this path's own error
        elif line.startswith("chunk ") and out:
            out[-1].chunks.append([])
        elif line.startswith("copy ") and out and out[-1].chunks:
            where = line.split(":", 1)[1].strip().split(" ", 1)[0]
            ip, _, port = where.rpartition(":")
            if not is_port(port):
                raise InputError(source, f"copy location {shown(where)} is not IP:PORT", no)
            out[-1].chunks[-1].append(f"{_ip(ip, source, no)}:{int(port)}")
        elif line and not line.startswith(("no valid copies", "chunk", "copy")) and not out:
            raise InputError(source, f"expected 'PATH:' first, got {shown(line)}", no)
    return out


def is_port(token: str) -> bool:
    return token.isascii() and token.isdigit() and 0 < int(token) < 65536


def _ip(token: str, source: str, line: int) -> str:
    parts = token.split(".")
    if len(parts) != 4 or not all(p.isascii() and p.isdigit() and int(p) < 256 for p in parts):
        raise InputError(source, f"expected an IPv4 address, got {shown(token)}", line)
    return token


def _split_disk(token: str, source: str, line: int) -> tuple[str, int, str]:
    ip, _, rest = token.partition(":")
    port, _, path = rest.partition(":")
    if not is_port(port) or not path:
        raise InputError(source, f"disk {shown(token)} is not IP:PORT:PATH", line)
    return _ip(ip, source, line), int(port), path


def _float(v: int | None) -> float | None:
    return None if v is None else float(v)


@functools.lru_cache(maxsize=64)
def master_address(address: str) -> str:
    """`IP:PORT` of a master named by host or address: `moosefs` and `moosefs_client`
    must name it alike whatever name each was given."""
    host, _, port = address.rpartition(":")
    try:
        ip = socket.gethostbyname(host)
    except OSError:
        ip = host
    return f"{ip}:{port}"


def mdt_id(address: str) -> str:
    """The master's one metadata target (kind `mdt`): `mfsmeta@IP:PORT`."""
    return f"mfsmeta@{master_address(address)}"


def mds_id(address: str) -> str:
    """The master process, serving it (kind `mds`): `mfsmaster@IP:PORT`."""
    return f"mfsmaster@{master_address(address)}"


def oss_id(chunkserver: str) -> str:
    """A chunkserver process (kind `oss`); its one target (kind `ost`) is `IP:PORT`, the
    name `mfsfileinfo` gives a chunk's copy."""
    return f"mfscs@{chunkserver}"


def mfs_mounts(root: Path) -> list[tuple[str, str]]:
    """(mount point, the master's MDT id) of every MooseFS mount in `<root>/proc/mounts`."""
    try:
        text = (root / "proc" / "mounts").read_text(errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        f = line.split()
        if len(f) >= 3 and f[2] == "fuse" and f[0].startswith(("mfs#", "mfs\\043")):
            master = f[0].split("#", 1)[-1].split("\\043", 1)[-1]
            out.append((f[1].replace("\\040", " "), mdt_id(master)))
    return out
