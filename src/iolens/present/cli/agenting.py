"""`iolens agent` and `iolens config`: the node agent's command line."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from iolens.present.cli.app import JsonOption, err, out
from iolens.present.cli.render import to_json

config_app = typer.Typer(help="The agent's configuration.", no_args_is_help=True)

ConfigOption = Annotated[Path | None, typer.Option("--config", help="Agent TOML config.")]


def _effective(config: Path | None, **overrides: object):
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
        print(to_json(result))
    elif result["pending"]:
        err.print(
            f"iolens agent: {result['pending']} batch(es) wait in {cfg.agent.spool} for the server"
        )


@config_app.command("sample")
def config_sample() -> None:
    """Print a commented sample agent config."""
    from iolens.collect.config import sample_toml
    from iolens.collect.sources import source_names

    print(sample_toml(source_names()), end="")


@config_app.command("show")
def config_show(config: ConfigOption = None) -> None:
    """Print the effective agent config (defaults, then the file)."""
    cfg = _effective(config)
    out.print_json(cfg.model_dump_json())
