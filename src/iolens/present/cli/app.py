"""The typer application and what every command shares: options, consoles, progress."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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


@contextmanager
def progress(enabled: bool = True) -> Iterator[Progress]:
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=err,
        transient=True,
        disable=not enabled or not err.is_terminal,
    )
    with bar:
        yield bar


def open_db(db: Path | None, *, create: bool = False) -> Store:
    from iolens.store import open_store

    return open_store(str(db) if db else None, create=create)


def ensure_analyzed(store: Store) -> None:
    from iolens.store.queries import unanalyzed_jobs

    todo = unanalyzed_jobs(store)
    if todo:
        from iolens.analyze.pipeline import analyze_jobs

        with progress() as bar:
            task = bar.add_task("analysing new jobs", total=len(todo))
            analyze_jobs(store, todo, on_job=lambda _j: bar.advance(task))
