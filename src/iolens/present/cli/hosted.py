"""The server half: run one CLI command inside `iolens serve`, against the store it owns.

The command is the very function `iolens COMMAND` runs locally, invoked with the options
the client parsed. While it runs, `open_db` lends it the server's store and `progress()`
turns into events (`app.SERVED`); what it prints (the rich consoles, `print`) is captured
and sent as `{"out": text}` / `{"err": text}` events, drawn at the client's width and in
its colours. Commands run one at a time and under the ingest writer's lock, so a command's
writes and reads never interleave with a batch: agents' batches wait (and retry) meanwhile.

The typer application must have its commands registered, which importing
`iolens.present.cli.main` does (as the `iolens` entry point has, in `iolens serve`).
"""

from __future__ import annotations

import logging
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from iolens.errors import IolensError
from iolens.present.cli.app import SERVED, Served, app, err, out
from iolens.present.cli.forward import clicklib
from iolens.store.base import Store

log = logging.getLogger(__name__)
Emit = Callable[[dict[str, Any]], None]

_ONE_AT_A_TIME = threading.Lock()  # the consoles and sys.stdout are process-wide
_running = ""  # the command holding it, for whoever waits


class _Capture:
    """A stream that sends the running command's writes as events; other threads' writes
    (the server's own logging) go to the real stream as before."""

    def __init__(self, real: Any, key: str, emit: Emit, rewrite: Callable[[str], str]) -> None:
        self.real, self.key, self.emit, self.rewrite = real, key, emit, rewrite
        self.owner = threading.get_ident()

    def write(self, text: str) -> int:
        if threading.get_ident() != self.owner:
            return int(self.real.write(text))
        if text:
            self.emit({self.key: self.rewrite(text)})
        return len(text)

    def flush(self) -> None:
        if threading.get_ident() != self.owner:
            self.real.flush()

    def isatty(self) -> bool:
        return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)


@contextmanager
def _captured(
    emit: Emit, rewrite: Callable[[str], str], width: int, color: str | None
) -> Iterator[None]:
    from rich.console import ColorSystem

    systems = {s.name.lower(): s for s in ColorSystem}
    saved_streams = sys.stdout, sys.stderr
    saved = [(c, c._file, c._width, c._color_system) for c in (out, err)]
    sys.stdout = _Capture(saved_streams[0], "out", emit, rewrite)  # type: ignore[assignment]
    sys.stderr = _Capture(saved_streams[1], "err", emit, rewrite)  # type: ignore[assignment]
    try:
        for console, stream in ((out, sys.stdout), (err, sys.stderr)):
            console.file = stream  # type: ignore[assignment]
            console.width = width
            console._color_system = systems.get(color or "")
        yield
    finally:
        sys.stdout, sys.stderr = saved_streams
        for console, file, w, system in saved:
            console._file, console._width, console._color_system = file, w, system


def _command(op: str) -> tuple[Any, Any]:
    """(click command, the context to invoke it in) for `import darshan` and the like."""
    import typer

    context = clicklib()[1]
    group: Any = typer.main.get_command(app)
    ctx = context(group, info_name="iolens")
    words = op.split()
    for word in words[:-1]:
        group = group.get_command(ctx, word)
        ctx = context(group, info_name=word, parent=ctx)
    cmd = group.get_command(ctx, words[-1])
    if cmd is None or cmd.callback is None:
        raise IolensError(f"no command `iolens {op}`")
    return cmd, context(cmd, info_name=words[-1], parent=ctx)


def run_command(
    op: str,
    params: dict[str, Any],
    store: Store,
    lock: AbstractContextManager[Any],
    emit: Emit,
    *,
    check: Callable[[Store, dict[str, Any]], dict[str, Any]] | None = None,
    rewrite: Callable[[str], str] = lambda s: s,
    width: int = 120,
    color: str | None = None,
) -> int:
    """Run `iolens OP` with `params` on `store`; its exit status. `check` may refuse the
    call or narrow its options first (a user's own jobs), with the store at hand."""
    global _running
    if not _ONE_AT_A_TIME.acquire(blocking=False):
        emit({"err": f"iolens: waiting for `iolens {_running}` to finish on the server\n"})
        _ONE_AT_A_TIME.acquire()
    _running = op
    try:
        return _run_locked(op, params, store, lock, emit, check, rewrite, width, color)
    finally:
        _ONE_AT_A_TIME.release()


def _run_locked(
    op: str,
    params: dict[str, Any],
    store: Store,
    lock: AbstractContextManager[Any],
    emit: Emit,
    check: Callable[[Store, dict[str, Any]], dict[str, Any]] | None,
    rewrite: Callable[[str], str],
    width: int,
    color: str | None,
) -> int:
    import typer

    click_error = clicklib()[2]
    with lock:
        token = SERVED.set(Served(store, emit))
        failure: Exception | None = None
        try:
            with _captured(emit, rewrite, width, color):
                try:
                    if check is not None:
                        params = check(store, params)
                    cmd, ctx = _command(op)
                    known = {p.name for p in cmd.params}
                    unknown = sorted(set(params) - known)
                    if unknown:  # a client of another iolens version
                        raise IolensError(
                            f"this server's `iolens {op}` has no option {', '.join(unknown)}: "
                            "is the client's iolens the server's version?"
                        )
                    # as parsing would have typed them: strings to paths, lists to tuples
                    ctx.params = {
                        p.name: p.process_value(ctx, params[p.name])
                        for p in cmd.params
                        if p.name in params
                    }
                    ctx.invoke(cmd.callback, **ctx.params)
                    return 0
                except typer.Exit as exc:
                    return int(exc.exit_code)
                except SystemExit as exc:
                    return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
                except IolensError as exc:
                    emit({"error": rewrite(str(exc))})
                    return 2
                except click_error as exc:
                    emit({"error": rewrite(exc.format_message())})  # type: ignore[attr-defined]
                    return 2
                except Exception as exc:
                    emit({"error": f"the server failed running `iolens {op}`: {exc!r}"})
                    failure = exc
                    return 1
        finally:
            SERVED.reset(token)
            if failure is not None:  # in the server's log, not the client's terminal
                log.error("iolens %s failed on the server", op, exc_info=failure)
