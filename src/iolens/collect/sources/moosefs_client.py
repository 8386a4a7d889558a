"""MooseFS clients: who sends the master its metadata operations (job, or process and user).

Lustre tags every request with a jobid (`jobid_var=SLURM_JOB_ID`, else `procname_uid`
such as `find.1003`) and the MDT counts per tag (`job_stats`). A MooseFS master keeps
no such table; its client does: every `mfsmount` streams each operation it handles, with
the caller's uid and pid, to readers of the hidden `.oplog` file at its root, e.g.

    11.26 23:25:42.084626: uid:1001 gid:1001 pid:14481 cmd:create (3,x1,...): OK (...)

This source follows `.oplog` of every MooseFS mount of the node (fuse `mfs#HOST:PORT` in
/proc/mounts) and counts the operations that reach the master (`MASTER_OPS`; answers from
the client's caches say `(using ...)` and are left out) per tag, made as Lustre makes it:
the caller's `SLURM_JOB_ID` (its /proc/PID/environ), else `<comm>.<uid>`. They are
`mdt` `md_ops` rows with that `job_id` on the master's MDT (`mfsmeta@IP:PORT`, the id
`moosefs` gives it), so the metadata-storm analysis splits a MooseFS master's load the
way it splits a Lustre MDT's. The reader is a daemon thread per mount (the stream is
only what happens while it is open); a captured tree (root other than /) replays
`<root><mount>/.oplog` as a file. Reading needs root (`.oplog` is 0400).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar, TextIO

from iolens.collect.base import Reading
from iolens.parse.moosefs import mfs_mounts

log = logging.getLogger(__name__)

#: Client operations the master answers (lookups and attributes not served from cache),
#: and how many master operations each is: a create is the master's `mknod` and `open`
#: (measured: 100 create+stat+unlink loops moved the master's `-SMO` counters by 601,
#: this count by 603).
MASTER_OPS: dict[str, int] = {
    "statfs": 1,
    "access": 1,
    "lookup": 1,
    "getattr": 1,
    "setattr": 1,
    "mknod": 1,
    "create": 2,
    "mkdir": 1,
    "rmdir": 1,
    "symlink": 1,
    "readlink": 1,
    "unlink": 1,
    "rename": 1,
    "link": 1,
    "opendir": 1,
    "readdir": 1,
    "readdirplus": 1,
    "open": 1,
}

_LINE = re.compile(r" uid:(\d+) gid:\d+ pid:(\d+) cmd:([a-z_]+) ", re.ASCII)
_PIDS_KEPT = 4096


class _Counts:
    """Operations per (mdt, tag) so far; pid -> tag remembered while the pid is seen."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.ops: dict[tuple[str, str], int] = {}
        self.tags: OrderedDict[int, str] = OrderedDict()
        self.lock = threading.Lock()

    def tag(self, pid: int, uid: str) -> str:
        if pid in self.tags:
            self.tags.move_to_end(pid)
            return self.tags[pid]
        proc = self.root / "proc" / str(pid)
        tag = None
        try:
            env = (proc / "environ").read_bytes().split(b"\0")
            job = next((e[13:] for e in env if e.startswith(b"SLURM_JOB_ID=")), b"")
            tag = job.decode("ascii", "replace") or None
        except OSError:
            pass
        if tag is None:
            try:
                comm = (proc / "comm").read_text(errors="replace").strip() or "unknown"
            except OSError:
                comm = "unknown"  # gone before it was looked up
            tag = f"{comm}.{uid}"
        self.tags[pid] = tag
        if len(self.tags) > _PIDS_KEPT:
            self.tags.popitem(last=False)
        return tag

    def line(self, mdt: str, text: str) -> None:
        m = _LINE.search(text)
        if m is None or m[3] not in MASTER_OPS or "(using " in text or "internal node" in text:
            return
        pid = int(m[2])
        if pid == 0:
            return
        key = (mdt, self.tag(pid, m[1]))
        with self.lock:
            self.ops[key] = self.ops.get(key, 0) + MASTER_OPS[m[3]]


class MoosefsClientSource:
    """Per-tag metadata operations of this node's MooseFS mounts (their `.oplog`)."""

    name: ClassVar[str] = "moosefs_client"
    #: Off unless configured: it keeps a reader thread per mount.
    DEFAULT_ENABLED: ClassVar[bool] = False
    SAMPLE: ClassVar[str] = (
        "# Count each job's and process's MooseFS metadata operations (the mounts' .oplog):\n"
        "# enable on compute and login nodes of a MooseFS site\n"
        "enabled = false"
    )

    def __init__(self, host: str, kind: str | None = None) -> None:
        self.host = host
        self._counts: _Counts | None = None
        self._followed: dict[str, threading.Thread] = {}
        self._replayed: dict[str, int] = {}

    def collect(self, root: Path) -> Iterator[Reading]:
        if self._counts is None:
            self._counts = _Counts(root)
        counts = self._counts
        for mount, mdt in mfs_mounts(root):
            oplog = (
                Path(str(root) + mount) / ".oplog" if str(root) != "/" else Path(mount) / ".oplog"
            )
            if str(root) == "/":
                self._follow(oplog, mdt, counts)
            else:
                self._replay(oplog, mdt, counts)
        with counts.lock:
            snapshot = dict(counts.ops)
        for (mdt, tag), n in sorted(snapshot.items()):
            yield Reading("mdt", mdt, "md_ops", float(n), job_id=tag, sparse=True)

    def _follow(self, oplog: Path, mdt: str, counts: _Counts) -> None:
        key = str(oplog)
        t = self._followed.get(key)
        if t is not None and t.is_alive():
            return
        t = threading.Thread(
            target=_follow, args=(oplog, mdt, counts), name=f"oplog {oplog}", daemon=True
        )
        self._followed[key] = t
        t.start()

    def _replay(self, oplog: Path, mdt: str, counts: _Counts) -> None:
        try:
            with oplog.open(errors="replace") as fh:
                fh.seek(self._replayed.get(str(oplog), 0))
                for text in fh:
                    counts.line(mdt, text)
                self._replayed[str(oplog)] = fh.tell()
        except OSError:
            return


def _follow(oplog: Path, mdt: str, counts: _Counts) -> None:
    """Read `oplog` until the mount goes away (the next round starts a new reader)."""
    fh: TextIO
    try:
        with oplog.open(errors="replace", buffering=1) as fh:
            for text in fh:
                counts.line(mdt, text)
    except OSError as exc:
        log.warning("stopped following %s: %s", oplog, exc)
