"""Darshan logs read in forked children, for commands that read a few logs and exit.

The importer's `DecoderPool` starts its worker from a forkserver: about a second, paid once
per import, and needed there because the importer's store connection runs threads.
`iolens darshan LOG` has no store, so it forks itself for each log: the child inherits
numpy, pandas and libdarshan-util already loaded (milliseconds, not a second), runs the
pool worker's `_decode`, merges DXT, and sends the `DarshanJob` back through a pipe. A
crash of the library (a failed assertion, a double free, a segfault) costs only the
child: the log fails with an `InputError` naming it, as in the importer.

(A first child forked before those imports, importing them itself while the parent does
the same, was measured: the two processes' imports slow each other on two cores, and the
wall time did not change.)
"""

from __future__ import annotations

import contextlib
import os
import pickle
import select
import signal
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

from iolens.errors import InputError
from iolens.ingest.darshan_input import DECODE_TIMEOUT_S, last_words

if TYPE_CHECKING:
    from iolens.ingest.darshan_decode import _Failed
    from iolens.model.darshan import DarshanJob

#: Exit status of a child that failed in Python before sending its log (a bug, not the log).
_CHILD_FAILED = 70


def read_forked(
    path: str | Path, *, dxt: bool = True, timeout_s: float = DECODE_TIMEOUT_S
) -> DarshanJob:
    """The log as `read_log` returns it (DXT merged), read in a child."""
    return ForkedRead(path, dxt=dxt, timeout_s=timeout_s).result()


class ForkedRead:
    """A log being read in a forked child from the moment this is made; `result()` takes
    the `DarshanJob`, or raises the `InputError` naming the log (unreadable, crashed the
    library, not finished in `timeout_s`). The caller goes on meanwhile: `iolens darshan`
    imports the rules while its first log is read, and reads the next while it diagnoses.
    """

    def __init__(
        self, path: str | Path, *, dxt: bool = True, timeout_s: float = DECODE_TIMEOUT_S
    ) -> None:
        from iolens.ingest.darshan_records import backend

        backend()  # loaded once here, inherited by every child
        self.path = Path(path)
        self.timeout_s = timeout_s
        self._deadline = time.monotonic() + timeout_s
        self._said = tempfile.TemporaryFile()  # noqa: SIM115 (closed by result())
        rfd, wfd = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:
            _child(self.path, dxt, rfd, wfd, self._said.fileno())
        os.close(wfd)
        self._rfd = rfd

    def result(self) -> DarshanJob:
        from iolens.ingest.darshan_decode import _Failed

        path = str(self.path)
        status: int | None = None
        try:
            data = _receive(self._rfd, self._deadline)
            status = os.waitpid(self.pid, 0)[1]
        except TimeoutError:
            raise InputError(
                path, f"libdarshan-util did not finish reading it in {self.timeout_s:g} s (stopped)"
            ) from None
        finally:
            os.close(self._rfd)
            if status is None:  # timed out or interrupted: the child goes too
                with contextlib.suppress(ProcessLookupError):
                    os.kill(self.pid, signal.SIGKILL)
                os.waitpid(self.pid, 0)
        with self._said:
            got = _loads(data)
            if got is None:
                self._said.seek(0)
                why = last_words(self._said.read())
                raise InputError(
                    path, f"corrupt Darshan log: libdarshan-util {_how(status)} reading it{why}"
                )
        if isinstance(got, _Failed):
            raise InputError(path, got.message.removeprefix(f"{path}: "))
        return got


def _read(path: Path, dxt: bool) -> DarshanJob | _Failed:
    """In the child: the pool worker's `_decode`, then the frames and the merged DXT."""
    from iolens.ingest.darshan_decode import _decode, _Failed
    from iolens.ingest.darshan_reader import attach_dxt

    got = _decode(str(path), dxt)
    if isinstance(got, _Failed):
        return got
    try:
        job = got.job
        job.modules.update({name: b.data() for name, b in got.extra["blocks"].items()})
        if dxt:
            attach_dxt(job, got.modules, got.dxt)  # streamed from the file, not the library
        return job
    except InputError as exc:
        return _Failed(str(exc))
    except Exception as exc:
        return _Failed(f"{path}: could not be read ({type(exc).__name__}: {exc})")


def _child(path: Path, dxt: bool, rfd: int, wfd: int, err_fd: int) -> None:
    """The child's whole life: read, send, exit without running the parent's cleanup."""
    code = 0
    try:
        os.close(rfd)
        os.dup2(err_fd, 2)  # the library's messages, for the parent when the child dies
        view = memoryview(pickle.dumps(_read(path, dxt), pickle.HIGHEST_PROTOCOL))
        while view:
            view = view[os.write(wfd, view) :]
    except BaseException:
        code = _CHILD_FAILED
    finally:
        os._exit(code)


def _receive(fd: int, deadline: float) -> bytes:
    """Everything the child writes until it closes the pipe; TimeoutError past `deadline`."""
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _loads(data: bytes) -> DarshanJob | _Failed | None:
    """The child's answer; None when it died before sending all of it."""
    from iolens.ingest.darshan_decode import _Failed
    from iolens.model.darshan import DarshanJob

    try:
        got = pickle.loads(data) if data else None
    except Exception:
        return None
    return got if isinstance(got, DarshanJob | _Failed) else None


def _how(status: int | None) -> str:
    """How the child ended, for the message: "crashed (SIGSEGV)", "ended its process (...)"."""
    if status is not None and os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            return f"crashed ({signal.Signals(sig).name})"
        except ValueError:
            return f"crashed (signal {sig})"
    code = os.WEXITSTATUS(status) if status is not None else None
    if code == _CHILD_FAILED:
        return "failed (iolens could not send what it read)"
    return f"ended its process (exit status {code})"
