"""Randomised faults in the real MooseFS lab, found by iolens from real signals, scored.

    sudo .venv/bin/python bench/lab.py --scenarios 20 --seed 1      # hours
    sudo .venv/bin/python bench/lab.py --quick                      # one of each kind

The lab (`tests/lab/harness.py`: a master, four chunkservers on their own disks, five
client mounts) runs a steady job-like load on every chunkserver for the whole run. After a
warm-up (the detectors learn the servers' noise), scenarios follow one another, each
drawn at random: its kind, magnitude, start and server:

- `slow_server`: one chunkserver stopped/continued (SIGSTOP duty cycle) for a factor of
  2-5 of its time for 12-16 minutes (the slow-server detector wants 10 busy minutes);
- `metadata_storm`: 1-4 `mdstorm` processes of an ordinary user on the login node, outside
  any job, for 4-8 minutes.

iolens watches as a site runs it (`tests/lab/observe.py`: a server, an agent asking the
master with `mfscli`, an agent following the mounts). Its episodes are then matched with
the ground truth (`truth.jsonl`, read here only): recall and precision per kind, span
overlap (intersection over union of the episode and the fault), time to detect (the first
minute at which the detectors, given only the data up to that minute, report it), and for
storms whether the culprit host, user and process are named.

The master runs in a cgroup limited to `--master-cpu` of a core: on one 2-core machine the
FUSE clients cost more per operation than the master, so no storm could load an
unrestricted master; the limit gives it the capacity a real master has relative to its
many clients. iolens is told that CPU as a site tells it its master's (`master_cpus` of
the `moosefs` source) and judges overload by the master's utilisation.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests.lab.harness import Lab  # noqa: E402
from tests.lab.master_cpu import limit_master_cpu  # noqa: E402
from tests.lab.observe import Observatory, minutes  # noqa: E402

KIND_OF = {"slow_server": "slow_ost", "metadata_storm": "metadata_storm"}


@dataclass
class Scenario:
    kind: str
    start_s: float  # after the warm-up
    seconds: float
    magnitude: float  # slow: factor; storm: processes
    target: str  # chunkserver id, or the storm's node


def plan(
    rng: random.Random,
    n: int,
    servers: list[str],
    quick: bool,
    slow_minutes: tuple[float, float] = (12, 16),
    storm_minutes: tuple[float, float] = (4, 8),
    concurrent: bool = False,
) -> list[Scenario]:
    """`n` scenarios in start order. `concurrent`: each kind keeps its own clock, so a storm
    may run while a chunkserver is slow (never two faults of one kind at once), which is how
    faults meet in production and halves the lab time."""
    kinds = (
        ["slow_server", "metadata_storm"]
        if quick
        else [rng.choice(["slow_server", "metadata_storm"]) for _ in range(n)]
    )
    out: list[Scenario] = []
    clock: dict[str, float] = {}
    for kind in kinds:
        key = kind if concurrent else "all"
        t = clock.get(key, 0.0) + rng.uniform(120, 240)  # a quiet gap, random start
        if kind == "slow_server":
            sc = Scenario(kind, t, rng.uniform(*slow_minutes) * 60, round(rng.uniform(2, 5), 1),
                          rng.choice(servers))  # fmt: skip
        else:
            sc = Scenario(kind, t, rng.uniform(*storm_minutes) * 60, rng.randint(1, 4), "login")
        out.append(sc)
        clock[key] = t + sc.seconds
    return sorted(out, key=lambda s: s.start_s)


def overlap(a0: float, a1: float, b0: float, b1: float) -> float:
    return max(0.0, min(a1, b1) - max(a0, b0))


def _ts(v: Any, open_end: float | None = None) -> float:
    if v is None:  # an episode still open: it ends where the data does
        return open_end if open_end is not None else time.time()
    if isinstance(v, str):
        v = datetime.fromisoformat(v)
    return v.replace(tzinfo=UTC).timestamp()


def score(
    truth: list[dict[str, Any]],
    episodes: list[dict[str, Any]],
    online: dict[datetime, list[dict[str, Any]]],
    mdt: str,
    data_end: float | None = None,
) -> dict[str, Any]:
    """Per kind: recall, precision, span IoU, time to detect; storms: culprit named.
    Episodes still open end at `data_end` (the last sample), in the online replay at the
    replayed time."""
    slack = 120.0  # minute granularity of the servers' accounting, on each side
    out: dict[str, Any] = {}
    for kind, det in KIND_OF.items():
        faults = [t for t in truth if t["kind"] == kind]
        eps = [e for e in episodes if e["kind"] == det]

        def comp(t: dict[str, Any]) -> str:
            return t["component"] if t["kind"] == "slow_server" else mdt

        matched: set[int] = set()
        rows = []
        for f in faults:
            f0, f1 = float(f["start"]), float(f["end"])
            hit = [
                i for i, e in enumerate(eps)
                if e["component"] == comp(f)
                and overlap(_ts(e["start"]), _ts(e["end"], data_end), f0 - slack, f1 + slack) > 0
            ]  # fmt: skip
            matched |= set(hit)
            row: dict[str, Any] = {"fault": f, "found": bool(hit)}
            if hit:
                e0 = min(_ts(eps[i]["start"]) for i in hit)
                e1 = max(_ts(eps[i]["end"], data_end) for i in hit)
                inter = overlap(e0, e1, f0, f1)
                row["iou"] = inter / (max(e1, f1) - min(e0, f0))
                row["episode"] = [e0, e1]
                if kind == "metadata_storm":
                    ev = eps[hit[0]].get("evidence") or {}
                    ev = json.loads(ev) if isinstance(ev, str) else ev
                    clients = ev.get("clients") or [{}]
                    procs = ev.get("processes") or [{}]
                    row["culprit"] = {
                        "host": clients[0].get("host") == f["host"],
                        "process": procs[0].get("process") == f["comm"],
                        "user": procs[0].get("uid") == f["uid"],
                    }
            seen = [
                t.timestamp() for t, found in sorted(online.items())
                if any(
                    x["kind"] == det and x["component"] == comp(f)
                    and overlap(
                        _ts(x["start"]), _ts(x["end"]) if x["end"] else t.timestamp(),
                        f0 - slack, f1 + slack,
                    ) > 0  # an episode still open at `t` ends there, not now
                    for x in found
                )
            ]  # fmt: skip
            row["ttd_s"] = (seen[0] - f0) if seen else None
            rows.append(row)
        tp = sum(r["found"] for r in rows)
        fp = len([i for i in range(len(eps)) if i not in matched])
        ious = [r["iou"] for r in rows if "iou" in r]
        ttds = [r["ttd_s"] for r in rows if r["ttd_s"] is not None]
        out[kind] = {
            "faults": len(faults),
            "found": tp,
            "episodes": len(eps),
            "false_episodes": fp,
            "recall": tp / len(faults) if faults else None,
            "precision": (len(matched) / len(eps)) if eps else None,
            "iou_median": statistics.median(ious) if ious else None,
            "ttd_median_s": statistics.median(ttds) if ttds else None,
            "culprit_named": (
                sum(all(r["culprit"].values()) for r in rows if "culprit" in r)
                if kind == "metadata_storm"
                else None
            ),
            "rows": rows,
        }
    return out


def run(args: argparse.Namespace, lab: Lab | None = None) -> dict[str, Any]:
    """The whole bench; on `lab` if given (left up), else on a lab of its own."""
    rng = random.Random(args.seed)
    state = Path(args.state)
    own = lab is None
    if lab is None:
        lab = Lab(lab=state / "lab", port_base=args.port_base)
    lab.truth_path = state / "truth.jsonl"
    if lab.truth_path.exists():
        lab.truth_path.unlink()
    lab.up()
    undo_cpu = limit_master_cpu(lab, args.master_cpu)
    try:
        print(f"lab: master limited to {args.master_cpu} CPU")
        obs = Observatory(
            state / "iolens",
            master=f"{lab.master['ip']}:{lab.master['cl_port']}",
            nodes={n.name: n.ip for n in lab.nodes.values()},
            port=args.port,
            master_cpus=args.master_cpu,
        )
        scenarios = plan(
            rng,
            args.scenarios,
            [c.id for c in lab.chunkservers],
            args.quick,
            getattr(args, "slow_minutes", (12, 16)),
            getattr(args, "storm_minutes", (4, 8)),
            getattr(args, "concurrent", False),
        )
        total = args.warmup * 60 + max(s.start_s + s.seconds for s in scenarios) + args.tail * 60
        print(f"lab: {len(scenarios)} scenarios, {total / 60:.0f} min")
        obs.start()
        lab.load(seconds=total)
        t0 = time.time() + args.warmup * 60
        started = datetime.now(UTC)
        running = []
        for i, sc in enumerate(scenarios):
            time.sleep(max(0.0, t0 + sc.start_s - time.time()))
            print(
                f"[{datetime.now(UTC):%H:%M:%S}] {i + 1}/{len(scenarios)} {asdict(sc)}", flush=True
            )
            if sc.kind == "slow_server":
                running.append(lab.slow_chunkserver(sc.target, sc.magnitude, seconds=sc.seconds))
            else:
                running.append(
                    lab.metadata_storm(sc.target, seconds=sc.seconds, procs=int(sc.magnitude))
                )
        for fault in running:
            fault.wait()
        time.sleep(max(0.0, t0 + total - args.warmup * 60 - time.time()))
        obs.stop()
        lab.stop_all()
        episodes = obs.analyze()
        online = obs.detect_at(minutes(started, datetime.now(UTC)))
        result = score(lab.truth(), episodes, online, obs.mdt, time.time())
        result["config"] = vars(args)
        return result
    finally:
        undo_cpu()
        lab.stop_all()
        if own and not args.keep:
            lab.down()


def rescore(args: argparse.Namespace) -> dict[str, Any]:
    """Analyse and score a finished run again from its state (`--state`): its store and
    ground truth stay after the lab is gone, so a run cut short after its last fault (or
    scored by an older iolens) need not be repeated."""
    from iolens.store.duckdb_store import DuckDBStore

    state = Path(args.state)
    obs = Observatory(state / "iolens", master=args.rescore, nodes={}, port=args.port)
    store = DuckDBStore(obs.db, create=False, read_only=True)
    try:
        span = store.query("SELECT min(ts) AS a, max(ts) AS b FROM server_samples").to_pylist()[0]
    finally:
        store.close()
    truth = [json.loads(x) for x in (state / "truth.jsonl").read_text().splitlines() if x]
    episodes = obs.analyze()
    online = obs.detect_at(minutes(span["a"], span["b"] + timedelta(minutes=1)))
    end = span["b"].replace(tzinfo=UTC).timestamp()
    result = score(truth, episodes, online, obs.mdt, end)
    result["config"] = vars(args)
    return result


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--scenarios", type=int, default=20)
    p.add_argument("--quick", action="store_true", help="one scenario of each kind")
    p.add_argument("--concurrent", action="store_true", help="storms may overlap slow chunkservers")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--warmup", type=float, default=15.0, help="minutes before the first fault")
    p.add_argument("--tail", type=float, default=4.0, help="minutes after the last fault")
    p.add_argument("--master-cpu", type=float, default=0.05)
    p.add_argument("--state", default="/tmp/iolens-lab-bench")
    p.add_argument("--port", type=int, default=28492)
    p.add_argument("--port-base", type=int, default=19819)
    p.add_argument("--json", default=None, help="write the full result here")
    p.add_argument("--keep", action="store_true", help="leave the lab up")
    p.add_argument(
        "--rescore", metavar="MASTER", help="score the run kept in --state again (IP:PORT)"
    )
    args = p.parse_args()
    result = rescore(args) if args.rescore else run(args)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1, default=str))
    for kind in KIND_OF:
        r = {k: v for k, v in result[kind].items() if k != "rows"}
        print(kind, json.dumps(r))


if __name__ == "__main__":
    main()
