"""LNet stats, InfiniBand sysfs counters, `perfquery` and `ibnetdiscover --ports`, fuzzed."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from iolens.parse import infiniband, lnet
from tests.fuzz.harness import fuzz, only_input_errors, scratch
from tests.fuzz.mutate import HOSTILE_NUMBERS, as_text, inputs
from tests.fuzz.seeds import CASES, cases, seeds, shared

LNET = seeds(sorted((CASES / "collect" / "lnet_router").rglob("stats")))
PERFQUERY = seeds(
    cases("perfquery"),
    shared("infiniband-treydock-infiniband_exporter/perfquery*/*.out"),
)
IBNET = seeds(
    cases("ibnetdiscover"), shared("infiniband-treydock-infiniband_exporter/ibnetdiscover/*")
)
SYSFS_DIR = (
    CASES / "parse" / "ib_sysfs" / "mlx4-mlx5-hfi1" / "input" / "sys" / "class" / "infiniband"
)
COUNTERS = sorted({p.name for p in SYSFS_DIR.glob("*/ports/*/counters/*")})
VALUES = seeds(sorted(SYSFS_DIR.glob("*/ports/*/*counters/*")), limit=256)
ATTRS = {
    n: seeds(sorted(SYSFS_DIR.glob(f"*/ports/*/{n}"))) for n in ("rate", "state", "phys_state")
}

_DIR = scratch("net")


@given(inputs(LNET))
@example(b"0 0 0 0 0 0 0 0 0 0 \xc2\xb2\n")  # issue 19: parse_int on '²'
@example(b"1 2 3 4 5 6 7 8 9 10 " + b"9" * 5000 + b"\n")
@fuzz(200)
def test_lnet_stats(data: bytes) -> None:
    path = _DIR / "stats"
    path.write_bytes(data)
    st_ = only_input_errors(lambda: lnet.parse_stats_file(path), str(path))
    if st_ is not None:
        assert all(0 <= getattr(st_, f) < 2**64 for f in lnet.FIELDS)


hostile_value = st.one_of(
    inputs(VALUES).map(as_text),
    st.sampled_from(HOSTILE_NUMBERS),
    st.sampled_from(["N/A (no PMA)\n", "\u00b2\n", "12\x00\n"]),
)


@given(
    st.dictionaries(st.sampled_from(COUNTERS), hostile_value, max_size=6),
    st.dictionaries(st.sampled_from(COUNTERS), hostile_value, max_size=3),
    st.fixed_dictionaries(
        {},
        optional={n: inputs(s).map(as_text) for n, s in ATTRS.items()}
        | {"link_layer": st.text(max_size=20)},
    ),
)
@example({"port_xmit_data": "\u00b2\n"}, {}, {})  # issue 19: parse_int on '²'
@example({"symbol_error": "\u0663"}, {}, {"rate": "\u0663 Gb/sec"})
@fuzz(300)
def test_ib_sysfs_port(counters: dict, hw: dict, attrs: dict) -> None:
    port = only_input_errors(
        lambda: infiniband.parse_sysfs_port("mlx5_0", 1, counters, hw, attrs, source="p/1"), "p/1/"
    )
    if port is not None:
        assert all(0 <= v < 2**64 for v in [*port.counters.values(), *port.hw_counters.values()])
        assert port.rate_gbps is None or port.rate_gbps == port.rate_gbps


@given(inputs(PERFQUERY))
@example(b"# Port extended counters: Lid 1 port 1\nPortXmitData:.....0x\n")
@example(b"# Port extended counters: Lid " + b"1" * 5000 + b" port 1\n")
@fuzz(300)
def test_perfquery(data: bytes) -> None:
    path = _DIR / "perfquery.out"
    path.write_bytes(data)
    ports = only_input_errors(lambda: infiniband.parse_perfquery_file(path), str(path))
    for p in ports or []:
        assert all(0 <= v < 2**64 for v in p.counters.values())


@given(inputs(IBNET))
@example(b"CA " + b"1" * 5000 + b" 1 0x1 4x EDR 'h1'\n")
@fuzz(300)
def test_ibnetdiscover(data: bytes) -> None:
    text = as_text(data)
    only_input_errors(lambda: infiniband.parse_ibnetdiscover(text, "ibnet.out"), "ibnet.out")
