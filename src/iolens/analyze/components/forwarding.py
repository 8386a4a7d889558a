"""The forwarding layer as real collectors show it: which forwarders there are, what each
one's collectors report, and which jobs sit behind one in a time span.

Shared by `slow_forwarder` and `cache_thrashing`. A forwarding node is known from the
topology (`components` of kind `forwarder`), from its own samples (kind `forwarder`: the
`iofwd` daemon statistics, `lustre_client` or `lnet_router` on a node with role
`forwarder`) or from the compute -> forwarder map (`forwarding`, the site topology).

Jobs behind a forwarder are never read from per-job forwarder rows (no real forwarder
knows jobs). They come from:

1. the daemon's per-client counters (`iofwd` `clients/<client>/stats`, kind `fwd_client`,
   component `<forwarder>:<client>`), each client's requests going to the jobs the
   scheduler ran on that node (`jobs.nodes`) at the time, split by how long each ran in
   the span when several share the node; or
2. the tracer's records (`client_io`) of the compute nodes the `forwarding` table puts
   behind the forwarder.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pyarrow as pa

from iolens.analyze.components.base import Context
from iolens.model.schema import DATA_OPS

#: Kind of the per-client rows of the `iofwd` source.
CLIENT_KIND = "fwd_client"
#: LNet router metrics (`lnet_router` source): a forwarder reporting these is a router.
LNET_METRICS = frozenset({"route_bytes", "route_msgs", "msgs_alloc"})
_DATA_OPS = ", ".join(f"'{op}'" for op in DATA_OPS)


def forwarders(ctx: Context) -> list[str]:
    """Every forwarding node the store knows of: topology, samples or the forwarding map."""
    return sorted(set(ctx.grid("forwarder").ids) | set(nodes_behind(ctx)))


def nodes_behind(ctx: Context) -> dict[str, list[str]]:
    """Compute nodes behind each forwarder (`forwarding` table), cached per run."""

    def load() -> dict[str, list[str]]:
        rows = ctx.store.query(
            "SELECT forwarder, list(compute_node ORDER BY compute_node) AS nodes "
            "FROM forwarding GROUP BY forwarder"
        ).to_pylist()
        return {r["forwarder"]: r["nodes"] for r in rows}

    return ctx.memo("forwarding:nodes", load)


def reported_metrics(ctx: Context) -> dict[str, set[str]]:
    """Metric names each forwarder's collectors reported over the loaded range (`metrics`)."""

    def load() -> dict[str, set[str]]:
        rows = ctx.store.query(
            "SELECT DISTINCT component_id, metric FROM metrics "
            "WHERE kind = 'forwarder' AND ts > ? AND ts <= ?",
            ctx.bounds(),
        ).to_pylist()
        out: dict[str, set[str]] = {}
        for r in rows:
            out.setdefault(r["component_id"], set()).add(r["metric"])
        return out

    return ctx.memo("forwarding:metrics", load)


def jobs_behind(
    ctx: Context, fwd: str, start: datetime, end: datetime, most: int = 5
) -> dict[str, Any]:
    """Who used `fwd` in [start, end): `jobs` (job_id, bytes, requests, share, clients),
    `jobs_basis` (which real data said so), `clients` (per-client service, busiest first)
    and `other_clients` (clients no job ran on: login or service nodes). Ties go by name,
    so a dataset read by many workers gives what one file gives."""
    clients = _client_counters(ctx, fwd, start, end)
    if clients:
        jobs, other = _jobs_of_clients(ctx, clients, start, end)
        return {
            "jobs": _ranked(jobs, most),
            "jobs_basis": "the forwarder's per-client counters and the scheduler's node lists",
            "clients": clients[:most],  # busiest first, then by name (stable across stores)
            "other_clients": sorted(other, key=lambda c: -c["requests"])[:most],
        }
    if nodes_behind(ctx).get(fwd):
        return {
            "jobs": _ranked(_traced_jobs(ctx, fwd, start, end), most),
            "jobs_basis": "tracer records of the compute nodes behind it (forwarding map)",
        }
    return {
        "jobs": [],
        "jobs_basis": "none: no per-client counters from this forwarder and no forwarding map",
    }


def _client_counters(ctx: Context, fwd: str, start: datetime, end: datetime) -> list[dict]:
    reqs = "coalesce(read_ops, 0) + coalesce(write_ops, 0)"
    return ctx.store.query(
        f"""
        SELECT substr(component_id, {len(fwd) + 2}) AS client,
          sum(coalesce(read_bytes, 0) + coalesce(write_bytes, 0))::DOUBLE AS bytes,
          sum({reqs} + coalesce(md_ops, 0))::DOUBLE AS requests,
          round(sum(service_us * ({reqs}))
            / nullif(sum({reqs}) FILTER (service_us IS NOT NULL), 0), 1) AS service_us
        FROM server_samples
        WHERE kind = '{CLIENT_KIND}' AND job_id IS NULL AND starts_with(component_id, ?)
          AND ts > ? AND ts <= ?
        GROUP BY ALL HAVING sum({reqs} + coalesce(md_ops, 0)) > 0
        ORDER BY requests DESC, client
        """,
        [f"{fwd}:", start, end],
    ).to_pylist()


def _jobs_of_clients(
    ctx: Context, clients: list[dict], start: datetime, end: datetime
) -> tuple[dict[str, dict[str, Any]], list[dict]]:
    """Each client's traffic to the jobs on its node in the span, by overlap time."""
    ctx.store.register("_iolens_fwd_clients", pa.table({"node": [c["client"] for c in clients]}))
    try:
        rows = ctx.store.query(
            """
            SELECT j.job_id, n.node,
              epoch(least(coalesce(j."end", ?::TIMESTAMP), ?::TIMESTAMP))
                - epoch(greatest(j.start, ?::TIMESTAMP)) AS seconds
            FROM jobs j, _iolens_fwd_clients n
            WHERE list_contains(j.nodes, n.node) AND j.start < ?
              AND (j."end" IS NULL OR j."end" > ?)
            """,
            [end, end, start, end, start],
        ).to_pylist()
    finally:
        ctx.store.unregister("_iolens_fwd_clients")
    on_node: dict[str, list[tuple[str, float]]] = {}
    for r in rows:
        on_node.setdefault(r["node"], []).append((r["job_id"], max(float(r["seconds"]), 1e-6)))
    jobs: dict[str, dict[str, Any]] = {}
    other = []
    for c in clients:
        here = on_node.get(c["client"])
        if not here:
            other.append(
                {"client": c["client"], "bytes": int(c["bytes"]), "requests": int(c["requests"])}
            )
            continue
        total = sum(s for _, s in here)
        for job, seconds in here:
            j = jobs.setdefault(job, {"bytes": 0.0, "requests": 0.0, "clients": 0})
            j["bytes"] += c["bytes"] * seconds / total
            j["requests"] += c["requests"] * seconds / total
            j["clients"] += 1
    return jobs, other


def _traced_jobs(
    ctx: Context, fwd: str, start: datetime, end: datetime
) -> dict[str, dict[str, Any]]:
    """Bytes and calls of the traced processes on the nodes behind `fwd`, each record
    counted for the part of its span inside [start, end)."""
    rows = ctx.store.query(
        f"""
        WITH r AS (
          SELECT c.job_id, c.node, c.op, c.size, c.count,
            epoch_us(c.t_start) AS u0, epoch_us(c.t_end) AS u1
          FROM client_io c JOIN forwarding w ON w.compute_node = c.node
          WHERE w.forwarder = ? AND c.t_end >= ? AND c.t_start < ?)
        SELECT job_id, count(DISTINCT node) AS clients,
          sum(CASE WHEN op IN ({_DATA_OPS}) THEN size * count ELSE 0 END * f)::DOUBLE AS bytes,
          sum(count * f)::DOUBLE AS requests
        FROM (SELECT *, CASE WHEN u1 <= u0 THEN 1.0 ELSE
                greatest(0, least(u1, e) - greatest(u0, s)) / (u1 - u0) END AS f
              FROM r, (SELECT epoch_us(?::TIMESTAMP) AS e, epoch_us(?::TIMESTAMP) AS s))
        GROUP BY job_id
        """,
        [fwd, start, end, end, start],
    ).to_pylist()
    return {r.pop("job_id"): r for r in rows}


def _ranked(jobs: dict[str, dict[str, Any]], most: int) -> list[dict[str, Any]]:
    """The busiest jobs first (by requests), with their share of the forwarder's bytes."""
    total = sum(j["bytes"] for j in jobs.values()) or None
    order = sorted(jobs.items(), key=lambda kv: (-kv[1]["requests"], kv[0]))[:most]
    return [
        {
            "job_id": job,
            "bytes": int(j["bytes"]),
            "requests": int(j["requests"]),
            "share": round(j["bytes"] / total, 3) if total else None,
            "clients": int(j["clients"]),
        }
        for job, j in order
        if j["requests"] > 0 or j["bytes"] > 0
    ]
