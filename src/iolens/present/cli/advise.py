"""`iolens advise APP`: the Lustre striping, I/O mode and MPI-IO hints that served APP best."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.table import Table

from iolens.present.cli import render
from iolens.present.cli.app import DbOption, JsonOption, ensure_analyzed, open_db, out

if TYPE_CHECKING:
    from iolens.store.base import Store

TITLES = {"stripe": "Lustre striping", "io_mode": "I/O mode", "mpi_hints": "MPI-IO hints"}


def advise(
    app: Annotated[str, typer.Argument(help="Application name (as in `iolens jobs`).")],
    user: Annotated[str | None, typer.Option(help="Only this user's runs.")] = None,
    ext: Annotated[
        str | None, typer.Option(help="Only runs touching files with this extension, e.g. .h5.")
    ] = None,
    db: DbOption = None,
    as_json: JsonOption = False,
) -> None:
    """Best known Lustre striping, I/O mode and MPI-IO hints for an application.

    Learned from its past runs (at least 5), with an lfs setstripe line and the
    IOLENS_MPI_HINTS line that makes the tracer inject the best hints."""
    from iolens.analyze.advise import advise as learn

    if ext is not None and not ext.startswith("."):
        ext = "." + ext
    with open_db(db) as store:
        _known(store, app, user)
        ensure_analyzed(store)
        rep = learn(store, app, user=user, ext=ext)
    if as_json:
        print(render.to_json(rep))
        return
    if not rep["advice"]:
        out.print(f"No advice yet: {rep['reason']}.", style="yellow")
        return
    scope = "".join(
        [f" for {rep['app']}", f", user {user}" if user else "", f", *{ext} files" if ext else ""]
    )
    out.print(f"[bold]Best known settings{scope}[/] (from {rep['trials']} runs)")
    for kind, c in rep["settings"].items():
        out.print(_table(kind, c))
        out.print(_verdict(c), highlight=False)
    out.print()
    if rep["lfs_setstripe"]:
        out.print("[bold]Striping[/] (before the files are created):")
        out.print(rep["lfs_setstripe"], highlight=False, markup=False)
    if rep["mpi_hints_env"]:
        out.print("[bold]MPI-IO hints[/] (in the job's environment, with the tracer preloaded):")
        out.print(rep["mpi_hints_env"], highlight=False, markup=False)


def _known(store: Store, app: str, user: str | None) -> None:
    """An application with no runs (a typo, another site's name) is an error naming the
    ones there are, not "no advice yet", which reads as "come back later"."""
    from iolens.errors import NotFound

    rows = store.query(
        'SELECT app, count(*) FILTER (WHERE ? IS NULL OR "user" = ?) AS mine FROM jobs '
        "WHERE app IS NOT NULL GROUP BY app ORDER BY count(*) DESC, app",
        [user, user],
    ).to_pylist()
    runs = {r["app"]: r["mine"] for r in rows}
    if runs.get(app):
        return
    if app in runs:
        raise NotFound(f"user {user} has no runs of application {app!r} in {store.location}")
    known = ", ".join(list(runs)[:10]) + (" ..." if len(runs) > 10 else "")
    raise NotFound(
        f"no application {app!r} in {store.location}"
        + (f"; its applications: {known}" if known else "; it has no jobs")
        + " (see `iolens jobs`)"
    )


def _verdict(c: dict[str, Any]) -> str:
    """What to do, with how sure it is, and what deserves another try."""
    if c["best"] is None:
        line = f"No recommendation: {c['reason']}; keep {c['current']}."
    elif c["confidence"] == "keep":
        line = f"Keep {c['best']}: " + (
            "the only setting tried." if c["only_setting_tried"] else "the best tried."
        )
    else:
        ev = c["evidence"]
        lo, hi = ev["gain_interval"]
        line = (
            f"Use {c['best']}: {c['gain']:.2f}x the current {c['current']} "
            f"({c['runs']} runs; 90 % interval {lo:.2f}-{hi:.2f}x; rank test "
            f"p = {ev['p_value']:.2g}, confidence {c['confidence']})."
        )
    for r in c["retry"]:
        line += (
            f"\n{r['setting']} looked faster ({render.human_rate(r['median_bw'])}) but was "
            f"tried {r['runs']} time(s): run it again before trusting it."
        )
    return line


def _table(kind: str, c: dict[str, Any]) -> Table:
    t = Table(
        title=f"{TITLES.get(kind, kind)}: current {c['current']}",
        title_justify="left",
        header_style="bold",
    )
    for col in ("setting", "runs", "median bandwidth", "spread (q1-q3)", "vs best", "jobs"):
        t.add_column(col, justify="left" if col in ("setting", "jobs") else "right")
    for s in c["settings"]:
        jobs = s["jobs"]
        sp = s["spread"]
        t.add_row(
            s["setting"] + (" (current)" if s["current"] else ""),
            str(s["runs"]),
            render.human_rate(s["median_bw"]),
            f"{render.human_rate(sp['q1'])}-{render.human_rate(sp['q3'])}",
            f"{s['vs_best']:.2f}" if s["vs_best"] is not None else "-",
            ", ".join(jobs[:4]) + (f" (+{len(jobs) - 4})" if len(jobs) > 4 else ""),
        )
    return t
