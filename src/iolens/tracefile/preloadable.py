"""Why a program cannot be traced by LD_PRELOAD, read from its executable.

The tracer is a shared library the dynamic loader puts in front of libc. A statically
linked program has no loader; a Go program calls the kernel itself (only its cgo calls go
through libc). Both run fine under `iolens trace` and leave no trace: this says which,
so "traced 0 processes" comes with its reason instead of a job that is not there.
"""

from __future__ import annotations

import mmap
import shutil
import struct
from pathlib import Path
from typing import BinaryIO

_PT_INTERP = 3
_GO_MARKS = (b"\xff Go buildinf:", b".note.go.buildid", b"Go build ID:")
_SHEBANG_DEPTH = 4  # `#!/usr/bin/env python3` and the like: a few hops at most


def executable(command: str) -> Path | None:
    """The file `command` runs (a name looked up in PATH, or a path)."""
    found = shutil.which(command)
    return Path(found).resolve() if found else None


def untraceable(path: Path, depth: int = 0) -> str | None:
    """A sentence on why `path` runs without the tracer, or None when it would load it
    (or when it cannot be read: no guess)."""
    try:
        with path.open("rb") as f:
            head = f.read(4096)
            if head.startswith(b"#!") and depth < _SHEBANG_DEPTH:
                return _script(head, depth)
            if not head.startswith(b"\x7fELF") or len(head) < 64:
                return None
            static = not _has_interpreter(f, head)
            f.seek(0, 2)
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
                go = any(m.find(mark) >= 0 for mark in _GO_MARKS)
    except (OSError, ValueError, struct.error):
        return None
    if go:
        return (
            f"{path} is a Go program: Go calls the kernel directly, not through libc, so "
            "LD_PRELOAD sees none of its I/O (only cgo calls); use Darshan's or the "
            "file system's own counters for it"
        )
    if static:
        return (
            f"{path} is statically linked: no dynamic loader runs, so LD_PRELOAD is "
            "ignored; relink it dynamically to trace it"
        )
    return None


def _script(head: bytes, depth: int) -> str | None:
    """A script's interpreter (`#!/usr/bin/env NAME` looked up in PATH)."""
    words = head[2:].split(b"\n", 1)[0].decode(errors="replace").split()
    if not words:
        return None
    name = words[1] if Path(words[0]).name == "env" and len(words) > 1 else words[0]
    target = executable(name)
    return untraceable(target, depth + 1) if target else None


def _has_interpreter(f: BinaryIO, head: bytes) -> bool:
    """Whether the ELF file has a PT_INTERP program header (a dynamic loader)."""
    bits64, little = head[4] == 2, head[5] == 1
    end = "<" if little else ">"
    if bits64:
        (phoff,) = struct.unpack_from(end + "Q", head, 0x20)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 0x36)
    else:
        (phoff,) = struct.unpack_from(end + "I", head, 0x1C)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 0x2A)
    f.seek(phoff)
    table = f.read(phentsize * phnum)
    for i in range(phnum):
        (ptype,) = struct.unpack_from(end + "I", table, i * phentsize)
        if ptype == _PT_INTERP:
            return True
    return False
