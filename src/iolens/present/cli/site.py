"""`iolens site ...`: what a site installs and describes once.

`slurm-files DIR` writes the files that trace every Slurm job (docs/deploy-slurm.md): the
sources ship in the package (`iolens/site/slurm/`) and are written out with this
installation's tracer library, spool directory and server filled in, and the SPANK
plug-in is built when Slurm's development header is there. `topology FILE.toml` loads the
site's topology (docs/topology.md): forwarders and the nodes behind them, servers and
their targets, peaks, aliases.
"""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any

import typer

from iolens.errors import IolensError
from iolens.present.cli.app import DbOption, JsonOption, open_db, out
from iolens.present.cli.render import human_rate, to_json

site_app = typer.Typer(
    help="What a site installs (Slurm files) and describes once (its topology).",
    no_args_is_help=True,
)

DEFAULT_SPOOL = Path("/var/spool/iolens/traces")  # the agent's default trace_spool
SPANK_SRC = "iolens_spank.c"
SPANK_SO = "iolens_spank.so"
HOOK_ENV_DEFAULT = "/etc/iolens/hook.env"
EPILOG_ENV_DEFAULT = "/etc/iolens/epilog.env"
EPILOG_PY = "iolens_seff_epilog.py"


def _source(name: str) -> str:
    return files("iolens.site").joinpath("slurm", name).read_text()


def build_spank(src: Path, dest: Path, cc: str = "cc") -> str | None:
    """Compile the SPANK plug-in; None on success, else why it was not built."""
    if shutil.which(shlex.split(cc)[0]) is None:
        return f"no C compiler ({cc})"
    cmd = [*shlex.split(cc), "-shared", "-fPIC", "-O2", "-Wall", "-Wextra", "-o", str(dest)]
    res = subprocess.run([*cmd, str(src)], capture_output=True, text=True)
    if res.returncode == 0:
        return None
    if "spank.h" in res.stderr:
        return "no <slurm/spank.h> (install libslurm-dev or slurm-devel)"
    return f"{cc} failed: {res.stderr.strip().splitlines()[-1] if res.stderr.strip() else '?'}"


def write_slurm_files(
    dest: Path,
    lib: Path,
    spool: Path,
    server: str | None,
    iolens_bin: str,
    build: bool = True,
    cc: str = "cc",
    token: str | None = None,
) -> dict[str, Any]:
    """Write the Slurm integration into `dest`; returns what was written and built."""
    dest.mkdir(parents=True, exist_ok=True)
    written: list[str] = []

    def put(name: str, text: str, mode: int = 0o644) -> Path:
        p = dest / name
        p.write_text(text)
        p.chmod(mode)
        written.append(name)
        return p

    src = put(SPANK_SRC, _source(SPANK_SRC))
    put("plugstack.conf", f"optional {dest / SPANK_SO} lib={lib} spool={spool}\n")
    put(
        "taskprolog.sh",
        _source("taskprolog.sh")
        .replace("@IOLENS_LIB@", str(lib))
        .replace("@IOLENS_SPOOL@", str(spool)),
        0o755,
    )
    # the hook reads its settings from the hook.env next to it (not /etc/iolens/hook.env)
    hook_sh = _source("slurm-hook.sh")
    put("iolens-slurm-hook", hook_sh.replace(HOOK_ENV_DEFAULT, str(dest / "hook.env")), 0o755)
    env = [f"IOLENS_BIN={iolens_bin}", f"IOLENS_HOOK_SPOOL={dest / 'hook-spool'}"]
    env.append(f"IOLENS_SERVER={server}" if server else "# IOLENS_SERVER=http://iolens:8470")
    env.append(
        f"IOLENS_TOKEN={token}" if token else "# IOLENS_TOKEN=... one of the server's --agent-token"
    )
    put("hook.env", "\n".join(env) + "\n", 0o600)
    # the I/O seff line at the end of each step; its settings are world-readable (no token).
    # srun's environment preloads the tracer: the wrapper keeps the epilog's own start-up
    # (a Python interpreter's ~1,000 stats and opens) out of the job's I/O
    epilog = files("iolens.collect").joinpath("slurm_epilog.py").read_text()
    py = put(EPILOG_PY, epilog.replace(EPILOG_ENV_DEFAULT, str(dest / "epilog.env")), 0o755)
    put(
        "iolens-seff-epilog",
        "#!/bin/sh\n# SrunEpilog: the job's I/O seff line (not part of the job's I/O)\n"
        f'IOLENS_DISABLE=1 exec python3 {shlex.quote(str(py))} "$@"\n',
        0o755,
    )
    put(
        "epilog.env",
        f"IOLENS_SERVER={server}\n" if server else "# IOLENS_SERVER=http://iolens:8470\n",
    )
    hook = dest / "iolens-slurm-hook"
    put(
        "slurm.conf.iolens",
        "# Add to slurm.conf (one of the first two lines: the SPANK plug-in has --no-iolens)\n"
        f"PlugStackConfig={dest / 'plugstack.conf'}\n"
        f"#TaskProlog={dest / 'taskprolog.sh'}\n"
        "# job start/end/nodes to the iolens server, once per job on the controller\n"
        f"PrologSlurmctld={hook}\nEpilogSlurmctld={hook}\n"
        "# the job's I/O seff line at the end of each step, in the job's output\n"
        f"SrunEpilog={dest / 'iolens-seff-epilog'}\n",
    )
    why = build_spank(src, dest / SPANK_SO, cc) if build else "--no-build"
    if why is None:
        written.append(SPANK_SO)
    return {
        "dir": str(dest),
        "files": written,
        "lib": str(lib),
        "spool": str(spool),
        "spank_built": why is None,
        "spank_not_built_because": why,
    }


@site_app.command("slurm-files")
def slurm_files(
    dest: Annotated[Path, typer.Argument(help="Directory to write the files into.")],
    lib: Annotated[
        Path | None,
        typer.Option(help="Tracer library the jobs preload [default: this installation's]."),
    ] = None,
    spool: Annotated[
        Path, typer.Option(help="Where traced jobs write (the agents' trace_spool).")
    ] = DEFAULT_SPOOL,
    server: Annotated[
        str | None, typer.Option(help="iolens server URL, for the prolog/epilog hook.")
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="IOLENS_TOKEN", help="Agent token for --server (hook.env is mode 600)."
        ),
    ] = None,
    build: Annotated[
        bool, typer.Option(help="Build iolens_spank.so (needs cc and <slurm/spank.h>).")
    ] = True,
    as_json: JsonOption = False,
) -> None:
    """Write the Slurm files that trace every job and report job starts and ends.

    The SPANK plug-in (built when Slurm's header is there), TaskProlog, prolog/epilog
    hook and the slurm.conf lines that enable them."""
    from iolens.tracefile import library_path

    if lib is None:
        lib = library_path()
    if not lib.is_file():
        raise IolensError(f"--lib {lib} does not exist")
    iolens_bin = shutil.which("iolens") or str(Path(sys.executable).with_name("iolens"))
    result = write_slurm_files(
        dest.resolve(), lib.resolve(), spool, server, iolens_bin, build=build, token=token
    )
    if as_json:
        print(to_json(result))
        return
    out.print(f"Wrote {', '.join(result['files'])} into {result['dir']}.")
    if not result["spank_built"]:
        out.print(f"iolens_spank.so not built: {result['spank_not_built_because']}.")
    out.print(
        f"Add the lines of {dest / 'slurm.conf.iolens'} to slurm.conf; see docs/deploy-slurm.md."
    )


@site_app.command("topology")
def topology(
    file: Annotated[
        Path | None,
        typer.Argument(help="Site topology file (TOML) to load; see --sample.", dir_okay=False),
    ] = None,
    db: DbOption = None,
    show: Annotated[bool, typer.Option("--show", help="Print the topology as stored.")] = False,
    sample: Annotated[
        bool, typer.Option("--sample", help="Print a commented sample file and exit.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Load the site topology: forwarders or LNet routers and the nodes behind them,
    Lustre servers and their targets, peak bandwidth and request rates (given, or from an
    imported IO500 run), login and service nodes, and the NIDs and addresses of hosts.

    What the file describes replaces what was stored for the same names; nothing else is
    touched. Without FILE, `--show` prints what is stored."""
    from iolens.ingest import topology as topo

    if sample:
        print(topo.sample(), end="")
        return
    if file is None and not show:
        raise IolensError("give a topology FILE to load, --show, or --sample")
    parsed = topo.read_topology(file) if file is not None else None  # before creating a store
    with open_db(db, create=file is not None) as store:
        loaded = topo.load_topology(store, file, parsed) if file is not None else None
        stored = topo.stored(store) if show else None
    if as_json:
        print(to_json({k: v for k, v in (("loaded", loaded), ("stored", stored)) if v}))
        return
    if loaded:
        kinds = ", ".join(f"{n} {k}" for k, n in loaded["components"].items())
        out.print(
            f"Loaded {loaded['file']}: {kinds}; {loaded['forwarding']} compute -> forwarder "
            f"mappings; {loaded['aliases']} aliases."
        )
        sources = sorted(set(loaded["peaks_from"].values()))
        if sources:
            out.print(
                f"Peaks of {len(loaded['peaks_from'])} components from: {', '.join(sources)}."
            )
        missing = loaded["without_peak"]
        if missing:
            names = ", ".join(missing[:6]) + (" ..." if len(missing) > 6 else "")
            out.print(
                f"No peak for {len(missing)} servers/targets/forwarders ({names}): their "
                "load levels and the 30 %-of-peak rule stay unknown."
            )
    if stored:
        _print_stored(stored)


def _print_stored(s: dict[str, Any]) -> None:
    from rich.table import Table

    kinds = ", ".join(f"{n} {k}" for k, n in s["components"].items()) or "no components"
    out.print(f"Stored: {kinds}; {s['forwarding']} mapped compute nodes; {s['aliases']} aliases.")
    if s["forwarders"]:
        t = Table(title="Forwarders")
        for col in ("forwarder", "nodes", "peak bw", "peak ops/s"):
            t.add_column(col)
        for f in s["forwarders"]:
            t.add_row(
                f["component_id"], str(f["nodes"]), _peak(f["peak_bw"], True), _peak(f["peak_ops"])
            )
        out.print(t)
    if s["servers"]:
        t = Table(title="Servers")
        for col in ("server", "kind", "targets", "peak bw", "peak ops/s"):
            t.add_column(col)
        for v in s["servers"]:
            t.add_row(
                v["component_id"], v["kind"], str(len(v["targets"])),
                _peak(v["peak_bw"], True), _peak(v["peak_ops"]),
            )  # fmt: skip
        out.print(t)


def _peak(v: float | None, bw: bool = False) -> str:
    if v is None:
        return "-"
    return human_rate(v) if bw else f"{v:,.0f}"
