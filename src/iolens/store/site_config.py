"""The scale-out site's configuration (`site.toml`): where the dataset is, the static agent
groups and their ingest servers, retention."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from iolens.errors import InputError
from iolens.store.dataset_layout import check_group
from iolens.tomlconfig import load_toml


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class DatasetSection(_Strict):
    path: Path | None = Field(None, description="Dataset root on the shared file system")
    flush_s: float = Field(
        2.0, gt=0, le=25, description="Ingest servers commit segments at least this often (s)"
    )
    key_days: int = Field(
        7, ge=1, description="Days of batch keys an ingest server remembers for deduplication"
    )


class GroupSection(_Strict):
    server: str = Field(description="URL of the ingest server that owns the group")
    hosts: list[str] = Field(
        default_factory=list, description="Slurm hostlists of the group's agents"
    )


class RetentionSection(_Strict):
    full_days: int = Field(7, ge=0, description="Days server samples keep their own interval")
    downsample_s: int = Field(60, ge=1, description="Interval of older server samples (s)")
    keep_days: int = Field(0, ge=0, description="Days any timed data is kept (0: forever)")
    grace_s: float = Field(
        600.0, ge=0, description="Seconds before replaced segments are deleted (readers)"
    )
    settle_s: float = Field(
        3600.0, ge=0, description="Compact an hour's partition this long after it ends"
    )


class SiteConfig(_Strict):
    """The scale-out site: where the dataset is, the static agent groups, retention."""

    dataset: DatasetSection = Field(default_factory=DatasetSection)
    groups: dict[str, GroupSection] = Field(default_factory=dict)
    retention: RetentionSection = Field(default_factory=RetentionSection)
    #: plug-in choices, validated where they are used (`iolens.analyze.reasoner.config`,
    #: `iolens.analyze.plugins`): the store layer does not know the analyses
    reasoner: dict[str, Any] = Field(default_factory=dict, description="The reasoner's plug-ins")
    analyze: dict[str, Any] = Field(default_factory=dict, description="Findings to run")

    def group_of(self, host: str) -> str | None:
        """The group whose hostlists name `host` (static assignment, as Beacon's groups)."""
        from iolens.parse.slurm import expand_hostlist

        for name, g in self.groups.items():
            for expr in g.hosts:
                if host in expand_hostlist(expr):
                    return name
        return None


def load_site(path: Path) -> SiteConfig:
    cfg = load_toml(path, SiteConfig, "site config")
    for name in cfg.groups:
        try:
            check_group(name)
        except InputError as exc:
            raise InputError(str(path), f"groups.{name}: {exc.message}") from None
    return cfg
