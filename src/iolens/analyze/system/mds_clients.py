"""MDS load split by the client system that sent it (Beacon Figure 10(b)).

Beacon found over 80 % of TaihuLight's metadata operations coming not from the compute
nodes (through the forwarders) but from the login nodes and another system sharing the
MDS. The counts here are the MDTs' per-client export counters (`exports/<nid>/stats`,
kind `mdt_client`, component `<mdt>:<nid>`, `collect/sources/lustre_mds.py`).

How a client's role is decided, from what the store knows and nothing else:

1. its NID names a host through the site topology's aliases (`component_aliases`, the
   full NID first, then the address without `@net`), or the NID is itself a component id;
2. the host's `components.kind` gives the role: `compute` and `forwarder` -> "compute"
   (jobs' traffic, direct or forwarded), `login` -> "login", any other kind (service,
   oss, mds, ...) -> "other"; a host listed as a compute node in `forwarding` counts as
   compute even without a component row;
3. a NID no alias names, or a host of no known kind, is "unknown": shown as such, never
   guessed from an address range.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from iolens.analyze.jobids import nid_hosts
from iolens.analyze.system._common import window_sql
from iolens.errors import StoreError
from iolens.store.base import Store

ROLES = ("compute", "login", "other", "unknown")
ROLE_OF_KIND = {"compute": "compute", "forwarder": "compute", "login": "login"}


@dataclass
class ClientRow:
    nid: str
    host: str | None
    kind: str | None  # components.kind of the host
    role: str
    ops: int


@dataclass
class MdsClients:
    roles: dict[str, int]  # role -> metadata ops, every role of ROLES
    shares: dict[str, float | None]
    total_ops: int
    clients: int
    top: dict[str, list[ClientRow]]  # role -> its busiest clients
    rule: str  # how a role was decided, for the page and the CLI


RULE = (
    "role from the host the NID names (component_aliases) and its component kind: "
    "compute/forwarder -> compute, login -> login, other kinds -> other; "
    "a NID no alias names is unknown"
)


def role_of(kind: str | None, is_compute: bool = False) -> str:
    """The client system a host of this component kind belongs to."""
    if kind is None:
        return "compute" if is_compute else "unknown"
    return ROLE_OF_KIND.get(kind, "other")


def mds_clients(
    store: Store, start: datetime | None = None, end: datetime | None = None, top: int = 5
) -> MdsClients:
    """Metadata ops per client role over (start, end], with each role's busiest clients."""
    where, params = window_sql(start, end)
    rows = store.query(
        f"""
        SELECT substr(component_id, strpos(component_id, ':') + 1) AS nid,
               sum(md_ops)::BIGINT AS ops
        FROM server_samples WHERE kind = 'mdt_client' AND job_id IS NULL
          AND md_ops IS NOT NULL {where}
        GROUP BY 1 HAVING sum(md_ops) > 0
        """,
        params,
    ).to_pylist()
    hosts = nid_hosts(store) if rows else {}
    kinds = {
        r["component_id"]: r["kind"]
        for r in store.query("SELECT component_id, kind FROM components").to_pylist()
    }
    try:
        computes = set(
            store.query("SELECT compute_node FROM forwarding").column("compute_node").to_pylist()
        )
    except StoreError:
        computes = set()
    per_role = dict.fromkeys(ROLES, 0)
    listed: dict[str, list[ClientRow]] = {r: [] for r in ROLES}
    for r in rows:
        nid = r["nid"]
        host = hosts.get(nid) or hosts.get(nid.split("@")[0]) or (nid if nid in kinds else None)
        kind = kinds.get(host) if host else None
        role = role_of(kind, host in computes) if host else "unknown"
        per_role[role] += int(r["ops"])
        listed[role].append(ClientRow(nid, host, kind, role, int(r["ops"])))
    total = sum(per_role.values())
    return MdsClients(
        roles=per_role,
        shares={k: (v / total if total else None) for k, v in per_role.items()},
        total_ops=total,
        clients=len(rows),
        top={k: sorted(v, key=lambda c: (-c.ops, c.nid))[:top] for k, v in listed.items()},
        rule=RULE,
    )
