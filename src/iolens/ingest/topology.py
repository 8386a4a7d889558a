"""The site topology file (`iolens site topology FILE.toml`): what no collector can see.

A site writes down once what its monitoring cannot observe: which compute nodes each I/O
forwarding node or LNet router serves (Beacon's static mapping), which targets each
Lustre server holds, how fast each component can go (peak bandwidth and request rate,
given or taken from an imported IO500 run), its login and service nodes, and the other
names of its hosts (Lustre NIDs, addresses) so that a server file naming a client by NID
names the host. `docs/topology.md` has the format with a full example.

The file becomes rows of `components`, `forwarding` and `component_aliases`, loaded with
`ingest.load` like any batch. Those tables merge by key (`MERGED_BY_KEY`): what the file
describes replaces what was stored for the same ids, and nothing else is touched; a peak
the file leaves out keeps the one known before. Mistakes stop the load with an
`InputError` naming the file, the key and the problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

from iolens.errors import InputError
from iolens.ingest.load import load
from iolens.model.batch import Batch
from iolens.model.schema import COMPONENT_ALIASES, COMPONENTS, FORWARDING
from iolens.parse.slurm import expand_hostlist
from iolens.store.base import Store
from iolens.tomlconfig import load_toml

__all__ = [
    "SiteTopology",
    "TopologyPlan",
    "load_topology",
    "parse_rate",
    "plan",
    "read_topology",
    "sample",
    "stored",
]

Rate = float | str
Hostlists = str | list[str]
Targets = str | list[int] | list[str]

# -- the file -------------------------------------------------------------------------------


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Forwarder(Strict):
    name: str = Field(description="Host name of the I/O forwarding node or LNet router")
    nodes: Hostlists = Field(
        description="Compute nodes it serves (Slurm hostlist, e.g. c[001-512], or a list)"
    )
    peak_bw: Rate | None = Field(
        None, description="Benchmarked peak bandwidth: bytes/s, or '2.5 GB/s', '2.3 GiB/s'"
    )
    peak_ops: Rate | None = Field(None, description="Benchmarked peak requests/s: 40000, '40k'")
    aliases: list[str] = Field(
        default_factory=list, description="Other names of this host: NIDs, IP addresses"
    )


class Server(Strict):
    name: str = Field(description="Host name of the Lustre server (OSS or MDS)")
    targets: Targets = Field(
        description="Its targets: indices (a list, or '0-3,8', '0x10-0x13') named "
        "<fsname>-OST%04x / -MDT%04x, or the names themselves"
    )
    fsname: str | None = Field(
        None, description="File system of the targets given by index [default: [lustre] fsname]"
    )
    peak_bw: Rate | None = Field(
        None, description="The server's peak bandwidth [default: the sum of its targets']"
    )
    peak_ops: Rate | None = Field(
        None, description="The server's peak requests/s [default: the sum of its targets']"
    )
    target_peak_bw: Rate | None = Field(
        None, description="Each target's peak bandwidth [default: the server's, shared equally]"
    )
    target_peak_ops: Rate | None = Field(
        None, description="Each target's peak requests/s [default: the server's, shared equally]"
    )
    aliases: list[str] = Field(
        default_factory=list, description="Other names of this host: NIDs, IP addresses"
    )


class Nodes(Strict):
    nodes: Hostlists = Field(description="Slurm hostlist(s) of these nodes")


class Aliases(Strict):
    hosts: Hostlists = Field(description="Hosts, as a hostlist: c[001-512]")
    aliases: Hostlists = Field(
        description="Their other names, one per host in the same order: 10.1.0.[1-512]@o2ib"
    )


class Switch(Strict):
    name: str = Field(description="Leaf switch name (as the fabric knows it, e.g. ibnetdiscover)")
    nodes: Hostlists = Field(description="Slurm hostlist(s) of the hosts cabled to it")


class Lustre(Strict):
    fsname: str | None = Field(
        None, description="The Lustre file system name, for targets given by index"
    )


class Io500Peaks(Strict):
    system: str = Field(description="The `system` of an imported IO500 run (iolens import io500)")
    run: str = Field(
        "latest", description="Its run id, or 'latest': the newest valid run of the system"
    )


class SiteTopology(Strict):
    """Everything a site file may say; every table is optional."""

    lustre: Lustre = Field(default_factory=Lustre, description="Lustre naming defaults")
    forwarders: list[Forwarder] = Field(
        default_factory=list,
        description="I/O forwarding nodes or LNet routers and the compute nodes behind them",
    )
    oss: list[Server] = Field(default_factory=list, description="Object storage servers")
    mds: list[Server] = Field(default_factory=list, description="Metadata servers")
    compute: Nodes | None = Field(
        None,
        description="Compute nodes, also those not behind a forwarder (they mount Lustre "
        "directly: no forwarding layer to report)",
    )
    login: Nodes | None = Field(None, description="Login nodes")
    service: Nodes | None = Field(None, description="Other service nodes (data movers...)")
    aliases: list[Aliases] = Field(default_factory=list, description="Other names of many hosts")
    switches: list[Switch] = Field(
        default_factory=list,
        description="Leaf switches and the hosts behind them (the switch view of `iolens "
        "load` sums their hosts' InfiniBand port counters)",
    )
    io500: Io500Peaks | None = Field(
        None,
        description="Peaks of targets the file gives none for, from an imported IO500 run: "
        "ior-easy bandwidth shared over the OSTs, mdtest-easy rates over the MDTs",
    )

    @field_validator("forwarders", "oss", "mds")
    @classmethod
    def _unique_names(cls, v: list[Any]) -> list[Any]:
        names = [x.name for x in v]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"described twice: {', '.join(dup)}")
        return v


# -- values ----------------------------------------------------------------------------------

_RATE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]*)\s*$")
_BW_UNITS = {
    "": 1.0, "b/s": 1.0, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "tb/s": 1e12,
    "kib/s": 2.0**10, "mib/s": 2.0**20, "gib/s": 2.0**30, "tib/s": 2.0**40,
}  # fmt: skip
_OPS_UNITS = {"": 1.0, "/s": 1.0, "k": 1e3, "k/s": 1e3, "kiops": 1e3, "iops": 1.0, "m": 1e6}


def parse_rate(value: Rate | None, what: str = "bw") -> float | None:
    """A peak as bytes/s (`what="bw"`: 2.5e9, '2.5 GB/s', '2.3 GiB/s') or requests/s
    (`what="ops"`: 40000, '40k', '40 kIOPS'); ValueError names what is wrong."""
    if value is None:
        return None
    if isinstance(value, int | float):
        number, unit = float(value), ""
    else:
        m = _RATE.match(value)
        if not m:
            raise ValueError(f"not a rate: {value!r}")
        number, unit = float(m[1]), m[2].lower()
    units = _BW_UNITS if what == "bw" else _OPS_UNITS
    if unit not in units:
        known = "GB/s, GiB/s, MB/s ..." if what == "bw" else "k, kIOPS, /s"
        raise ValueError(f"unknown unit {unit!r} in {value!r} (use {known})")
    if number <= 0:
        raise ValueError(f"a peak must be positive: {value!r}")
    return number * units[unit]


def _hosts(value: Hostlists) -> list[str]:
    exprs = [value] if isinstance(value, str) else value
    out: list[str] = []
    for e in exprs:
        out += expand_hostlist(e)
    return out


def _indices(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        lo, sep, hi = part.strip().partition("-")
        a = int(lo, 0)
        b = int(hi, 0) if sep else a
        if b < a:
            raise ValueError(f"empty range {part.strip()!r}")
        out += range(a, b + 1)
    return out


def _targets(server: Server, kind: str, fsname: str | None) -> list[str]:
    """Target names of a server: `<fs>-OST%04x` for indices (Lustre's spelling)."""
    spec = server.targets
    if isinstance(spec, list) and all(isinstance(t, str) for t in spec):
        return list(spec)  # type: ignore[arg-type]
    fs = server.fsname or fsname
    if not fs:
        raise ValueError("targets given by index need an fsname: here, or in the lustre table")
    idx = _indices(spec) if isinstance(spec, str) else list(spec)  # type: ignore[arg-type]
    label = "OST" if kind == "ost" else "MDT"
    return [f"{fs}-{label}{int(i):04x}" for i in idx]


# -- the plan: rows to load ------------------------------------------------------------------


@dataclass
class TopologyPlan:
    """What a topology file becomes, before it is loaded."""

    components: list[dict[str, Any]] = field(default_factory=list)
    forwarding: list[dict[str, str]] = field(default_factory=list)
    aliases: list[dict[str, str]] = field(default_factory=list)
    #: where each peak came from: the file, or the IO500 run (`system/run_id`)
    peaks_from: dict[str, str] = field(default_factory=dict)

    def batch(self, source: str) -> Batch:
        return Batch(
            source=source,
            components=pa.Table.from_pylist(self.components, schema=COMPONENTS),
            forwarding=pa.Table.from_pylist(self.forwarding, schema=FORWARDING),
            component_aliases=pa.Table.from_pylist(self.aliases, schema=COMPONENT_ALIASES),
        )

    def summary(self) -> dict[str, Any]:
        kinds: dict[str, int] = {}
        for c in self.components:
            kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
        no_peak = [
            c["component_id"]
            for c in self.components
            if c["kind"] in ("forwarder", "oss", "ost", "mds", "mdt")
            and c["peak_bw"] is None
            and c["peak_ops"] is None
        ]
        return {
            "components": dict(sorted(kinds.items())),
            "forwarding": len(self.forwarding),
            "aliases": len(self.aliases),
            "peaks_from": dict(sorted(self.peaks_from.items())),
            "without_peak": no_peak,
        }


class _Builder:
    """Rows of one file, with the checks that need the whole file (a host named twice
    with different kinds, a node behind two forwarders)."""

    def __init__(self, src: str) -> None:
        self.src = src
        self.plan = TopologyPlan()
        self.kinds: dict[str, tuple[str, str]] = {}  # id -> (kind, key that said so)
        self.fwd_of: dict[str, tuple[str, str]] = {}

    def fail(self, key: str, problem: str) -> InputError:
        return InputError(self.src, f"{key}: {problem}")

    def component(
        self,
        key: str,
        cid: str,
        kind: str,
        parent: str | None = None,
        bw: float | None = None,
        ops: float | None = None,
    ) -> None:
        seen = self.kinds.get(cid)
        if seen and seen[0] != kind:
            raise self.fail(key, f"{cid} is already a {seen[0]} ({seen[1]})")
        if seen:
            return
        self.kinds[cid] = (kind, key)
        self.plan.components.append(
            {"component_id": cid, "kind": kind, "parent": parent, "peak_bw": bw, "peak_ops": ops}
        )
        if bw is not None or ops is not None:
            self.plan.peaks_from[cid] = "file"

    def alias(self, key: str, alias: str, host: str) -> None:
        for a in self.plan.aliases:
            if a["alias"] == alias and a["component_id"] != host:
                raise self.fail(key, f"alias {alias} names both {a['component_id']} and {host}")
        self.plan.aliases.append({"alias": alias, "component_id": host})


def _rate(b: _Builder, key: str, value: Rate | None, what: str) -> float | None:
    try:
        return parse_rate(value, what)
    except ValueError as exc:
        raise b.fail(key, str(exc)) from None


def _hostlist(b: _Builder, key: str, value: Hostlists) -> list[str]:
    try:
        hosts = _hosts(value)
    except ValueError as exc:
        raise b.fail(key, str(exc)) from None
    if not hosts:
        raise b.fail(key, "names no host")
    return hosts


def plan(topo: SiteTopology, src: str, store: Store | None = None) -> TopologyPlan:
    """The rows `topo` describes; `store` is read for the `[io500]` peaks (without a store
    the file is only checked: those peaks stay unresolved)."""
    b = _Builder(src)
    for i, f in enumerate(topo.forwarders):
        key = f"forwarders[{i}] ({f.name})"
        b.component(
            key, f.name, "forwarder", None,
            _rate(b, f"{key}.peak_bw", f.peak_bw, "bw"),
            _rate(b, f"{key}.peak_ops", f.peak_ops, "ops"),
        )  # fmt: skip
        for a in f.aliases:
            b.alias(f"{key}.aliases", a, f.name)
        for node in _hostlist(b, f"{key}.nodes", f.nodes):
            if node in b.fwd_of and b.fwd_of[node][0] != f.name:
                other = b.fwd_of[node]
                raise b.fail(f"{key}.nodes", f"{node} is already behind {other[0]} ({other[1]})")
            if node not in b.fwd_of:
                b.fwd_of[node] = (f.name, key)
                b.plan.forwarding.append({"compute_node": node, "forwarder": f.name})
            b.component(f"{key}.nodes", node, "compute")
    for section, server_kind, target_kind in (("oss", "oss", "ost"), ("mds", "mds", "mdt")):
        for i, s in enumerate(getattr(topo, section)):
            _server(b, f"{section}[{i}] ({s.name})", s, server_kind, target_kind, topo.lustre)
    for section, kind in (("compute", "compute"), ("login", "login"), ("service", "service")):
        nodes = getattr(topo, section)
        if nodes is not None:
            for host in _hostlist(b, f"{section}.nodes", nodes.nodes):
                b.component(f"{section}.nodes", host, kind)
    parents = {}
    for i, sw in enumerate(topo.switches):
        key = f"switches[{i}] ({sw.name})"
        b.component(key, sw.name, "switch")
        for host in _hostlist(b, f"{key}.nodes", sw.nodes):
            if host in parents and parents[host] != sw.name:
                raise b.fail(f"{key}.nodes", f"{host} is already behind switch {parents[host]}")
            parents[host] = sw.name
    for row in b.plan.components:
        if row["component_id"] in parents and row["parent"] is None:
            row["parent"] = parents.pop(row["component_id"])
    for host, sw in parents.items():  # hosts named only under their switch
        b.component("switches", host, "compute", sw)
    for i, a in enumerate(topo.aliases):
        key = f"aliases[{i}]"
        hosts = _hostlist(b, f"{key}.hosts", a.hosts)
        names = _hostlist(b, f"{key}.aliases", a.aliases)
        if len(hosts) != len(names):
            raise b.fail(key, f"{len(hosts)} hosts but {len(names)} aliases: one each, in order")
        for host, name in zip(hosts, names, strict=True):
            b.alias(key, name, host)
    if topo.io500 is not None and store is not None:
        _io500_peaks(b, topo.io500, store)
    return b.plan


def _server(
    b: _Builder, key: str, s: Server, server_kind: str, target_kind: str, lustre: Lustre
) -> None:
    try:
        targets = _targets(s, target_kind, lustre.fsname)
    except ValueError as exc:
        raise b.fail(f"{key}.targets", str(exc)) from None
    if not targets:
        raise b.fail(f"{key}.targets", "no targets")
    peaks = {
        k: _rate(b, f"{key}.{k}", getattr(s, k), "ops" if k.endswith("ops") else "bw")
        for k in ("peak_bw", "peak_ops", "target_peak_bw", "target_peak_ops")
    }
    n = len(targets)
    for what in ("bw", "ops"):
        whole, each = peaks[f"peak_{what}"], peaks[f"target_peak_{what}"]
        if each is None and whole is not None:
            peaks[f"target_peak_{what}"] = whole / n
        elif whole is None and each is not None:
            peaks[f"peak_{what}"] = each * n
    b.component(key, s.name, server_kind, None, peaks["peak_bw"], peaks["peak_ops"])
    for t in targets:
        b.component(
            f"{key}.targets",
            t,
            target_kind,
            s.name,
            peaks["target_peak_bw"],
            peaks["target_peak_ops"],
        )
    for a in s.aliases:
        b.alias(f"{key}.aliases", a, s.name)


#: IO500 phases whose rates stand for a component kind's best case: large sequential
#: transfers, one file per process (ior-easy) and metadata in private directories
#: (mdtest-easy), stonewalled; their best rate, shared equally over the targets.
IO500_BW_PHASES = ("ior-easy-write", "ior-easy-read")
IO500_MD_PHASES = ("mdtest-easy-write", "mdtest-easy-stat", "mdtest-easy-delete")


def _io500_peaks(b: _Builder, spec: Io500Peaks, store: Store) -> None:
    key = "io500"
    runs = store.query(
        "SELECT run_id FROM io500_runs WHERE system = ? AND (? = 'latest' AND valid OR run_id = ?) "
        'ORDER BY "timestamp" DESC NULLS LAST, run_id DESC LIMIT 1',
        [spec.system, spec.run, spec.run],
    ).to_pylist()
    if not runs:
        which = "no valid run" if spec.run == "latest" else f"no run {spec.run!r}"
        raise b.fail(f"{key}.system", f"{which} of system {spec.system!r} (iolens import io500)")
    run_id = runs[0]["run_id"]
    phases = {
        r["phase"]: r
        for r in store.query(
            "SELECT phase, value, unit FROM io500_phases WHERE system = ? AND run_id = ? "
            "AND value > 0",
            [spec.system, run_id],
        ).to_pylist()
    }
    bw = max((phases[p]["value"] for p in IO500_BW_PHASES if p in phases), default=None)
    md = max((phases[p]["value"] for p in IO500_MD_PHASES if p in phases), default=None)
    label = f"io500:{spec.system}/{run_id}"
    for target_kind, server_kind, col, total in (
        ("ost", "oss", "peak_bw", None if bw is None else bw * 2.0**30),
        ("mdt", "mds", "peak_ops", None if md is None else md * 1e3),
    ):
        if total is None:
            continue
        targets = [c for c in b.plan.components if c["kind"] == target_kind]
        if not targets:
            known = store.query(
                "SELECT component_id, parent FROM components WHERE kind = ?", [target_kind]
            ).to_pylist()
            for r in known:
                b.component(key, r["component_id"], target_kind, r["parent"])
            targets = [c for c in b.plan.components if c["kind"] == target_kind]
        if not targets:
            raise b.fail(key, f"no {target_kind.upper()}s to share the run's rate over: list them")
        share = total / len(targets)
        per_server: dict[str, float] = {}
        for t in targets:
            if t[col] is None:
                t[col] = share
                b.plan.peaks_from[t["component_id"]] = label
            if t["parent"]:
                per_server[t["parent"]] = per_server.get(t["parent"], 0.0) + t[col]
        for c in b.plan.components:
            if c["kind"] == server_kind and c[col] is None and c["component_id"] in per_server:
                c[col] = per_server[c["component_id"]]
                b.plan.peaks_from[c["component_id"]] = label


def read_topology(path: Path) -> SiteTopology:
    """A topology file, checked (InputError naming file and key): everything but the
    `[io500]` peaks, which need the store, so a bad file is refused before one is opened."""
    topo = load_toml(path, SiteTopology, "topology file")
    plan(topo, str(path))
    return topo


def load_topology(store: Store, path: Path, topo: SiteTopology | None = None) -> dict[str, Any]:
    """Check and load a site topology file (`topo`: already read from `path`); what was
    loaded (`TopologyPlan.summary`)."""
    topo = topo or read_topology(path)
    p = plan(topo, str(path), store)
    if not (p.components or p.forwarding or p.aliases):
        raise InputError(str(path), "describes nothing (see `iolens site topology --sample`)")
    load(store, p.batch(f"topology:{path}"))
    return {"file": str(path), **p.summary()}


def stored(store: Store) -> dict[str, Any]:
    """The topology as stored: components per kind with their peaks, the forwarding map
    (compute nodes per forwarder), servers and their targets, aliases (`--show`)."""
    comps = store.query(
        "SELECT component_id, kind, parent, peak_bw, peak_ops FROM components "
        "ORDER BY kind, component_id"
    ).to_pylist()
    behind = {
        r["forwarder"]: r["n"]
        for r in store.query(
            "SELECT forwarder, count(*) AS n FROM forwarding GROUP BY forwarder"
        ).to_pylist()
    }
    aliases = store.query("SELECT count(*) AS n FROM component_aliases").to_pylist()[0]["n"]
    kinds: dict[str, int] = {}
    for c in comps:
        kinds[c["kind"]] = kinds.get(c["kind"], 0) + 1
    servers = [
        {
            **{k: c[k] for k in ("component_id", "kind", "peak_bw", "peak_ops")},
            "targets": sorted(t["component_id"] for t in comps if t["parent"] == c["component_id"]),
        }
        for c in comps
        if c["kind"] in ("oss", "mds")
    ]
    forwarders = [
        {
            **{k: c[k] for k in ("component_id", "peak_bw", "peak_ops")},
            "nodes": behind.get(c["component_id"], 0),
        }
        for c in comps
        if c["kind"] == "forwarder"
    ]
    for name, n in behind.items():
        if name not in {f["component_id"] for f in forwarders}:
            forwarders.append({"component_id": name, "peak_bw": None, "peak_ops": None, "nodes": n})
    return {
        "components": dict(sorted(kinds.items())),
        "forwarders": forwarders,
        "servers": servers,
        "forwarding": sum(behind.values()),
        "aliases": aliases,
    }


def sample() -> str:
    """A commented sample file: every table and field, with what it means."""
    return SAMPLE


SAMPLE = """\
# iolens site topology (iolens site topology FILE): what no collector can see.
# Every table is optional; load the file again after a change: what it describes replaces
# what was stored for the same names, and nothing else is touched.

[lustre]
# The Lustre file system name, for targets given by index (lustrefs -> lustrefs-OST0004)
fsname = "lustrefs"

# I/O forwarding nodes or LNet routers, and the compute nodes behind each (Beacon's
# static mapping). Compute nodes listed here need not be listed again under [compute].
[[forwarders]]
# Host name of the I/O forwarding node or LNet router
name = "fwd01"
# Compute nodes it serves (Slurm hostlist, e.g. c[001-512], or a list)
nodes = "c[001-512]"
# Benchmarked peak bandwidth: bytes/s, or '2.5 GB/s', '2.3 GiB/s'
peak_bw = "2.5 GB/s"
# Benchmarked peak requests/s: 40000, '40k'
peak_ops = "40k"
# Other names of this host: NIDs, IP addresses
aliases = ["10.0.0.1@o2ib", "192.168.0.1"]

[[forwarders]]
name = "fwd02"
nodes = "c[513-1024]"
peak_bw = "2.5 GB/s"

# Object storage servers and their OSTs.
[[oss]]
# Host name of the Lustre server (OSS or MDS)
name = "oss01"
# Its targets: indices (a list, or '0-3,8', '0x10-0x13') named <fsname>-OST%04x / -MDT%04x,
# or the names themselves
targets = "0-5"
# File system of the targets given by index [default: [lustre] fsname]
# fsname = "lustrefs"
# The server's peak bandwidth [default: the sum of its targets']
# peak_bw = "10.8 GB/s"
# The server's peak requests/s [default: the sum of its targets']
# peak_ops = "60k"
# Each target's peak bandwidth [default: the server's, shared equally]
target_peak_bw = "1.8 GB/s"
# Each target's peak requests/s [default: the server's, shared equally]
# target_peak_ops = "10k"
# Other names of this host: NIDs, IP addresses
aliases = ["10.0.1.1@o2ib"]

[[oss]]
name = "oss02"
targets = ["lustrefs-OST0006", "lustrefs-OST0007"]

# Metadata servers and their MDTs (the same fields as [[oss]]).
[[mds]]
name = "mds01"
targets = [0]
peak_ops = "50k"
aliases = ["10.0.1.100@o2ib"]

# Compute nodes, also those not behind a forwarder (they mount Lustre directly: no
# forwarding layer to report).
[compute]
# Slurm hostlist(s) of these nodes
nodes = ["c[001-1024]", "gpu[01-16]"]

# Login nodes
[login]
nodes = "login[1-2]"

# Other service nodes (data movers...)
[service]
nodes = "dtn[1-2]"

# Other names of many hosts, one per host in the same order.
[[aliases]]
# Hosts, as a hostlist: c[001-512]
hosts = "c[001-250]"
# Their other names, one per host in the same order: 10.1.0.[1-512]@o2ib
aliases = "10.1.0.[1-250]@o2ib"

# Peaks of targets the file gives none for, from an imported IO500 run (iolens import
# io500): ior-easy bandwidth shared over the OSTs, mdtest-easy rates over the MDTs.
# [io500]
# The `system` of an imported IO500 run (iolens import io500)
# system = "lab"
# Its run id, or 'latest': the newest valid run of the system
# run = "latest"
"""
