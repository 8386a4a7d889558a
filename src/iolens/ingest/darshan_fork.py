"""One Darshan log read in a forked child, for commands that read a few logs and exit.

The importer's `DecoderPool` starts its worker from a forkserver: about a second, paid once
per import, and needed there because the importer's store runs threads. `iolens darshan
LOG` reads one log, or a job's few, in a process without threads, so it forks itself for
each: the child inherits numpy, pandas and libdarshan-util already loaded (milliseconds,
not a second), runs the pool worker's `_decode`, and sends the `Decoded` log back through a
pipe. A crash of the library (a failed assertion, a double free, a segfault) costs only
the child: the log fails with an `InputError` naming it, as in the importer.
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

from iolens.errors import InputError
from iolens.ingest.darshan_decode import DECODE_TIMEOUT_S, Decoded, _decode, _Failed, last_words
from iolens.ingest.darshan_reader import attach_dxt
from iolens.ingest.darshan_records import backend
from iolens.model.darshan import DarshanJob

#: Exit status of a child that failed in Python before sending its log (a bug, not the log).
_CHILD_FAILED = 70


def read_forked(
    path: str | Path, *, dxt: bool = True, timeout_s: float = DECODE_TIMEOUT_S
) -> DarshanJob:
    """The log as `read_log` returns it (DXT merged), libdarshan-util run in a child.

    Raises `InputError` naming the log when it is unreadable, or when the library crashed
    or did not finish in `timeout_s`.
    """
    got = decode_forked(Path(path), dxt, timeout_s)
    job = got.job
    job.modules.update({name: block.data() for name, block in got.extra["blocks"].items()})
    if dxt:
        attach_dxt(job, got.modules, got.dxt)  # streamed from the file here, not the library
    return job


def decode_forked(path: Path, dxt: bool, timeout_s: float) -> Decoded:
    """What the pool's worker returns for `path`, from a forked child."""
    backend()  # loaded once here, inherited by every child
    rfd, wfd = os.pipe()
    with tempfile.TemporaryFile() as said:
        pid = os.fork()
        if pid == 0:
            _child(path, dxt, rfd, wfd, said.fileno())
        os.close(wfd)
        status: int | None = None
        try:
            data = _receive(rfd, timeout_s)
            status = os.waitpid(pid, 0)[1]
        except TimeoutError:
            raise InputError(
                str(path),
                f"libdarshan-util did not finish reading it in {timeout_s:g} s (stopped)",
            ) from None
        finally:
            os.close(rfd)
            if status is None:  # timed out or interrupted: the child goes too
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
        got = _loads(data)
        if got is None:
            said.seek(0)
            why = last_words(said.read())
            raise InputError(
                str(path), f"corrupt Darshan log: libdarshan-util {_how(status)} reading it{why}"
            )
    if isinstance(got, _Failed):
        raise InputError(str(path), got.message.removeprefix(f"{path}: "))
    return got


def _child(path: Path, dxt: bool, rfd: int, wfd: int, err_fd: int) -> None:
    """The child's whole life: decode, send, exit without running the parent's cleanup."""
    code = 0
    try:
        os.close(rfd)
        os.dup2(err_fd, 2)  # the library's messages, for the parent when the child dies
        view = memoryview(pickle.dumps(_decode(str(path), dxt), pickle.HIGHEST_PROTOCOL))
        while view:
            view = view[os.write(wfd, view) :]
    except BaseException:
        code = _CHILD_FAILED
    finally:
        os._exit(code)


def _receive(fd: int, timeout_s: float) -> bytes:
    """Everything the child writes until it closes the pipe; TimeoutError past the limit."""
    deadline = time.monotonic() + timeout_s
    chunks = []
    while True:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            raise TimeoutError
        chunk = os.read(fd, 1 << 20)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _loads(data: bytes) -> Decoded | _Failed | None:
    """The child's answer; None when it died before sending all of it."""
    try:
        got = pickle.loads(data) if data else None
    except Exception:
        return None
    return got if isinstance(got, Decoded | _Failed) else None


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
