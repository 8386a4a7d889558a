"""Where a traced file's data lives, asked of the file system when the agent ships it.

The tracer asks Lustre itself (the `lustre.lov` xattr, at open). A MooseFS file's chunks
are placed by the master and only its tools say where (`mfsfileinfo`: each chunk's
copies, `IP:PORT` of a chunkserver), so the agent asks for the files of a trace that sit
on a MooseFS mount when it ships the trace, after the process has written them. The answer
travels with the trace (`extra["layouts"]`: path -> chunkservers) and fills the `osts`
of its `files` rows, so a job's report lists its chunkservers as it lists OSTs.

`mfsfileinfo` runs as the trace file's owner (the agent is root; the paths come from a
file anyone may write), on absolute paths under a MooseFS mount only, 64 per call, with a
time limit; what it cannot resolve (a file deleted since) is left without a layout.
"""

from __future__ import annotations

import logging
import os
import struct
import subprocess
from pathlib import Path

from iolens.errors import InputError
from iolens.parse.moosefs import mfs_mounts, parse_fileinfo

log = logging.getLogger(__name__)

SEC_FILES = 2
FE_LAYOUT = 0x1
_SECTION = struct.Struct("<IIQ")
_ENTRY = struct.Struct("<IIII")  # index, parent, path_len, flags
_LAYOUT = struct.Struct("<IIQHHI16s")  # magic, flags, stripe_size, count, comps, nosts, fs
_PREAMBLE = 16
PER_CALL = 64
MAX_PATHS = 1024
TIMEOUT_S = 30.0


def trace_paths(data: bytes) -> list[str]:
    """The paths of a tracer file's FILES sections (framing already checked), decoded as
    the server decodes them (`tracefile.reader._text`) so the two name the same file."""
    out = []
    pos = _PREAMBLE
    while pos + _SECTION.size <= len(data):
        kind, _aux, length = _SECTION.unpack_from(data, pos)
        body = data[pos + _SECTION.size : pos + _SECTION.size + length]
        pos += _SECTION.size + length
        if kind != SEC_FILES:
            continue
        at = 0
        while at + _ENTRY.size <= len(body):
            _idx, _parent, n, flags = _ENTRY.unpack_from(body, at)
            at += _ENTRY.size
            out.append(body[at : at + n].decode("utf-8", "backslashreplace"))
            at += (n + 7) & ~7
            if flags & FE_LAYOUT and at + _LAYOUT.size <= len(body):
                nosts = _LAYOUT.unpack_from(body, at)[5]
                at += _LAYOUT.size + ((4 * nosts + 7) & ~7)
    return out


class MoosefsLayouts:
    """Chunkservers of files on this node's MooseFS mounts, via `mfsfileinfo`."""

    def __init__(self, root: Path, mfsfileinfo: str = "mfsfileinfo") -> None:
        self.root = root
        self.tool = mfsfileinfo
        self._warned = False

    def mounts(self) -> list[str]:
        return [m for m, _ in mfs_mounts(self.root)]

    def of(self, paths: list[str], uid: int) -> dict[str, list[str]]:
        """path -> chunkservers (first-use order) for the `paths` on a MooseFS mount."""
        mounts = self.mounts()
        if not mounts or str(self.root) != "/":
            return {}
        mine = [
            p
            for p in dict.fromkeys(paths)
            if p.startswith("/")
            and any(p == m or p.startswith(m.rstrip("/") + "/") for m in mounts)
        ][:MAX_PATHS]
        out: dict[str, list[str]] = {}
        for i in range(0, len(mine), PER_CALL):
            out.update(self._ask(mine[i : i + PER_CALL], uid))
        return out

    def _ask(self, paths: list[str], uid: int) -> dict[str, list[str]]:
        try:
            res = subprocess.run(
                [self.tool, *paths],
                capture_output=True,
                timeout=TIMEOUT_S,
                check=False,
                user=uid if os.geteuid() == 0 else None,
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
            )
        except (OSError, subprocess.SubprocessError) as exc:
            if not self._warned:
                log.warning("cannot ask %s for MooseFS layouts: %s", self.tool, exc)
                self._warned = True
            return {}
        text = res.stdout.decode("utf-8", "backslashreplace")
        try:
            files = parse_fileinfo(text, self.tool)
        except InputError as exc:
            log.warning("%s", exc)
            return {}
        return {f.path: f.chunkservers() for f in files if f.chunkservers()}
