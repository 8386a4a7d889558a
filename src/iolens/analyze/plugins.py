"""Which job findings the pipeline runs, chosen by the `[analyze]` table of a site TOML
(SIOX: the modules a configuration names are the ones loaded).

    [analyze]
    findings = ["IOL001", "IOL004"]   # only these (default: all)
    disable = ["IOL006"]              # all but these

Codes are the stable finding codes (`iolens explain CODE`); an unknown one is an error
naming the file and the code, never silently nothing.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from iolens.analyze.findings import JOB_RULES
from iolens.tomlconfig import load_toml

KNOWN = tuple(r.code for r in JOB_RULES)


class AnalyzeSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    findings: list[str] | None = Field(None, description="Finding codes to run (default: all)")
    disable: list[str] = Field(default_factory=list, description="Finding codes not to run")

    @field_validator("findings", "disable")
    @classmethod
    def _known(cls, v: list[str] | None) -> list[str] | None:
        for code in v or []:
            if code not in KNOWN:
                raise ValueError(f"unknown finding {code!r} (known: {', '.join(KNOWN)})")
        return v

    def silenced(self) -> frozenset[str]:
        """The codes the pipeline skips (`analyze_jobs(silenced=...)`)."""
        on = set(self.findings) if self.findings is not None else set(KNOWN)
        return frozenset(c for c in KNOWN if c not in on or c in self.disable)


class _SiteTables(BaseModel):
    model_config = ConfigDict(extra="ignore")
    analyze: AnalyzeSection = Field(default_factory=AnalyzeSection)


def load(path: Path | None) -> AnalyzeSection:
    """The `[analyze]` table of site TOML `path` (everything on without one)."""
    if path is None:
        return AnalyzeSection()
    return load_toml(path, _SiteTables, "site config").analyze
