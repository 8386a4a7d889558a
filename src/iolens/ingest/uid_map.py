"""The site's map from the uids in imported Darshan logs to its own account names.

A Darshan log records the uid its job ran under (`getuid()` on the compute node) and no
name. That number means an account only on the cluster that wrote the log: looked up on
the importing machine it names whoever has it here (uid 1000 of another site became a
local user, who then saw those jobs). So an imported job keeps its number
(`darshan_logs.uid`) and is owned by `uid:<N>` (`iolens.model.owner`), seen by
administrators only, unless the map given to `iolens import darshan --uid-map FILE` names
the account:

    [uids]            # uid in the logs = account name here
    1000 = "alice"
    31074 = "bob"

    # The logs come from clusters that share this machine's accounts (same LDAP): uids
    # the table above leaves out are looked up here (getpwuid).
    local_accounts = false

Importing already loaded logs again with a map re-owns their jobs (only jobs Darshan
created: a scheduler's record of the job keeps its owner), so a map written later
applies to earlier imports.
"""

from __future__ import annotations

import pwd
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from iolens.model.owner import USER_NAME, unmapped_owner
from iolens.tomlconfig import load_toml


class UidMap(BaseModel):
    """`[uids]` (uid = account) and `local_accounts`; the empty map names no one."""

    model_config = ConfigDict(extra="forbid")

    uids: dict[int, str] = Field(
        default_factory=dict, description="uid in the logs = account name on this site"
    )
    local_accounts: bool = Field(
        False,
        description="Resolve uids not in [uids] with this machine's accounts (the logs "
        "come from clusters sharing them)",
    )

    @field_validator("uids")
    @classmethod
    def _names(cls, value: dict[int, str]) -> dict[int, str]:
        for uid, name in value.items():
            if uid < 0:
                raise ValueError(f"uid {uid} is negative")
            if not USER_NAME.match(name):
                raise ValueError(f"{name!r} (uid {uid}) is not an account name")
        return value

    def owner(self, uid: int) -> str:
        """The account that owns a job run under `uid`, else `uid:<N>` (admins only)."""
        name = self.uids.get(int(uid))
        if name is None and self.local_accounts:
            try:
                name = pwd.getpwuid(int(uid)).pw_name
            except (KeyError, OverflowError):
                name = None
        return name if name is not None and USER_NAME.match(name) else unmapped_owner(uid)


def load_uid_map(path: Path | None) -> UidMap:
    """The map in `path` (TOML); no path: the empty map."""
    return UidMap() if path is None else load_toml(path, UidMap, "uid map")


__all__ = ["UidMap", "load_uid_map"]
