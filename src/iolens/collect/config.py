"""The agent's typed configuration: TOML file, then command-line overrides.

Unknown keys are errors (a typo must not silently disable a source); every field says
what it is for, and `iolens config sample` prints them all as a commented sample.
"""

from __future__ import annotations

import socket
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from iolens.errors import InputError
from iolens.tomlconfig import load_toml


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentSection(Strict):
    server: str | None = Field(None, description="Ingest server URL, e.g. http://iolens:8470")
    token: str | None = Field(None, description="Agent token the server expects")
    root: Path = Field(Path("/"), description="Read /proc and /sys under this directory")
    spool: Path = Field(Path("/var/spool/iolens"), description="Where undelivered batches wait")
    spool_max_mb: int = Field(1024, ge=1, description="Spool size bound; oldest dropped beyond")
    interval: float = Field(10.0, gt=0, description="Seconds between collection rounds")
    host: str = Field(default_factory=socket.gethostname, description="This node's name")
    role: str = Field(
        "node", description="This node's component kind: compute, forwarder, oss, mds, login"
    )
    group: str | None = Field(None, description="Ingest group this agent belongs to")
    site: Path | None = Field(
        None,
        description="Site config whose [groups] pick the server when `server` is unset "
        "(by `group`, else by this host in the group's hostlists)",
    )
    trace_spool: Path = Field(
        Path("/var/spool/iolens/traces"),
        description="Where the tracer writes (IOLENS_SPOOL of the jobs); files are shipped "
        "and then deleted",
    )


class SourceSection(BaseModel):
    """`enabled`, plus the settings of sources that take any (their `OPTIONS`, e.g.
    `master` for `moosefs`): checked against the source when the agent is built."""

    model_config = ConfigDict(extra="allow")
    enabled: bool = Field(True, description="Collect from this source")

    def options(self) -> dict[str, object]:
        return dict(self.model_extra or {})


class AgentConfig(Strict):
    agent: AgentSection = Field(default_factory=AgentSection)
    sources: dict[str, SourceSection] = Field(
        default_factory=dict, description="Per-source settings by name"
    )

    def source_enabled(self, name: str) -> bool:
        section = self.sources.get(name)
        return section.enabled if section else True

    def source_options(self, name: str) -> dict[str, object]:
        section = self.sources.get(name)
        return section.options() if section else {}


def site_server(a: AgentSection) -> str | None:
    """The agent's server: `server` if set, else its group's server in the site config."""
    if a.server or a.site is None:
        return a.server
    from iolens.store.site_config import load_site

    site = load_site(a.site)
    group = a.group or site.group_of(a.host)
    if group is None or group not in site.groups:
        raise InputError(str(a.site), f"no group for host {a.host!r} (agent.group: {a.group})")
    return site.groups[group].server


def load_config(path: Path | None, known_sources: list[str]) -> AgentConfig:
    if path is None:
        return AgentConfig()
    cfg = load_toml(path, AgentConfig)
    unknown = set(cfg.sources) - set(known_sources)
    if unknown:
        raise InputError(
            str(path),
            f"unknown source(s): {', '.join(sorted(unknown))}; known: {', '.join(known_sources)}",
        )
    return cfg


def sample_toml(known_sources: list[str], samples: dict[str, str] | None = None) -> str:
    """A commented sample config with every field and its default (`samples`: a source's
    own section body, for sources that are off by default or take settings)."""
    lines = ["# iolens agent configuration (iolens agent --config FILE)", "", "[agent]"]
    for name, field in AgentSection.model_fields.items():
        default = field.get_default(call_default_factory=True)
        shown = "" if default is None else default
        lines.append(f"# {field.description}")
        value = (
            f'"{shown}"'
            if isinstance(shown, str | Path)
            else str(shown).lower()
            if isinstance(shown, bool)
            else str(shown)
        )
        lines.append(f"{'# ' if default is None else ''}{name} = {value}")
    for src in known_sources:
        body = (samples or {}).get(src) or "# Collect from this source\nenabled = true"
        lines += ["", f"[sources.{src}]", *body.splitlines()]
    return "\n".join(lines) + "\n"
