"""The site topology file: what it loads, what a reload replaces, peaks from IO500, and
errors that name the file and the key."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from iolens.errors import InputError
from iolens.ingest import topology as topo
from iolens.ingest.importers import io500
from iolens.store import open_store
from tests.io500 import write_run

SITE = """
[lustre]
fsname = "scr"

[[forwarders]]
name = "fwd01"
nodes = "c[01-04]"
peak_bw = "2.5 GB/s"
aliases = ["10.0.0.1@o2ib"]

[[forwarders]]
name = "fwd02"
nodes = ["c[05-06]", "c08"]

[[oss]]
name = "oss1"
targets = "0x0a-0x0b"
peak_bw = "4 GiB/s"
aliases = ["10.0.1.1@o2ib"]

[[oss]]
name = "oss2"
targets = ["scr-OST0000"]
target_peak_bw = 1e9
target_peak_ops = "20k"

[[mds]]
name = "mds1"
targets = [0]
peak_ops = "50 kIOPS"

[compute]
nodes = "c[01-10]"

[login]
nodes = "login1"

[[aliases]]
hosts = "c[01-03]"
aliases = "10.1.0.[1-3]@o2ib"
"""


def write(tmp: Path, text: str, name: str = "site.toml") -> Path:
    p = tmp / name
    p.write_text(text)
    return p


@pytest.fixture
def store(tmp_path: Path):
    with open_store(str(tmp_path / "s.duckdb"), create=True) as s:
        yield s


def rows(store, sql: str) -> list[dict]:
    return store.query(sql).to_pylist()


def test_a_site_file_becomes_components_forwarding_and_aliases(store, tmp_path: Path):
    got = topo.load_topology(store, write(tmp_path, SITE))
    assert got["components"] == {
        "compute": 10, "forwarder": 2, "login": 1, "mds": 1, "mdt": 1, "oss": 2, "ost": 3,
    }  # fmt: skip
    assert (got["forwarding"], got["aliases"]) == (7, 5)
    assert got["without_peak"] == ["fwd02"]
    fwd = {r["compute_node"]: r["forwarder"] for r in rows(store, "SELECT * FROM forwarding")}
    assert fwd == {
        **dict.fromkeys(["c01", "c02", "c03", "c04"], "fwd01"),
        "c05": "fwd02",
        "c06": "fwd02",
        "c08": "fwd02",
    }
    comp = {r["component_id"]: r for r in rows(store, "SELECT * FROM components")}
    # OSTs by index are named as Lustre names them (hex), with their server as parent
    assert comp["scr-OST000a"]["parent"] == "oss1" and comp["scr-OST000b"]["kind"] == "ost"
    # a server's peak is shared equally by its targets; targets' peaks add up to the server's
    assert comp["scr-OST000a"]["peak_bw"] == 2 * 2**30 and comp["oss1"]["peak_bw"] == 4 * 2**30
    assert comp["oss2"]["peak_bw"] == 1e9 and comp["oss2"]["peak_ops"] == 20e3
    assert comp["scr-MDT0000"]["peak_ops"] == 50e3 and comp["scr-MDT0000"]["parent"] == "mds1"
    assert comp["fwd01"]["peak_bw"] == 2.5e9 and comp["fwd01"]["peak_ops"] is None
    assert comp["c09"]["kind"] == "compute" and "c09" not in fwd  # mounts Lustre directly
    aliases = {
        r["alias"]: r["component_id"] for r in rows(store, "SELECT * FROM component_aliases")
    }
    assert aliases == {
        "10.0.0.1@o2ib": "fwd01", "10.0.1.1@o2ib": "oss1",
        "10.1.0.1@o2ib": "c01", "10.1.0.2@o2ib": "c02", "10.1.0.3@o2ib": "c03",
    }  # fmt: skip


def test_a_reload_replaces_what_the_file_describes_and_nothing_else(store, tmp_path: Path):
    topo.load_topology(store, write(tmp_path, SITE))
    store.execute("INSERT INTO components VALUES ('other-OST0000', 'ost', 'ossX', 7.0, NULL)")
    change = """
[[forwarders]]
name = "fwd02"
nodes = "c[04-06]"
peak_bw = "1 GB/s"

[[oss]]
name = "oss1"
targets = ["scr-OST000a"]
"""
    topo.load_topology(store, write(tmp_path, change, "change.toml"))
    fwd = {r["compute_node"]: r["forwarder"] for r in rows(store, "SELECT * FROM forwarding")}
    assert fwd["c04"] == "fwd02" and fwd["c01"] == "fwd01" and fwd["c08"] == "fwd02"
    comp = {r["component_id"]: r for r in rows(store, "SELECT * FROM components")}
    assert comp["fwd02"]["peak_bw"] == 1e9
    assert comp["oss1"]["peak_bw"] == 4 * 2**30  # not given this time: kept
    other = comp["other-OST0000"]
    assert (other["kind"], other["parent"], other["peak_bw"]) == ("ost", "ossX", 7.0)
    assert len([c for c in comp.values() if c["kind"] == "forwarder"]) == 2


def test_peaks_from_an_imported_io500_run(store, tmp_path: Path):
    run = write_run(tmp_path / "lab" / "results" / "2024.05.03-09.00.00")
    io500.load_runs(store, [io500.read_run(run)])
    text = """
[lustre]
fsname = "scr"
[[oss]]
name = "oss1"
targets = "0-3"
[[oss]]
name = "oss2"
targets = "4-5"
target_peak_bw = "1 GB/s"
[[mds]]
name = "mds1"
targets = "0-1"
[io500]
system = "lab"
"""
    got = topo.load_topology(store, write(tmp_path, text))
    comp = {r["component_id"]: r for r in rows(store, "SELECT * FROM components")}
    # the run's best easy bandwidth (ior-easy-read, 30 GiB/s) shared over the 6 OSTs; a
    # target's own peak wins; servers add up their targets
    assert comp["scr-OST0000"]["peak_bw"] == pytest.approx(30 * 2**30 / 6)
    assert comp["scr-OST0004"]["peak_bw"] == 1e9
    assert comp["oss1"]["peak_bw"] == pytest.approx(4 * 30 * 2**30 / 6)
    assert comp["oss2"]["peak_bw"] == 2e9
    # mdtest-easy's best rate (stat, 200 kIOPS) over the 2 MDTs
    assert comp["scr-MDT0001"]["peak_ops"] == pytest.approx(100e3)
    assert comp["mds1"]["peak_ops"] == pytest.approx(200e3)
    assert got["peaks_from"]["scr-OST0000"] == "io500:lab/2024.05.03-09.00.00"
    assert got["peaks_from"]["scr-OST0004"] == "file"
    bad = write(tmp_path, '[io500]\nsystem = "lab"\nrun = "nope"\n', "bad.toml")
    with pytest.raises(InputError, match=r"io500.system: no run 'nope' of system 'lab'"):
        topo.load_topology(store, bad)


FWD = '[[forwarders]]\nname = "f"\nnodes = "c1"\n'
ERRORS = {
    "unknown key": (FWD + "peek_bw = 1\n", "forwarders.0.peek_bw"),
    "bad unit": (FWD + 'peak_bw = "3 furlongs"\n', "peak_bw: unknown unit"),
    "negative peak": (FWD + "peak_ops = -5\n", "peak_ops: a peak must be positive"),
    "two forwarders": (
        FWD + '[[forwarders]]\nname = "f2"\nnodes = "c[1-2]"\n',
        "forwarders[1] (f2).nodes: c1 is already behind f",
    ),
    "two kinds": (FWD + '[login]\nnodes = "f"\n', "login.nodes: f is already a forwarder"),
    "twice": (
        '[[oss]]\nname = "o"\ntargets = ["a"]\n[[oss]]\nname = "o"\ntargets = ["b"]\n',
        "oss: described twice: o",
    ),
    "no fsname": (
        '[[oss]]\nname = "o"\ntargets = "0-3"\n',
        "oss[0] (o).targets: targets given by index need an fsname",
    ),
    "bad range": ('[lustre]\nfsname = "s"\n[[oss]]\nname = "o"\ntargets = "3-1"\n', "empty range"),
    "hostlist": (FWD.replace('"c1"', '"c[1-4"'), "forwarders[0] (f).nodes: unbalanced"),
    "alias count": (
        '[[aliases]]\nhosts = "c[1-3]"\naliases = "10.0.0.[1-2]@tcp"\n',
        "aliases[0]: 3 hosts but 2 aliases",
    ),
    "alias twice": (
        '[[aliases]]\nhosts = "c[1-2]"\naliases = "n[1-2]"\n'
        '[[aliases]]\nhosts = "c3"\naliases = "n1"\n',
        "alias n1 names both c1 and c3",
    ),
    "empty": ("", "describes nothing"),
    "toml": ("[[forwarders]\n", "not valid TOML"),
    "io500 without runs": ('[io500]\nsystem = "lab"\n', "io500.system: no valid run of system"),
}


@pytest.mark.parametrize("case", list(ERRORS))
def test_mistakes_name_the_file_and_the_key(case: str, store, tmp_path: Path):
    text, message = ERRORS[case]
    path = write(tmp_path, text)
    with pytest.raises(InputError) as err:
        topo.load_topology(store, path)
    assert err.value.source == str(path)
    assert message in err.value.message, err.value.message
    assert rows(store, "SELECT count(*) AS n FROM components") == [{"n": 0}]  # nothing loaded


def test_the_sample_loads_and_describes_every_field(store, tmp_path: Path):
    sample = topo.sample()
    got = topo.load_topology(store, write(tmp_path, sample))
    assert got["forwarding"] == 1024 and got["components"]["ost"] == 8
    models = [
        topo.SiteTopology,
        topo.Forwarder,
        topo.Server,
        topo.Nodes,
        topo.Aliases,
        topo.Lustre,
        topo.Io500Peaks,
    ]
    comments = " ".join(line.lstrip("# ") for line in sample.splitlines() if line.startswith("#"))
    comments = re.sub(r"\s+", " ", comments)
    for model in models:
        for name, f in model.model_fields.items():
            assert f.description, f"{model.__name__}.{name} has no description"
            if model is not topo.SiteTopology:
                assert re.sub(r"\s+", " ", f.description) in comments, f"{model.__name__}.{name}"
                assert re.search(rf"^#? ?{name} = ", sample, re.M), (
                    f"{model.__name__}.{name} not in the sample"
                )


@pytest.mark.parametrize(
    ("value", "what", "expected"),
    [
        ("2.5 GB/s", "bw", 2.5e9),
        ("2 GiB/s", "bw", 2 * 2**30),
        ("800MB/s", "bw", 8e8),
        (1e9, "bw", 1e9),
        ("40k", "ops", 4e4),
        ("30 kIOPS", "ops", 3e4),
        (500, "ops", 500.0),
    ],
)
def test_rates(value, what, expected):
    assert topo.parse_rate(value, what) == pytest.approx(expected)
