"""InfiniBand port counters: Linux sysfs (`/sys/class/infiniband/<dev>/ports/<n>/...`),
`perfquery -x` (extended 64-bit PortCounters) and `perfquery -E` (PortRcvErrorDetails) output,
and `ibnetdiscover --ports` link lines (FORMATS.md 3).

Data counters (`port_xmit_data`, `PortXmitData`) count 4-octet words; :data:`DATA_WORD_BYTES`
converts. Legacy 32-bit sysfs counters stick at 2^32-1 instead of wrapping, so
:func:`saturated` flags them rather than turning them into rates.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from iolens.errors import InputError
from iolens.parse._common import DEFAULT_SOURCE, is_digits, parse_int, read_text, shown

__all__ = [
    "DATA_WORD_BYTES",
    "FabricPort",
    "IbLink",
    "PerfqueryPort",
    "SysfsPort",
    "fabric_ports",
    "hca_name",
    "link_rate_gbps",
    "parse_ibnetdiscover",
    "parse_perfquery",
    "parse_perfquery_file",
    "parse_sysfs_port",
    "read_sysfs_tree",
    "saturated",
    "switch_lids",
]

#: `*_data` counters are in 4-byte words.
DATA_WORD_BYTES = 4
_U32_MAX = 2**32 - 1
_NO_VALUE = ("N/A",)  # e.g. "N/A (no PMA)" on ports without a performance-management agent


#: Above any InfiniBand link (XDR 4x is 800 Gb/s): a rate past it is damage, not a port.
MAX_RATE_GBPS = 10_000.0


def saturated(value: int) -> bool:
    """True for a 32-bit counter stuck at its maximum (legacy non-extended counters)."""
    return value == _U32_MAX


@dataclass(frozen=True, slots=True)
class SysfsPort:
    """One port from sysfs. `counters` from `counters/`, `hw_counters` from `hw_counters/`;
    a counter reading `N/A (no PMA)` is left out. `rate` is the raw text (`25 Gb/sec (1X EDR)`),
    `rate_gbps` its number; `state`/`phys_state` keep the name (`ACTIVE`, `LinkUp`)."""

    device: str
    port: int
    counters: Mapping[str, int]
    hw_counters: Mapping[str, int]
    rate: str | None = None
    rate_gbps: float | None = None
    state: str | None = None
    phys_state: str | None = None
    link_layer: str | None = None


def parse_sysfs_port(
    device: str,
    port: int,
    counters: Mapping[str, str],
    hw_counters: Mapping[str, str] | None = None,
    attrs: Mapping[str, str] | None = None,
    source: str = DEFAULT_SOURCE,
) -> SysfsPort:
    """Build a port from file contents (file name -> text), as read by :func:`read_sysfs_tree`
    or a source; `source` should name the port directory for errors."""
    attrs = attrs or {}
    rate = attrs.get("rate", "").strip() or None
    rate_gbps = None
    if rate is not None:
        m = re.match(r"^(\d+(?:\.\d+)?)\s+Gb/sec", rate)
        if not m:
            raise InputError(f"{source}/rate", f"unrecognised rate {shown(rate)}", 1)
        rate_gbps = float(m[1])
        if rate_gbps > MAX_RATE_GBPS:  # also inf, from hundreds of digits
            raise InputError(f"{source}/rate", f"implausible link rate {shown(rate)}", 1)
    return SysfsPort(
        device=device,
        port=port,
        counters=_counter_files(counters, f"{source}/counters"),
        hw_counters=_counter_files(hw_counters or {}, f"{source}/hw_counters"),
        rate=rate,
        rate_gbps=rate_gbps,
        state=_state(attrs.get("state"), f"{source}/state"),
        phys_state=_state(attrs.get("phys_state"), f"{source}/phys_state"),
        link_layer=(attrs.get("link_layer") or "").strip() or None,
    )


def read_sysfs_tree(root: str | Path) -> list[SysfsPort]:
    """All ports under `<root>/sys/class/infiniband` (thin I/O wrapper; [] when absent)."""
    base = Path(root) / "sys" / "class" / "infiniband"
    ports: list[SysfsPort] = []
    if not base.is_dir():
        return ports
    for dev in sorted(p for p in base.iterdir() if p.is_dir()):
        pdir = dev / "ports"
        if not pdir.is_dir():
            continue
        for port in sorted(
            (p for p in pdir.iterdir() if is_digits(p.name)), key=lambda p: int(p.name)
        ):
            ports.append(
                parse_sysfs_port(
                    dev.name,
                    int(port.name),
                    _read_dir(port / "counters"),
                    _read_dir(port / "hw_counters"),
                    {
                        n: read_text(port / n)
                        for n in ("rate", "state", "phys_state", "link_layer")
                        if (port / n).is_file()
                    },
                    source=str(port),
                )
            )
    return ports


@dataclass(frozen=True, slots=True)
class PerfqueryPort:
    """One `# Port ... counters: Lid L port P` block. `kind` is `extended` (-x),
    `rcv_error` (-E, PortRcvErrorDetails) or `basic`; `port_select`/`counter_select` are
    dropped from `counters` because they are request echoes, not counters."""

    kind: str
    lid: int
    port: int
    counters: Mapping[str, int]
    line: int


_PQ_HEADER = re.compile(
    r"^#\s*(?P<what>Port extended counters|PortRcvErrorDetails counters|Port counters):\s*"
    r"Lid\s+(?P<lid>\d+)\s+port\s+(?P<port>\d+)"
)
_PQ_KINDS = {
    "Port extended counters": "extended",
    "PortRcvErrorDetails counters": "rcv_error",
    "Port counters": "basic",
}
_PQ_FIELD = re.compile(r"^(?P<key>[A-Za-z0-9_]+):\.*(?P<v>\S+)\s*$")
_PQ_SKIP = {"PortSelect", "CounterSelect", "CounterSelect2"}
_HEX = re.compile(r"^0x[0-9a-fA-F]{1,16}$")


def parse_perfquery(text: str, source: str = DEFAULT_SOURCE) -> list[PerfqueryPort]:
    """Parse `perfquery -x` / `-E` output (one or more port blocks; empty output gives [])."""
    ports: list[PerfqueryPort] = []
    head: tuple[str, int, int, int] | None = None
    vals: dict[str, int] = {}

    def close() -> None:
        if head is not None:
            ports.append(PerfqueryPort(head[0], head[1], head[2], dict(vals), head[3]))

    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        m = _PQ_HEADER.match(line)
        if m:
            close()
            lid = parse_int(m["lid"], source, lineno, "Lid")
            head, vals = (
                (_PQ_KINDS[m["what"]], lid, parse_int(m["port"], source, lineno, "port"), lineno),
                {},
            )
            continue
        m = _PQ_FIELD.match(line)
        if not m or head is None:
            raise InputError(source, f"not a perfquery line: {line[:80]!r}", lineno)
        if m["key"] in _PQ_SKIP:
            continue
        v = m["v"]
        if v.startswith("0x"):
            if not _HEX.match(v):  # `0x`, `0xZZ`: int(v, 16) would raise ValueError
                raise InputError(
                    source, f"{m['key']}: expected a 64-bit hex value, got {shown(v)}", lineno
                )
            vals[m["key"]] = int(v, 16)
        else:
            vals[m["key"]] = parse_int(v, source, lineno, m["key"])
    close()
    return ports


def parse_perfquery_file(path: str | Path) -> list[PerfqueryPort]:
    """Read and parse saved perfquery output; errors name `path`."""
    return parse_perfquery(read_text(path), str(path))


@dataclass(frozen=True, slots=True)
class IbLink:
    """One `ibnetdiscover --ports` line: a local port and, when cabled, its remote end."""

    type: str
    lid: int
    port: int
    guid: str
    width: str
    speed: str
    name: str
    remote_type: str | None = None
    remote_lid: int | None = None
    remote_port: int | None = None
    remote_guid: str | None = None
    remote_name: str | None = None


_NET_LINK = re.compile(
    r"^(?P<t>CA|SW|RT)\s+(?P<lid>\d+)\s+(?P<port>\d+)\s+(?P<guid>0x[0-9a-fA-F]+)\s+"
    r"(?P<width>\S+)\s+(?P<speed>\S+)\s+-\s+(?P<rt>CA|SW|RT)\s+(?P<rlid>\d+)\s+(?P<rport>\d+)\s+"
    r"(?P<rguid>0x[0-9a-fA-F]+)\s+\(\s*'(?P<name>.*)'\s+-\s+'(?P<rname>.*)'\s*\)\s*$"
)
_NET_DOWN = re.compile(
    r"^(?P<t>CA|SW|RT)\s+(?P<lid>\d+)\s+(?P<port>\d+)\s+(?P<guid>0x[0-9a-fA-F]+)\s+"
    r"(?P<width>\S+)\s+(?P<speed>\S+)\s+(?:'(?P<name>.*)'|(?P<bare>\S.*?))\s*$"
)


def parse_ibnetdiscover(text: str, source: str = DEFAULT_SOURCE) -> list[IbLink]:
    """Parse `ibnetdiscover --ports` output (maps GUID/port to switch and host names)."""
    links: list[IbLink] = []
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line:
            continue
        m = _NET_LINK.match(line)
        if m:

            def num(key: str, m: re.Match[str] = m, n: int = lineno) -> int:
                return parse_int(m[key], source, n, key)

            links.append(
                IbLink(
                    m["t"],
                    num("lid"),
                    num("port"),
                    m["guid"],
                    m["width"],
                    m["speed"],
                    m["name"],
                    m["rt"],
                    num("rlid"),
                    num("rport"),
                    m["rguid"],
                    m["rname"],
                )
            )
            continue
        m = _NET_DOWN.match(line)
        if m:
            name = m["name"] if m["name"] is not None else m["bare"]
            lid = parse_int(m["lid"], source, lineno, "lid")
            port = parse_int(m["port"], source, lineno, "port")
            links.append(IbLink(m["t"], lid, port, m["guid"], m["width"], m["speed"], name))
            continue
        raise InputError(source, f"not an ibnetdiscover --ports line: {line[:80]!r}", lineno)
    return links


def _counter_files(files: Mapping[str, str], source: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for name in sorted(files):
        text = files[name].strip()
        if text.startswith(_NO_VALUE):
            continue
        out[name] = parse_int(text, f"{source}/{name}", 1, name)
    return out


def _state(text: str | None, source: str) -> str | None:
    if text is None or not text.strip():
        return None
    m = re.match(r"^\d+:\s*(\S.*)$", text.strip())
    if not m:
        raise InputError(source, f"expected '<n>: NAME', got {shown(text.strip())}", 1)
    return m[1]


def _read_dir(d: Path) -> dict[str, str]:
    """Every file in `d` by name ({} when `d` is absent); scandir's entries know their
    type, so a port's ~40 counter files cost 40 reads and no stat."""
    try:
        entries = list(os.scandir(d))
    except (FileNotFoundError, NotADirectoryError):
        return {}
    return {e.name: read_text(e.path) for e in entries if e.is_file()}


#: Data rate per lane, Gb/s, by `ibnetdiscover` speed name (SDR..XDR); `???` and unknown
#: names give no rate rather than a guess.
LANE_GBPS = {
    "SDR": 2.5,
    "DDR": 5.0,
    "QDR": 10.0,
    "FDR10": 10.0,
    "FDR": 14.0,
    "EDR": 25.0,
    "HDR": 50.0,
    "NDR": 100.0,
    "XDR": 200.0,
}


def link_rate_gbps(width: str, speed: str) -> float | None:
    """`4x` `EDR` -> 100.0 (lanes x lane rate); None when either is unknown."""
    m = re.match(r"^(\d+)x$", width)
    lane = LANE_GBPS.get(speed)
    return int(m[1]) * lane if m and lane is not None else None


@dataclass(frozen=True, slots=True)
class FabricPort:
    """A cabled port as the fabric names it: `component` is `<switch>:<port>` for a switch
    port and `<host>:<device>:<port>` for an HCA port (the infiniband source's id when the
    node description is `<host> <device>`, as on current stacks); `peer_host` says whether
    the other end is an HCA (a host) rather than a switch."""

    kind: str  # "switch_port" or "ib_port"
    component: str
    switch: str  # the switch this port belongs to or is cabled to
    lid: int
    port: int
    guid: str
    peer_host: bool
    rate_gbps: float | None


def fabric_ports(links: list[IbLink]) -> list[FabricPort]:
    """Every cabled port of `ibnetdiscover --ports`, switch ports and the HCA ports behind
    them. Switches are named by their description, suffixed by GUID when several share one
    (unmanaged switches all say `Infiniscale-IV Mellanox Technologies`)."""
    switch_name = _switch_namer(links)
    out: dict[str, FabricPort] = {}
    for link in links:
        if link.remote_type is None or link.remote_guid is None or link.remote_name is None:
            continue  # a port with no cable
        rate = link_rate_gbps(link.width, link.speed)
        if link.type == "SW":
            sw = switch_name(link.guid, link.name)
            comp = f"{sw}:{link.port}"
            peer_host = link.remote_type == "CA"
            out[comp] = FabricPort(
                "switch_port", comp, sw, link.lid, link.port, link.guid, peer_host, rate
            )
        if link.type == "CA" and link.remote_type == "SW":
            sw = switch_name(link.remote_guid, link.remote_name)
            comp = f"{hca_name(link.name, link.guid)}:{link.port}"
            out[comp] = FabricPort("ib_port", comp, sw, link.lid, link.port, link.guid, True, rate)
    return list(out.values())


def switch_lids(links: list[IbLink]) -> dict[int, tuple[str, str]]:
    """LID -> (switch name as :func:`fabric_ports` gives it, GUID), cabled ports or not."""
    switch_name = _switch_namer(links)
    return {
        link.lid: (switch_name(link.guid, link.name), link.guid)
        for link in links
        if link.type == "SW"
    }


def _switch_namer(links: list[IbLink]) -> Callable[[str, str], str]:
    names: dict[str, set[str]] = {}
    for link in links:
        for t, guid, name in (
            (link.type, link.guid, link.name),
            (link.remote_type, link.remote_guid, link.remote_name),
        ):
            if t == "SW" and guid is not None and name is not None:
                names.setdefault(name.strip(), set()).add(guid)

    def switch_name(guid: str, name: str) -> str:
        name = name.strip()
        return name if len(names.get(name, ())) <= 1 else f"{name} ({guid})"

    return switch_name


def hca_name(description: str, guid: str) -> str:
    """`<host>:<device>` from an HCA's node description (`o0001 HCA-1`, `worker20 mlx5_3`);
    a description that is not two words keeps its text and takes the GUID as device."""
    words = description.split()
    if len(words) == 2:
        return f"{words[0]}:{words[1]}"
    return f"{' '.join(words) or guid}:{guid}"
