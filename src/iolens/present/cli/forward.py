"""The client half of running a command through the `iolens serve` that owns the store.

`open_db` asks `route` first: when a server owns the store (announced beside it,
`iolens.present.discovery`, or named by `$IOLENS_SERVER` while `--db` is not typed), it
raises `Forward` before touching the file, and `main` hands the command to `run`: its
parsed options go to `POST /api/v1/run` with the input files it names (a tar), and what
the server's run of the same command prints comes back as events: stdout, stderr,
progress (drawn here with a rich bar), files it wrote, its exit status.

Credentials, first found: the command's `--token`, `$IOLENS_TOKEN` (an `iolens user add`
token), the server's owner token beside the store (readable by the server's account only).
"""

from __future__ import annotations

import base64
import io
import json
import os
import sys
import tarfile
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from iolens.errors import IolensError
from iolens.present import discovery
from iolens.present.ops import LOCAL_ONLY, OPS

if TYPE_CHECKING:
    from click import Context

    from iolens.store.duckdb_store import StoreLocked

RUN_PATH = "/api/v1/run"
REQUEST_MEMBER = ".iolens-request.json"
CHUNK = 1 << 20


class Forward(Exception):
    """Raised by `open_db` when the command must run on `server` instead."""

    def __init__(self, server: discovery.Server, ctx: Context, op: str) -> None:
        super().__init__(f"run `iolens {op}` on {server.url}")
        self.server, self.ctx, self.op = server, ctx, op


def op_name(ctx: Context) -> str:
    names: list[str] = []
    while ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(reversed(names))


def clicklib() -> tuple[Any, Any, type[Exception]]:
    """(get_current_context, Context, ClickException) of the click typer runs on: typer
    0.2x vendors its own copy (`typer._click`), whose context stack is not click's."""
    try:
        from typer._click import core, exceptions
        from typer._click import globals as stack
    except ImportError:  # a typer on the real click
        import click

        return click.get_current_context, click.Context, click.ClickException
    return stack.get_current_context, core.Context, exceptions.ClickException


def route(db: Path | None, op: str | None = None) -> None:
    """Raise `Forward` when a server owns the store of this command (or of `op`)."""
    from iolens.store import default_db_path

    ctx = clicklib()[0](silent=True)
    if ctx is None:
        return
    store = Path(db) if db else default_db_path()
    env_url = os.environ.get("IOLENS_SERVER")
    op = op or op_name(ctx)
    if env_url and not _typed(ctx, "db"):
        if op not in OPS:
            return  # a command the server does not run: it opens the file as before
        server = discovery.Server(env_url, token=discovery.owner_token(store))
    else:
        server = discovery.find(store)
        if server is None:
            return
    if op not in OPS:
        pid = f" (pid {server.pid})" if server.pid else ""
        if op == "serve":
            raise IolensError(f"{store} is already served by iolens serve at {server.url}{pid}")
        raise IolensError(
            f"{store} is owned by iolens serve at {server.url}{pid}; `iolens {op}` does not "
            "run through it: stop the server first"
        )
    raise Forward(server, ctx, op)


def _typed(ctx: Context, name: str) -> bool:
    source = ctx.get_parameter_source(name)
    return source is not None and source.name in ("COMMANDLINE", "PROMPT")


def locked_error(exc: StoreLocked) -> IolensError:
    """One line naming both ways out of a store another process holds."""
    stale = discovery.stale_url(exc.path)
    gone = f"; the server it announced ({stale}) does not answer" if stale else ""
    return IolensError(
        f"{exc.path} is locked by another process (PID {exc.pid}, {exc.program}){gone}. "
        "If it is `iolens serve`, run the command through it (start it with this iolens, "
        "which it then finds by itself, or set IOLENS_SERVER=http://HOST:PORT); "
        f"otherwise stop PID {exc.pid} and retry"
    )


def run(fw: Forward) -> int:
    """Run the forwarded command on its server; its exit status."""
    params = dict(fw.ctx.params)
    token = params.get("token") or os.environ.get("IOLENS_TOKEN") or fw.server.token
    return call(fw.server.url, fw.op, params, token)


def call(
    url: str,
    op: str,
    params: dict[str, Any],
    token: str | None,
    write_out: Callable[[str], object] | None = None,
) -> int:
    """POST one command with its inputs; print (or `write_out`) what it prints; its status.

    An `error:` the command raised on the server is raised here, the same words."""
    import httpx

    spec = OPS[op]
    sent = {k: _jsonable(v) for k, v in params.items() if k not in LOCAL_ONLY}
    inputs = {name: _paths(sent.get(name)) for name in spec.inputs}
    outputs = {name: sent[name] for name in spec.outputs if sent.get(name)}
    request = {"op": op, "params": sent, "inputs": inputs, "outputs": outputs, **_console()}
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    base = url.rstrip("/")
    error: str | None = None
    status: int | None = None
    with tempfile.TemporaryFile() as body:
        _pack(body, request, [p for ps in inputs.values() for p in ps])
        try:
            with httpx.stream(
                "POST",
                base + RUN_PATH,
                content=_chunks(body),
                headers={**headers, "Content-Type": "application/x-tar"},
                timeout=httpx.Timeout(30.0, read=None),
            ) as res:
                if res.status_code != 200:
                    res.read()
                    raise _refused(base, res)
                with _Bars() as bars:
                    for line in res.iter_lines():
                        if not line:
                            continue
                        event = json.loads(line)
                        if "out" in event:
                            (write_out or _stdout)(event["out"])
                        elif "err" in event:
                            sys.stderr.write(event["err"])
                            sys.stderr.flush()
                        elif "progress" in event:
                            bars.show(event["progress"])
                        elif "file" in event:
                            _write_file(outputs[event["file"]["param"]], event["file"]["data"])
                        elif "error" in event:
                            error = event["error"]
                        elif "exit" in event:
                            status = int(event["exit"])
        except httpx.HTTPError as exc:
            raise IolensError(f"cannot reach iolens server at {base}: {exc}") from None
    if error is not None:
        raise IolensError(error)
    if status is None:
        raise IolensError(f"iolens server at {base} stopped before `iolens {op}` finished")
    return status


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _console() -> dict[str, Any]:
    """How this terminal draws: the server renders tables to its width, in its colours."""
    from iolens.present.cli.render import stdout_console

    console = stdout_console()
    return {"width": console.width, "color": console.color_system}


def _jsonable(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if hasattr(value, "value") and not isinstance(value, str | int | float | bool):
        return value.value  # an Enum choice
    return value


def _paths(value: Any) -> list[str]:
    """The absolute paths an input option names (none, one or several)."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    return [os.path.abspath(str(p)) for p in items]


def _pack(body: IO[bytes], request: dict[str, Any], paths: list[str]) -> None:
    """The request and every input under `in/<absolute path>`, so names (a run's folder,
    a log's pid, a capture's times) and the messages naming them read as they do here."""
    with tarfile.open(fileobj=body, mode="w:gz", compresslevel=1) as tar:
        data = json.dumps(request).encode()
        info = tarfile.TarInfo(REQUEST_MEMBER)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
        for p in paths:
            if os.path.exists(p):
                tar.add(p, arcname="in" + p)
    body.seek(0)


def _chunks(body: IO[bytes]) -> Iterator[bytes]:
    while chunk := body.read(CHUNK):
        yield chunk


def _write_file(path: str, data: str) -> None:
    try:
        Path(path).write_bytes(base64.b64decode(data))
    except OSError as exc:
        raise IolensError(f"cannot write {path}: {exc.strerror or exc}") from None


def _refused(base: str, res: Any) -> IolensError:
    try:
        detail = res.json().get("detail", "")
    except ValueError:
        detail = res.text.strip()[:200]
    if res.status_code == 401:
        return IolensError(
            f"iolens server at {base} refused the token ({detail}): set IOLENS_TOKEN to "
            "your `iolens user add` token, or run as the account that runs the server"
        )
    if res.status_code == 404 and not detail:
        return IolensError(f"{base} has no {RUN_PATH}: is it an iolens server of this version?")
    return IolensError(f"iolens server at {base} answered HTTP {res.status_code}: {detail}")


class _Bars:
    """The server's progress events on a rich bar on stderr; when stderr is not a terminal,
    as plain lines now and then (`plain_progress`), as a command run here would."""

    def __enter__(self) -> _Bars:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        from iolens.present.cli.render import stderr_console

        console = stderr_console()
        self.tasks: dict[int, Any] = {}
        if not console.is_terminal:
            import sys

            from iolens.present.cli.plain_progress import PlainProgress

            self.bar = PlainProgress(sys.stderr, console)  # type: ignore[assignment]
            self.bar.__enter__()
            return self
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
            transient=True,
            redirect_stdout=False,  # the command's output stays on stdout (pipes, --json)
        )
        self.bar.__enter__()
        return self

    def show(self, p: dict[str, Any]) -> None:
        if p["task"] not in self.tasks:
            self.tasks[p["task"]] = self.bar.add_task(p["description"], total=p["total"])
        self.bar.update(
            self.tasks[p["task"]],
            description=p["description"],
            total=p["total"],
            completed=p["completed"],
        )

    def __exit__(self, *exc: object) -> None:
        self.bar.__exit__(None, None, None)
