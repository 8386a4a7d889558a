"""`iolens agent` and `iolens config`: the node agent's command line.

This module imports neither the shared CLI module (app.py) nor rich: the agent runs for
months on every node, and those would add ~5 MiB to its resident memory for two lines of
output. `config show`, run by hand, imports rich when it needs it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

config_app = typer.Typer(help="The agent's configuration.", no_args_is_help=True)

ConfigOption = Annotated[Path | None, typer.Option("--config", help="Agent TOML config.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON only.")]


def _effective(config: Path | None, **overrides: object) -> Any:
    from iolens.collect.config import load_config
    from iolens.collect.sources import source_names

    cfg = load_config(config, source_names())
    for key, value in overrides.items():
        if value is not None:
            setattr(cfg.agent, key, value)
    return cfg


def agent(
    config: ConfigOption = None,
    server: Annotated[str | None, typer.Option(help="Ingest server URL.")] = None,
    token: Annotated[str | None, typer.Option(help="Agent token for the server.")] = None,
    root: Annotated[Path | None, typer.Option(help="Read /proc and /sys under DIR.")] = None,
    spool: Annotated[Path | None, typer.Option(help="Spool directory.")] = None,
    interval: Annotated[float | None, typer.Option(min=0.01, help="Seconds per round.")] = None,
    once: Annotated[bool, typer.Option(help="One round, deliver what is spooled, exit.")] = False,
    as_json: JsonOption = False,
) -> None:
    """Sample this node's sources and ship them to the ingest server."""
    from iolens.collect import runner

    cfg = _effective(config, server=server, token=token, root=root, spool=spool, interval=interval)
    result = runner.run(cfg, once=once)
    if as_json:
        print(json.dumps(result, indent=2))
    elif result["pending"]:
        print(
            f"iolens agent: {result['pending']} batch(es) wait in {cfg.agent.spool} for the server",
            file=sys.stderr,
        )


@config_app.command("sample")
def config_sample() -> None:
    """Print a commented sample agent config."""
    from iolens.collect.config import sample_toml
    from iolens.collect.sources import source_names, source_samples

    print(sample_toml(source_names(), source_samples()), end="")


@config_app.command("show")
def config_show(config: ConfigOption = None) -> None:
    """Print the effective agent config (defaults, then the file)."""
    from iolens.present.cli.render import stdout_console

    cfg = _effective(config)
    stdout_console().print_json(cfg.model_dump_json())
