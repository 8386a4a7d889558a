"""Darshan logs decoded in a worker process, so a crash of libdarshan-util costs one log.

libdarshan-util is C and trusts the log: a damaged one can make it abort (a failed
assertion, a double free) or segfault, which in the importer's own process would end the
whole import. So everything that goes through the library (the header, the name records,
the fixed-size module records) is read in a worker of a `ProcessPoolExecutor`, created
once per import: the `forkserver` start method forks each worker from a process that has
numpy, pandas and the library loaded already (cheap after a crash) and never from the
importer, whose store connection runs threads. The worker hands back a `Decoded` log;
DXT, the bulk of a large log, is streamed from the file by iolens's own decoder in the
importer (`darshan_reader.stream_dxt`) and never crosses the process boundary.

The worker decodes the logs one at a time, in the order they are handed over (the next
one while the importer stores the current), so when it dies the log it was reading is
known: that log fails as "libdarshan-util crashed (SIGSEGV) reading it", with the
library's last words (an assertion, "double free or corruption") when it left any, and a
fresh worker goes on with the next log. A worker the library failed in is replaced too:
a damaged log can corrupt its heap and crash it a log later, on an innocent one.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from iolens.errors import InputError, IolensError
from iolens.ingest.darshan_input import DECODE_TIMEOUT_S, last_words
from iolens.ingest.darshan_reader import DarshanLog, stream_dxt
from iolens.ingest.darshan_records import DXT_MODULES, MERGE_WINDOW, SEGMENT, DxtRecord
from iolens.model.darshan import DarshanJob

if TYPE_CHECKING:  # the pool's modules are imported by the pool: `darshan_fork` needs none
    from concurrent.futures import Future, ProcessPoolExecutor

#: What the worker imports before it forks: the reader (`iolens import darshan` starts that
#: process early with the same list). The library's binding loads in each worker in a few
#: milliseconds (`darshan_binding`).
PRELOAD = ["iolens.ingest.darshan_decode"]


@dataclass
class Decoded:
    """What the worker read from one log: the header job (with its file names), the
    `read_static` extras (counter blocks, heatmaps, AutoPerf headers, hosts), and where
    the DXT regions are, so the importer streams them itself."""

    path: Path
    job: DarshanJob
    extra: dict[str, Any]
    modules: dict[str, dict[str, Any]]
    maps: list[tuple[int, int]] | None
    comp: int = 0
    swap: bool = False
    #: DXT records read whole through the library (only when the region map is unknown)
    whole: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)

    def dxt(self, module: str) -> Iterator[DxtRecord]:
        """The module's DXT file records, as `DarshanLog.dxt` hands them out."""
        if module in self.whole:
            yield from (_rebuilt(module, *rec) for rec in self.whole[module])
            return
        if self.maps is None or not 0 <= self.modules[module]["idx"] < len(self.maps):
            return
        yield from stream_dxt(self.path, self.maps, self.comp, self.swap, self.modules, module)


@dataclass(frozen=True)
class _Job:
    """A log handed to the worker: its future and the worker's process then."""

    path: str
    dxt: bool
    future: Future[Any]
    procs: list[Any]


@dataclass(frozen=True)
class _Failed:
    """A log the worker could not read: the message of its `InputError`."""

    message: str


def _rebuilt(module: str, rid: int, rank: int, host: str, segs: np.ndarray, w: int) -> DxtRecord:
    rec = DxtRecord(module, rid, rank, host, w, len(segs) - w)
    writes, reads = segs[:w], segs[w:]
    rec._source = iter(
        [
            ("write", (writes[a : a + MERGE_WINDOW] for a in range(0, w, MERGE_WINDOW))),
            ("read", (reads[a : a + MERGE_WINDOW] for a in range(0, len(reads), MERGE_WINDOW))),
        ]
    )
    return rec


# -- the worker -------------------------------------------------------------------------


def _init_worker(stderr_path: str) -> None:
    """The worker's C-level stderr goes to a file the importer reads when it dies."""
    fd = os.open(stderr_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(fd, 2)
    os.close(fd)


def _decode(path: str, dxt: bool) -> Decoded | _Failed:
    """Runs in the worker: everything of the log that goes through libdarshan-util."""
    with contextlib.suppress(OSError):  # only this log's last words
        os.ftruncate(2, 0)
        os.lseek(2, 0, os.SEEK_SET)
    try:
        with DarshanLog(path) as log:
            job = log.header_job()
            extra = log.read_static(job, frames=False) if log.modules else _NO_EXTRA
            maps = log._maps
            out = Decoded(Path(path), job, extra, log.modules, maps)
            if maps is not None:
                out.comp, out.swap = log._comp, log._swap
            elif dxt:
                for module in DXT_MODULES:
                    if module in log.modules:
                        out.whole[module] = [_whole(rec) for rec in log._dxt_whole(module)]
            return out
    except InputError as exc:  # InputError does not survive pickling: send its text
        return _Failed(str(exc))
    except Exception as exc:  # a log the library reads but makes no sense of
        return _Failed(f"{path}: could not be imported ({type(exc).__name__}: {exc})")


def _ping() -> bool:
    return True


_NO_EXTRA: dict[str, Any] = {"blocks": {}, "heatmaps": [], "autoperf": {}, "hosts": {}}


def _whole(rec: DxtRecord) -> tuple[Any, ...]:
    parts = {op: np.concatenate(list(w) or [np.empty(0, SEGMENT)]) for op, w in rec.ops()}
    segs = np.concatenate([parts["write"], parts["read"]])
    return rec.id, rec.rank, rec.hostname, segs, rec.writes


# -- the importer's side ----------------------------------------------------------------


class DecoderPool:
    """A worker process decoding logs one at a time; replaced when a log kills it.

    Use as a context manager around a batch: the worker is started on the first log and
    kept for the next ones (its start, about a second, is paid once per import).
    `prefetch` hands it the next log while the importer stores the current one, so the
    importer does not wait for a round trip per log. Logs are decoded in the order they
    are handed over, one at a time, so a dead worker was reading the oldest log not yet
    taken back: that log, and only it, is blamed. A log libdarshan-util failed on may have
    damaged the worker's heap (the crash can come a log later), so such a worker gets no
    new log, and a log it was already given is tried again in a fresh one if it dies.
    """

    def __init__(self, timeout_s: float = DECODE_TIMEOUT_S) -> None:
        self.timeout_s = timeout_s
        import multiprocessing

        self._ctx = multiprocessing.get_context("forkserver")
        self._ctx.set_forkserver_preload(PRELOAD)
        self._dir = tempfile.TemporaryDirectory(prefix="iolens-darshan-")
        self._pool: ProcessPoolExecutor | None = None
        self._stderr = Path(self._dir.name) / "stderr"
        self._ahead: _Job | None = None
        self._dirty = False  # the worker failed on a log: its heap may be damaged
        self.started = 0  # workers started (1 + one per crash or failed log)

    def __enter__(self) -> DecoderPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._discard()
        self._dir.cleanup()

    def _start(self) -> ProcessPoolExecutor:
        from concurrent.futures import ProcessPoolExecutor

        self.started += 1
        self._pool = ProcessPoolExecutor(
            1, mp_context=self._ctx, initializer=_init_worker, initargs=(str(self._stderr),)
        )
        return self._pool

    def _discard(self) -> None:
        self._ahead, self._dirty = None, False
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def _submit(self, path: Path, dxt: bool) -> _Job:
        if self._dirty:  # no new log for a worker that failed on one
            self._discard()
        pool = self._pool or self._start()
        future = pool.submit(_decode, str(path), dxt)
        # the worker's process, for its exit status (the executor does not report it)
        procs = list((getattr(pool, "_processes", None) or {}).values())
        return _Job(str(path), dxt, future, procs)

    def prefetch(self, path: Path, dxt: bool = True) -> None:
        """Start decoding `path` now; `decode(path)` then takes the result."""
        if self._ahead is None:
            self._ahead = self._submit(path, dxt)

    def decode(self, path: Path, dxt: bool = True) -> Decoded:
        """The log's header and static records; an `InputError` naming it when it is
        unreadable, or when libdarshan-util crashed or hung reading it."""
        job, self._ahead = self._ahead, None
        if job is not None and (job.path, job.dxt) != (str(path), dxt):
            self._settle(job)  # a log handed over but not asked for: out of the way first
            job = None
        return self._result(job or self._submit(path, dxt), path)

    def _settle(self, job: _Job) -> None:
        from concurrent.futures import TimeoutError as FutureTimeout
        from concurrent.futures.process import BrokenProcessPool

        try:
            job.future.result(timeout=self.timeout_s)
        except (BrokenProcessPool, FutureTimeout):
            for p in job.procs:
                p.kill()
            self._discard()

    def _result(self, job: _Job, path: Path) -> Decoded:
        from concurrent.futures import TimeoutError as FutureTimeout
        from concurrent.futures.process import BrokenProcessPool

        try:
            got = job.future.result(timeout=self.timeout_s)
        except BrokenProcessPool:
            handed_dirty = self._dirty
            self._discard()  # joins the executor's threads first: the exit status is final
            why, said = _death(job.procs), self._last_words()
            if handed_dirty:  # handed over before the failure of an older log was known:
                return self._result(self._submit(path, job.dxt), path)  # a clean try
            if why.startswith("SIG"):
                what = f"libdarshan-util crashed ({why}) reading it"
            elif self._worker_starts():  # the library called exit() on this log
                what = f"libdarshan-util ended its process ({why}) reading it"
            else:
                raise IolensError(
                    f"the Darshan decoding worker cannot run ({why}){said}; no log was read"
                ) from None
            raise InputError(str(path), f"corrupt Darshan log: {what}{said}") from None
        except FutureTimeout:
            for p in job.procs:
                p.kill()
            self._discard()
            raise InputError(
                str(path),
                f"libdarshan-util did not finish reading it in {self.timeout_s:g} s (stopped)",
            ) from None
        if isinstance(got, _Failed):
            self._dirty = True
            raise InputError(str(path), got.message.removeprefix(f"{path}: "))
        return got

    def _worker_starts(self) -> bool:
        """Whether a fresh worker starts and answers (else the environment is at fault)."""
        try:
            (self._pool or self._start()).submit(_ping).result(timeout=120)
            return True
        except Exception:
            self._discard()
            return False

    def _last_words(self) -> str:
        try:
            return last_words(self._stderr.read_bytes())
        except OSError:
            return ""


def _death(procs: list[Any]) -> str:
    """How the worker died: the signal's name (SIGSEGV, SIGABRT) or its exit status."""
    for p in procs:
        p.join(5)
        code = p.exitcode
        if code is not None and code < 0:
            try:
                return signal.Signals(-code).name
            except ValueError:
                return f"signal {-code}"
        if code:
            return f"exit status {code}"
    return "the worker process died"
