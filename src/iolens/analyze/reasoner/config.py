"""The reasoner's settings: which detector plug-ins run, with which parameters, and the
ring and aggregation bounds. Read from the `[reasoner]` table of a site TOML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from iolens.analyze.reasoner.detectors import DEFAULT, DETECTORS
from iolens.tomlconfig import load_toml


class ReasonerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    #: activities each level's ring buffer keeps (forwarded with an anomaly)
    ring: int = Field(32, ge=1, le=100_000)
    #: normal activities an episode may hold between anomalous ones (more ends it)
    gap: int = Field(2, ge=0)
    #: anomalous calls an episode needs; fewer are a stray slow call, not an anomaly
    min_calls: int = Field(3, ge=1)
    #: anomalies of processes or nodes less than this apart are at the same time
    slack_s: float = Field(0.1, ge=0)
    #: share of a node's active processes anomalous at once that makes it node-wide
    node_share: float = Field(0.5, gt=0, le=1)
    #: share of the job's active nodes anomalous at once that makes it system-wide
    system_share: float = Field(0.5, gt=0, le=1)
    #: detector name -> its parameters; the names must be plug-ins in `DETECTORS`
    detectors: dict[str, dict[str, float]] = Field(default_factory=lambda: {n: {} for n in DEFAULT})

    @field_validator("detectors")
    @classmethod
    def _known(cls, v: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for name, params in v.items():
            if name not in DETECTORS:
                raise ValueError(
                    f"unknown anomaly detector {name!r} (known: {', '.join(sorted(DETECTORS))})"
                )
            try:
                DETECTORS[name](**params)
            except TypeError as exc:
                raise ValueError(f"detector {name!r}: {exc}") from None
        if not v:
            raise ValueError("no anomaly detector enabled")
        return v

    def make_detectors(self) -> list[Any]:
        """Fresh detector instances (each process gets its own baselines)."""
        return [DETECTORS[n](**p) for n, p in self.detectors.items()]


class _SiteTables(BaseModel):
    """The tables of a site TOML the reasoner reads; the others belong to other parts."""

    model_config = ConfigDict(extra="ignore")
    reasoner: ReasonerConfig = Field(default_factory=ReasonerConfig)


def load(path: Path | None) -> ReasonerConfig:
    """The `[reasoner]` table of site TOML `path` (defaults without one); InputError
    naming the file and the field, e.g. an unknown detector."""
    if path is None:
        return ReasonerConfig()
    return load_toml(path, _SiteTables, "site config").reasoner
