"""Ship the LD_PRELOAD tracer's per-process files from this node's spool.

The tracer writes `<host>-<pid>-<start>-<seg>.iolens` atomically (`*.partial`, then
rename), so every complete file here is whole; a running process also leaves interim
files `<host>-<pid>-<start>-<seg>.<k>.iolens` every IOLENS_FLUSH_S seconds (disjoint
records), shipped like any other as soon as they appear. Each becomes one batch carrying the file as
written (`Batch.trace`): the server decodes it into the batch, with the same key,
`iolens import trace` would give it, so the node agent needs no decoder (numpy, pyarrow).
The file is deleted only after the agent has put the batch in its disk spool. A file whose
framing is wrong (bad magic, a version this iolens does not read, a truncated section, no
END section), or that is not a regular file (a symlink, a FIFO, a hard link), is moved to
`bad/` (never deleted: it is somebody's data) and logged. `*.partial` files belong to
running processes and are left alone, unless their process is gone (killed: the trace
ends before its header, so nothing can be salvaged): then they are removed with a log
line, as are the tracer's `*.lost` marks of traces it could not write (full disk).

The batch carries the file's owner (`lstat`), which the server uses as the trace's user
instead of what the file says (docs/tracer.md, "The shared spool").
"""

from __future__ import annotations

import contextlib
import logging
import os
import pwd
import stat
import struct
import time
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import ClassVar

from iolens.collect.file_layouts import MoosefsLayouts, trace_paths
from iolens.errors import InputError
from iolens.model.batch import Batch

log = logging.getLogger(__name__)

DEFAULT_DIR = Path("/var/spool/iolens/traces")

# Mirrored from iolens.tracefile (format.py, trace.py), which needs numpy: the framing is
# all the agent checks. tests/collect/test_tracer_spool.py keeps them equal.
SUFFIX = ".iolens"
MAGIC = b"IOLTRACE"
READABLE_VERSIONS = (1, 2, 3, 4, 5, 6)
ENDIAN_MARK = 0x01020304
SEC_END = 0x454E44
#: A `.partial` file not written for this long is abandoned even if its pid looks alive
#: (another node's file, a pid the agent cannot judge).
PARTIAL_MAX_AGE_S = 7 * 24 * 3600.0
#: A file larger than this is refused (moved aside), not read: the agent holds one file in
#: memory at a time, and anyone may write the spool. 1 GiB is 16 M compressed records.
MAX_FILE_BYTES = 1 << 30
_PREAMBLE = struct.Struct("<8sII")  # magic, version, endian mark
_SECTION = struct.Struct("<IIQ")  # type, aux, body length


def check_framing(data: bytes, name: str) -> None:
    """InputError unless `data` is a complete tracer file by its framing (the server
    decodes the sections themselves)."""
    if len(data) < _PREAMBLE.size:
        raise InputError(name, "truncated: shorter than the file preamble")
    magic, version, endian = _PREAMBLE.unpack_from(data)
    if magic != MAGIC:
        raise InputError(name, "not an iolens trace (bad magic)")
    if version not in READABLE_VERSIONS:
        raise InputError(name, f"format version {version} (this iolens reads {READABLE_VERSIONS})")
    if endian != ENDIAN_MARK:
        raise InputError(name, "written on a big-endian host (not supported)")
    pos = _PREAMBLE.size
    while pos < len(data):
        if pos + _SECTION.size > len(data):
            raise InputError(name, f"truncated: partial section header at byte {pos}")
        kind, _aux, length = _SECTION.unpack_from(data, pos)
        pos += _SECTION.size + length
        if pos > len(data):
            raise InputError(name, "truncated: a section runs past the end of the file")
        if kind == SEC_END:
            if pos != len(data):
                raise InputError(name, f"data after the END section at byte {pos}")
            return
    raise InputError(name, "truncated: no END section (the process may have been killed)")


class TracerSpoolSource:
    """Per-process trace files -> batches carrying them, decoded by the server.

    The spool is writable by every user of the node (mode 1777) and the agent runs as root,
    so nothing in it is trusted: names are handled as bytes (any byte string is a valid
    name), symlinks are never followed, only regular files with one link are read, every
    operation is relative to the spool's directory fd (a path swapped after the check
    cannot redirect it), and the user is the file's owner, never what the file says.
    """

    name: ClassVar[str] = "tracer_spool"

    def __init__(
        self,
        host: str,
        directory: Path = DEFAULT_DIR,
        max_files: int = 256,
        partial_max_age_s: float = PARTIAL_MAX_AGE_S,
        max_file_bytes: int = MAX_FILE_BYTES,
        ask_layouts: bool = True,
    ) -> None:
        self.host = host
        self.directory = directory
        self.max_files = max_files  # per round: bounds the agent's memory on a backlog
        self.partial_max_age_s = partial_max_age_s
        self.max_file_bytes = max_file_bytes
        self.quarantined = 0
        self.removed_partial = 0
        self.lost = 0
        self._said: set[str] = set()
        # MooseFS chunk placement of the traced files, asked at ship time (file_layouts.py)
        self.ask_layouts = ask_layouts
        self.layouts: MoosefsLayouts | None = None

    def batches(self, root: Path) -> Iterator[tuple[Batch, Callable[[], None]]]:
        spool = root / self.directory.relative_to(self.directory.anchor)
        if self.ask_layouts and (self.layouts is None or self.layouts.root != root):
            self.layouts = MoosefsLayouts(root)
        try:
            dfd = os.open(spool, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            return
        except OSError as exc:  # a symlink (ELOOP), not a directory, unreadable
            self._say(f"spool {spool} is not usable, not read: {exc.strerror or exc}")
            return
        try:
            names = sorted(os.listdir(dfd))  # str with surrogateescape: lossless bytes
            for name in names:
                if name.endswith(SUFFIX + ".partial"):
                    stem = name[: -len(SUFFIX + ".partial")] + "."
                    interim = any(n.startswith(stem) and n.endswith(SUFFIX) for n in names)
                    self._partial(dfd, name, interim)
                elif name.endswith(SUFFIX + ".lost"):
                    self._lost(dfd, name)
            shipped = 0
            for name in names:
                if not name.endswith(SUFFIX) or shipped >= self.max_files:
                    continue
                got = self._read(dfd, spool, name)
                if got is not None:
                    shipped += 1
                    yield got
        finally:
            os.close(dfd)

    def _read(self, dfd: int, spool: Path, name: str) -> tuple[Batch, Callable[[], None]] | None:
        """The batch of one complete file, or None (gone, refused, quarantined)."""
        try:
            st = os.lstat(name, dir_fd=dfd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                what = "a symlink" if stat.S_ISLNK(st.st_mode) else "not a regular file"
                if stat.S_ISREG(st.st_mode):
                    what = f"a file with {st.st_nlink} links"
                raise InputError(show(name), f"{what}: not read")
            if st.st_size > self.max_file_bytes:
                raise InputError(show(name), f"larger than {self.max_file_bytes:,} bytes: not read")
            data = _read_nofollow(dfd, name, st, self.max_file_bytes)
            check_framing(data, show(name))
        except FileNotFoundError:  # another agent (or an operator) took it
            return None
        except InputError as exc:
            self._quarantine(dfd, name, exc)
            return None
        batch = Batch(source=f"tracer:{show(name)}", key=f"tracefile:{self.host}:{show(name)}")
        batch.trace = (name, data)
        batch.extra["trace_owner"] = {"uid": st.st_uid, "user": user_of(st.st_uid)}
        if self.layouts is not None and self.layouts.mounts():
            found = self.layouts.of(trace_paths(data), st.st_uid)
            if found:
                batch.extra["layouts"] = found
        return batch, partial(_release, spool, (st.st_dev, st.st_ino), name)

    def _partial(self, dfd: int, name: str, interim: bool = False) -> None:
        """A `.partial` file whose process is gone (dead, or silent for longer than the
        bound) is removed with a log line: without its header section (written at exit)
        its records have no time base, paths or identity, so nothing can be salvaged.
        `interim`: the process left interim files, so only its last interval is lost."""
        try:
            st = os.lstat(name, dir_fd=dfd)
        except FileNotFoundError:
            return
        if not stat.S_ISREG(st.st_mode):
            self._quarantine(dfd, name, InputError(show(name), "not a regular file: not read"))
            return
        host, pid, start_ns = _identity(name[: -len(".partial")])
        age = time.time() - st.st_mtime
        # this node's process: ask the kernel; another node's file, or a name not the
        # tracer's: judged by its age
        local = host in (self.host, os.uname().nodename)  # the tracer names it by uname
        dead = local and pid is not None and not pid_alive(pid, start_ns)
        if not (dead or age > self.partial_max_age_s):
            return  # a running process's trace
        why = "its process is gone" if dead else f"not written for {age / 3600:.0f} h"
        try:
            os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            return
        self.removed_partial += 1
        log.warning(
            "tracer: removed the unfinished trace %s of user %s (%s): its process was killed "
            "before writing the end of its trace, %s",
            show(name),
            user_of(st.st_uid),
            why,
            "whose last interval is lost (its interim files stay)" if interim else "which is lost",
        )

    def _lost(self, dfd: int, name: str) -> None:
        """The tracer's mark of a trace it could not write (full disk): logged, removed."""
        try:
            st = os.lstat(name, dir_fd=dfd)
            os.unlink(name, dir_fd=dfd)
        except FileNotFoundError:
            return
        self.lost += 1
        log.warning(
            "tracer: process %s of user %s could not write its trace (spool full or "
            "unwritable): lost",
            show(name[: -len(".lost")]),
            user_of(st.st_uid),
        )

    def _quarantine(self, dfd: int, name: str, exc: InputError) -> None:
        """Into `bad/` (never deleted: it is somebody's data), renamed relative to the spool's
        fd so nothing is followed; `bad/` must be the agent's own private directory, else
        the file is renamed aside in place (`<name>.bad`)."""
        dest = "bad/"
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir("bad", 0o700, dir_fd=dfd)
            bfd = os.open("bad", os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=dfd)
        except OSError:
            bfd = -1
        try:
            if bfd >= 0:
                bst = os.fstat(bfd)
                if bst.st_uid != os.geteuid() or bst.st_mode & 0o022:
                    os.close(bfd)
                    bfd = -1
            if bfd >= 0:
                os.rename(name, name, src_dir_fd=dfd, dst_dir_fd=bfd)
            else:
                dest = f"{show(name)}.bad"
                os.rename(name, name + ".bad", src_dir_fd=dfd, dst_dir_fd=dfd)
        except FileNotFoundError:
            return
        except OSError as move:
            self._say(f"tracer file {show(name)} cannot be moved aside: {move.strerror}")
            return
        finally:
            if bfd >= 0:
                os.close(bfd)
        self.quarantined += 1
        log.error("tracer file %s refused, moved to %s: %s", show(name), dest, exc.message)

    def _say(self, message: str) -> None:
        if message not in self._said:
            self._said.add(message)
            log.error("%s", message)


def show(name: str) -> str:
    """A spool file name as text whatever its bytes (`\\xNN` for what is not UTF-8)."""
    return os.fsencode(name).decode("utf-8", "backslashreplace")


def user_of(uid: int) -> str:
    """The account name of `uid` (its number when the node does not know it)."""
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _read_nofollow(dfd: int, name: str, st: os.stat_result, limit: int) -> bytes:
    """The bytes of the regular file `name` checked by `lstat` as `st`; InputError if it was
    swapped for something else since (never follows a symlink, never blocks on a FIFO)."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(name, flags, dir_fd=dfd)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise
        raise InputError(show(name), f"cannot open: {exc.strerror}") from None
    try:
        now = os.fstat(fd)
        if (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(now.st_mode):
            raise InputError(show(name), "replaced while being read: not read")
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(limit + 1)  # still growing since the lstat: bounded all the same
        if len(data) > limit:
            raise InputError(show(name), f"larger than {limit:,} bytes: not read")
        return data
    finally:
        os.close(fd)


def _release(spool: Path, ident: tuple[int, int], name: str) -> None:
    """Delete a shipped file: only if the spool and the name still are what was read."""
    try:
        dfd = os.open(spool, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return
    try:
        st = os.lstat(name, dir_fd=dfd)
        if (st.st_dev, st.st_ino) == ident:
            os.unlink(name, dir_fd=dfd)
    except FileNotFoundError:
        pass
    finally:
        os.close(dfd)


def _identity(stem: str) -> tuple[str, int | None, int]:
    """(host, pid, start ns) from `<host>-<pid>-<start ns>-<segment>[.<k>].iolens` (`.<k>`:
    interim file k)."""
    parts = stem[: -len(SUFFIX)].rsplit("-", 3) if stem.endswith(SUFFIX) else []
    if len(parts) == 4 and all(x.isascii() and x.isdigit() for x in parts[1:3]):
        return parts[0], int(parts[1]), int(parts[2])
    return "", None, 0


def pid_alive(pid: int, start_ns: int = 0) -> bool:
    """Whether process `pid` of this node is the one that started at `start_ns` (wall
    time): a pid reused by a process that started later is not it."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    except OverflowError:
        return False
    if not start_ns:
        return True
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        with open("/proc/stat") as f:
            btime = next(int(x.split()[1]) for x in f if x.startswith("btime "))
    except (OSError, IndexError, ValueError, StopIteration):
        return True
    started = btime + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return started <= start_ns / 1e9 + 2  # /proc's start is rounded to clock ticks, btime to s
