"""The node and system levels on constructed activities: a long anomaly of one process
must not be swallowed by brief, unrelated slowdowns elsewhere that overlap part of it
(a loaded test machine made every process stall at once for a few calls, while one
process's slow phase ran; the chain of overlaps made the whole a 'system-wide' event).

Ground truth is the construction: six processes on three nodes, 600 writes each, 2 ms
apart at 20 us; process 1 of n2 slow (5 ms) for calls 300-339; `burst` processes slow
(1 ms) for 5 calls from call 320."""

from __future__ import annotations

import datetime as dt

from iolens.analyze.reasoner import reason
from iolens.analyze.reasoner.activity import Activity
from iolens.analyze.reasoner.overlap import crowded

T0 = dt.datetime(2026, 12, 6, 8, 0)
NODES = ("n1", "n2", "n3")


def job(burst: set[tuple[str, int]], partner: bool = False) -> list[Activity]:
    """The job's activities; `partner`: process 0 of n2 is slow like process 1."""
    acts = []
    for node in NODES:
        for k in range(2):
            pid = 100 * NODES.index(node) + k
            for i in range(600):
                us = 20
                if node == "n2" and (k == 1 or partner) and 300 <= i < 340:
                    us = 5000
                elif (node, k) in burst and 320 <= i < 325:
                    us = 1000
                t = T0 + dt.timedelta(milliseconds=2 * i) + dt.timedelta(microseconds=7 * pid)
                end = t + dt.timedelta(microseconds=us)
                off = (i * 7919 % 600) * 8192
                acts.append(
                    Activity(node, pid, None, "write", "/d", off, 4096, 1, t, end, us * 1000)
                )
    acts.sort(key=lambda a: (a.t_start, a.t_end))
    return acts


def slowed(anoms: list[dict]) -> list[dict]:
    return [a for a in anoms if any(e["pid"] == 101 for e in a["episodes"])]


def test_alone_it_is_process_local() -> None:
    (a,) = slowed(reason(job(set())))
    assert (a["level"], a["verdict"], a["where"]) == ("process", "process-local", "n2 pid 101")
    assert a["calls"] >= 40


def test_brief_host_wide_stalls_do_not_swallow_it() -> None:
    burst = {("n1", 0), ("n1", 1), ("n3", 0), ("n3", 1), ("n2", 0)}
    anoms = reason(job(burst))
    (a,) = slowed(anoms)
    assert (a["verdict"], a["where"], a["processes"]) == ("process-local", "n2 pid 101", 1)
    assert a["calls"] >= 40
    # the stalls themselves: system-wide on the two nodes whose every process stalled
    (wide,) = [x for x in anoms if x["verdict"] == "system-wide"]
    assert wide["where"] == "n1, n3" and wide["processes"] == 4
    # n2's other process stalled with them, but its node never confirmed: its own anomaly
    (other,) = [x for x in anoms if any(e["pid"] == 100 for e in x["episodes"])]
    assert (other["verdict"], other["where"]) == ("process-local", "n2 pid 100")


def test_its_partner_slow_as_long_is_one_node_wide_anomaly() -> None:
    """Both processes of n2 slow through the same calls: node-wide, not split."""
    (a,) = slowed(reason(job(set(), partner=True)))
    assert (a["level"], a["verdict"], a["where"], a["processes"]) == ("node", "node-wide", "n2", 2)


def test_crowded_share() -> None:
    s = T0
    ms = dt.timedelta(milliseconds=1)
    others = [("b", s + 2 * ms, s + 4 * ms), ("c", s + 3 * ms, s + 9 * ms)]
    assert crowded((s, s + 10 * ms), "a", others, 2) == 0.7  # 2..9 ms in company
    assert crowded((s, s + 10 * ms), "a", others, 3) == 0.1  # 3..4 ms all three
    assert crowded((s + 5 * ms, s + 5 * ms), "a", others, 2) == 1.0  # an instant
    assert crowded((s, s + 10 * ms), "a", [("a", s, s + 10 * ms)], 2) == 0.0  # itself
