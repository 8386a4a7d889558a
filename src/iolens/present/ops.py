"""The CLI operations a running `iolens serve` runs for the command line, and who may.

One table instead of one endpoint per command: the client sends the command's name and
its parsed options (`POST /api/v1/run`, `iolens.present.web.run`), the server runs the very
same command function against the store it owns, and streams back what it printed.

Access, checked by the server on the caller `auth.authorize` resolved:

- `user`: any logged-in user, scoped to their own jobs (a job argument must be theirs;
  `jobs` lists theirs only; `import trace` loads their own processes' traces, so
  `iolens trace` works for everyone); admins and agent tokens see everything, as in
  `/api/v1`;
- `read`: every job or component at once (anomalies, load, series...): admins and agents;
- `ingest`: imports: admins, and agent tokens (which may post any batch already);
- `admin`: accounts, re-analysis and alerts: administrators only, never an agent token.

`inputs` name the options holding files or folders to read (uploaded: the server may run
as another account, on another host); `outputs` the files a command writes (written on
the server, sent back, written by the client where it was asked).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Access = Literal["user", "read", "ingest", "admin"]


@dataclass(frozen=True)
class Op:
    access: Access
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    #: (table, column) where the command stores its inputs' paths: the server puts the
    #: client's paths back there, as an import on the client's machine would have stored.
    stored_paths: tuple[tuple[str, str], ...] = ()


OPS: dict[str, Op] = {
    # queries of one user's jobs
    "jobs": Op("user"),
    "job": Op("user"),
    "report": Op("user", outputs=("html",)),
    "interference": Op("user"),
    "reason": Op("user", inputs=("site_config",)),
    "compare": Op("user"),
    "findings": Op("user"),
    # every job or component
    "series": Op("read"),
    "anomalies": Op("read"),
    "load": Op("read"),
    "sysview durations": Op("read"),
    "sysview corehours": Op("read"),
    "sysview modes": Op("read"),
    "sysview mds-clients": Op("read"),
    "sysview osts": Op("read"),
    "advise": Op("read"),
    "expect": Op("read", outputs=("plot",)),
    "user list": Op("admin"),
    # imports
    "import trace": Op("user", inputs=("paths",)),  # users: their own traces (`iolens trace`)
    "import sacct": Op("ingest", inputs=("file",)),
    "import lustre": Op("ingest", inputs=("directory",)),
    "import darshan": Op(
        "ingest", inputs=("paths", "uid_map"), stored_paths=(("darshan_logs", "path"),)
    ),
    "import io500": Op("ingest", inputs=("paths",), stored_paths=(("io500_runs", "path"),)),
    "site topology": Op("ingest", inputs=("file",)),
    # administration
    "user add": Op("admin"),
    "user token": Op("admin"),
    "user revoke": Op("admin"),
    "user remove": Op("admin"),
    "analyze": Op("admin", inputs=("site_config",)),
    "alerts check": Op("admin", inputs=("config",)),
}

#: Options the client never sends: the server uses its own store, and the command is
#: already on its way to a server.
LOCAL_ONLY = frozenset({"db", "server", "token"})
