"""The `iolens` executable: the node-side commands without the analysis stack.

`iolens agent`, `iolens config` and `iolens hook` run on every compute and server node,
from the light install (`pip install iolens[agent]`: no DuckDB, pyarrow, numpy, pandas...).
Importing the full command line (`main.py`) would import much of that, so for these
commands only their own modules are loaded into a small typer app; every other command
goes to `main.py`. On a light install, those say which extra they need instead of
failing with a traceback.
"""

from __future__ import annotations

import os
import sys
from typing import NoReturn

#: Commands that run on the light install (their modules import no analysis stack).
LIGHT = ("agent", "config", "hook")
#: Commands that read files without a store: each runs from an app of its own, so a fresh
#: process imports what its input needs (`iolens darshan LOG` starts like `drishti LOG`),
#: not DuckDB, the web stack or the other commands' modules.
STANDALONE = ("darshan",)
#: Packages only the server extra installs (what the node commands must never import).
SERVER_ONLY = ("duckdb", "pyarrow", "numpy", "pandas", "fastapi", "sklearn", "matplotlib")


def command(argv: list[str]) -> str | None:
    """The subcommand named on the command line (the first word not an option)."""
    return next((a for a in argv if not a.startswith("-")), None)


def light_app(name: str | None = None):  # type: ignore[no-untyped-def]
    """A typer app with only the light commands, as `main.py` registers them; the hook's
    module (which imports rich, through app.py) only when `name` is "hook"."""
    import typer

    from iolens.present.cli import agenting

    app = typer.Typer(
        name="iolens",
        help="End-to-end I/O monitoring and diagnosis for HPC clusters (node commands).",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode="markdown",
    )
    app.command()(agenting.agent)
    app.add_typer(agenting.config_app, name="config")
    if name == "hook":
        from iolens.present.cli import scheduler

        app.add_typer(scheduler.hook_app, name="hook")
    return app


def standalone(name: str, argv: list[str]) -> int:
    """Run the store-free command `name` on `argv`; its exit status.

    OpenBLAS (numpy's BLAS) starts a worker thread per core when numpy is imported; those
    spin while the imports go on (about 0.1 s of CPU on two cores, a seventh of a run) and
    a Darshan diagnosis does no linear algebra, so one thread is asked for, unless the
    user set a number (set before numpy is imported: read once, when OpenBLAS loads).
    """
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    from iolens.present.cli import darshan_log

    commands = {"darshan": darshan_log.main}
    return commands[name](argv)


def main() -> None:
    name = command(sys.argv[1:])
    if name in LIGHT or name in STANDALONE:
        from iolens.errors import IolensError

        try:
            if name in STANDALONE:
                _leave(standalone(name, sys.argv[sys.argv.index(name) + 1 :]))
            light_app(name)()
        except IolensError as exc:
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            sys.exit(130)
        except ModuleNotFoundError as exc:
            _needs_server(exc)
        return
    try:
        from iolens.present.cli.main import main as full_main
    except ModuleNotFoundError as exc:
        _needs_server(exc)
    full_main()


def _leave(code: int) -> NoReturn:
    """Exit with `code` once the output is flushed, skipping the interpreter's teardown: a
    one-shot command that imported numpy, pandas and pyarrow (some 700 modules) spends
    0.02 s freeing them at exit for nothing. A flush that fails (a closed pipe) takes the
    usual way out, which reports it."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:
        sys.exit(code)
    os._exit(code)


def _needs_server(exc: ModuleNotFoundError) -> None:
    """A command the light install cannot run: say which extra it needs, and exit."""
    if (exc.name or "iolens").split(".")[0] == "iolens":
        raise exc  # our own bug, not a missing extra
    print(
        f"error: this command needs the server install (no module {exc.name!r}): "
        "pip install 'iolens[server]'; this install runs `iolens agent`, "
        "`iolens config` and `iolens hook`",
        file=sys.stderr,
    )
    sys.exit(2)


if __name__ == "__main__":
    main()
