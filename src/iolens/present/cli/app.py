"""The typer application and what every command shares: options, consoles, progress."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from iolens.present.cli import render

if TYPE_CHECKING:  # the agent's commands import this module without the store (pyarrow)
    from iolens.store.base import Store

app = typer.Typer(
    name="iolens",
    help="End-to-end I/O monitoring and diagnosis for HPC clusters.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Markdown: docstrings' wrapped lines join into paragraphs, `code` shows as code.
    rich_markup_mode="markdown",
)
out = render.stdout_console()
err = render.stderr_console()

DbOption = Annotated[
    Path | None,
    typer.Option(
        "--db",
        envvar="IOLENS_DB",
        show_envvar=True,
        help="DuckDB store file [default: ~/.local/share/iolens/iolens.duckdb].",
    ),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON only.")]
#: One site TOML serves every command: each reads its own tables (docs/scale-out.md).
SiteOption = Annotated[
    Path | None,
    typer.Option(
        "--site-config",
        envvar="IOLENS_SITE_CONFIG",
        show_envvar=True,
        help="Site TOML (docs/scale-out.md): dataset, agent groups, retention; [analyze] "
        "picks the findings to run, [reasoner] the reasoner's detectors.",
    ),
]


@dataclass
class Served:
    """A command running inside `iolens serve` for a client (`iolens.present.cli.hosted`):
    the server's store stands in for `--db`, progress goes to `emit` as events."""

    store: Store
    emit: Callable[[dict[str, Any]], None]


SERVED: ContextVar[Served | None] = ContextVar("iolens_served", default=None)


@contextmanager
def progress(enabled: bool = True) -> Iterator[Progress]:
    served = SERVED.get()
    if served is not None:
        from iolens.present.cli.progress_events import EventProgress

        yield EventProgress(served.emit)  # type: ignore[misc]
        return
    if enabled and not err.is_terminal:  # a log or a pipe: plain lines, now and then
        import sys

        from iolens.present.cli.plain_progress import PlainProgress

        with PlainProgress(sys.stderr, err) as plain:
            yield plain  # type: ignore[misc]
        return
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not enabled,
    )
    with bar:
        yield bar


def job_steps(
    bar: Progress, task: Any, what: str = "analysing jobs"
) -> Callable[[str, int, int], None]:
    """`analyze_jobs`'s `on_step` on a bar: the stage in its description, its count."""
    shown: list[str] = []

    def step(stage: str, done: int, total: int) -> None:
        if shown[-1:] != [stage]:
            shown.append(stage)
            bar.update(task, description=f"{what}: {stage}", total=total, completed=done)
        else:
            bar.update(task, completed=done)

    return step


def open_db(db: Path | None, *, create: bool = False, op: str | None = None) -> Store:
    """The store of `--db`, or the way to it.

    Inside the server, the server's own store (lent: closing it is a no-op). Outside, when
    a server owns the store (`iolens.present.cli.forward.route`), `Forward` carries the
    command to it; a store locked by a process that no server answers for is one clear
    error naming both ways out. `op` is the command the server would run, when it is not
    the one running here (`iolens trace` stores through `import trace`)."""
    served = SERVED.get()
    if served is not None:
        lent = copy.copy(served.store)
        lent.close = lambda: None  # type: ignore[method-assign]
        return lent
    from iolens.present.cli import forward
    from iolens.store import open_store
    from iolens.store.duckdb_store import StoreLocked

    forward.route(db, op)  # raises Forward when a server owns this store
    try:
        return open_store(str(db) if db else None, create=create)
    except StoreLocked as exc:
        raise forward.locked_error(exc) from None


def ensure_analyzed(store: Store) -> None:
    from iolens.store.queries import unanalyzed_jobs

    todo = unanalyzed_jobs(store)
    if todo:
        from iolens.analyze.pipeline import analyze_jobs

        with progress() as bar:
            task = bar.add_task("analysing new jobs", total=len(todo))
            analyze_jobs(store, todo, on_step=job_steps(bar, task, "analysing new jobs"))
