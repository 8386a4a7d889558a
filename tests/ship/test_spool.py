"""One contract, run against every spool implementation."""

from __future__ import annotations

import pytest

from iolens.ship.spool import DiskSpool, MemorySpool


@pytest.fixture(params=["memory", "disk"])
def make_spool(request, tmp_path):
    def make(max_bytes: int = 1 << 20):
        if request.param == "memory":
            return MemorySpool(max_bytes)
        return DiskSpool(tmp_path / "spool", max_bytes)

    return make


def test_oldest_first_and_ack(make_spool):
    spool = make_spool()
    for k in ("a", "b", "c"):
        spool.put(k, k.encode() * 10)
    assert spool.pending() == ["a", "b", "c"]
    assert spool.get("b") == b"b" * 10
    spool.ack("a")
    assert spool.pending() == ["b", "c"]
    spool.ack("zzz")  # acking an unknown key is harmless
    assert spool.size() == 20


def test_full_spool_drops_oldest_and_counts(make_spool):
    spool = make_spool(max_bytes=250)
    for i in range(5):
        spool.put(f"k{i}", bytes(100))
    assert spool.pending() == ["k3", "k4"]
    assert spool.dropped == 3


def test_disk_spool_survives_restart_and_cleans_partial_writes(tmp_path):
    spool = DiskSpool(tmp_path / "s")
    spool.put("x1", b"payload")
    (tmp_path / "s" / "0000-partial.iolb.tmp").write_bytes(b"half")
    again = DiskSpool(tmp_path / "s")
    assert again.pending() == ["x1"] and again.get("x1") == b"payload"
    assert not list((tmp_path / "s").glob("*.tmp"))


def test_disk_spool_refuses_unsafe_keys(tmp_path):
    with pytest.raises(ValueError):
        DiskSpool(tmp_path / "s").put("../etc/passwd", b"x")
