"""Predicted against measured savings on a real distributed file system: the MooseFS lab
(issue 22, part 5).

    sudo .venv/bin/python bench/lab_savings.py --pairs 3

Each change the lab can apply runs before and after as a real MPI job under the real
tracer on a lab node's FUSE mount, in interleaved pairs (before, after, before, after, ...),
after one "history" run of each "after" program (a site has history):

- 4 KiB -> 1 MiB requests, a file per process (`mpiio_bench nn`, independent calls);
- the same on one shared file (`mpiio_bench n1i`);
- N-1 -> N-N: one shared file written collectively (`mpiio_bench n1`) -> a file per
  process (`nn`), 1 MiB requests both;
- collective buffering: the same 4 KiB calls to one shared file made collective
  (`mpiio_bench n1i` -> `n1`, `--cb-mib` per rank), so the ranks' blocks of one call reach
  the file system as one request of `ranks` x 4 KiB. Scored against what IOL004 says
  collective calls would save (`gain.inputs.collective_s`); its headline saving, for
  1 MiB requests, is printed beside it;
- fewer small files: `mdstorm` creating, stat-ing and unlinking 3,000 -> 30 files per rank.

The node mounts run with direct I/O and the smallest write buffer (`lab_jobs.
DIRECT_MOUNT_OPTS`), so every request is a round trip through FUSE to mfsmount and on to the
chunkservers or the master, as on a parallel file system. iolens watches as a site runs it
(`tests/lab/observe.py`), then `iolens analyze` judges the stored traces and each "before"
job's findings predict the saving: the `gain.seconds` of the findings whose fix is the
change (Case.codes; none fired = no saving predicted). Measured: the programs' own clocks,
scored with the mini cluster's rules (`tests/savings_check.py`). Every finding fired on each
run is kept in the JSON (`--json`), so a change no rule recommends at this scale shows as
such. The lab is down when this exits, also on an error or a signal (unless `--keep`).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "src")]

from tests.lab.harness import Lab, run  # noqa: E402
from tests.lab.observe import Observatory  # noqa: E402
from tests.savings_check import Row, io_seconds, score  # noqa: E402

from bench.lab_jobs import build, mpirun_traced, observed_lab, records  # noqa: E402

WHEN = ("before", "after")


@dataclass
class Case:
    key: str
    label: str
    codes: tuple[str, ...]  # the findings whose fix this change is
    prog: str  # mpiio_bench or mdstorm
    before: list[str]  # the program's arguments after the program ("{dir}": the run's dir)
    after: list[str]
    ranks: int
    gain: str = "seconds"  # the finding's figure for this change: `gain.seconds` or an input
    runs: dict[str, list[dict[str, Any]]] = field(
        default_factory=lambda: {"history": [], "before": [], "after": []}
    )


def cases(args: argparse.Namespace) -> list[Case]:
    """The changes, sized by the options: every rank moves `--mib` MiB (written, then read);
    the N-1 case runs `--n1-ranks` ranks (IOL001 asks for >= 32 and >= 1 GiB)."""
    small, big, r = args.mib * 256, args.mib, args.ranks  # 4 KiB and 1 MiB blocks
    n, few, r1 = args.files, args.files_after, args.n1_ranks or args.ranks
    return [
        Case("nn", "4 KiB -> 1 MiB requests, file per process", ("IOL004",), "mpiio_bench",
             ["nn", "{dir}", "4", str(small)], ["nn", "{dir}", "1024", str(big)], r),
        Case("n1i", "4 KiB -> 1 MiB requests, one shared file", ("IOL004",), "mpiio_bench",
             ["n1i", "{dir}", "4", str(small)], ["n1i", "{dir}", "1024", str(big)], r),
        Case("n1nn", f"N-1 (collective) -> N-N, 1 MiB requests, {r1} ranks",
             ("IOL001", "IOL002"), "mpiio_bench",
             ["n1", "{dir}", "1024", str(big)], ["nn", "{dir}", "1024", str(big)], r1),
        Case("cb", "independent -> collective 4 KiB calls, one shared file", ("IOL004",),
             "mpiio_bench", ["n1i", "{dir}", "4", str(args.cb_mib * 256)],
             ["n1", "{dir}", "4", str(args.cb_mib * 256)], r, gain="collective_s"),
        Case("md", f"{n:,} -> {few:,} files per rank", ("IOL005",), "mdstorm",
             ["{dir}", str(n)], ["{dir}", str(few)], r),
    ]  # fmt: skip


class Runner:
    """Runs the jobs on node c1's mount, each in its own directory, and removes a run's
    files a while after it ended (once the agent has had a round to ask their layout),
    so the chunkservers' small disks never fill."""

    def __init__(self, args: argparse.Namespace, lab: Lab, obs: Observatory) -> None:
        self.args, self.lab, self.obs = args, lab, obs
        bindir = Path(args.state) / "bin"
        self.exe = {name: build(bindir, name) for name in ("mpiio_bench", "mdstorm")}
        top = lab.mount / "savings"
        shutil.rmtree(top, ignore_errors=True)
        top.mkdir(parents=True)
        run(["mfssettrashtime", "0", str(top)])  # removed files free their chunks now
        self.node_top = Path(lab.nodes["c1"].mount) / "savings"
        self.done: list[tuple[float, Path]] = []
        self.seq = 0

    def job(self, case: Case, when: str) -> dict[str, Any]:
        self.tidy(self.obs.interval + 2)
        self.seq += 1
        job = f"{case.key}-{when}-{self.seq}"
        where = self.node_top / job
        where.mkdir()
        argv = [str(self.exe[case.prog]), *(a.replace("{dir}", str(where)) for a in getattr(
            case, "before" if when == "before" else "after"))]  # fmt: skip
        start = time.time()
        recs = records(mpirun_traced(argv, job, case.ranks, self.obs.trace_spool))
        secs = io_seconds(recs)
        self.done.append((time.monotonic(), self.lab.mount / "savings" / job))
        print(f"{job}: I/O {secs:.3f} s (wall {time.time() - start:.1f} s)", flush=True)
        time.sleep(self.args.gap)
        return {"job": job, "io_s": secs, "records": recs, "start": start, "end": time.time()}

    def tidy(self, older: float) -> None:
        now = time.monotonic()
        keep = []
        for t, d in self.done:
            if now - t >= older:
                shutil.rmtree(d, ignore_errors=True)
            else:
                keep.append((t, d))
        self.done = keep


def run_pairs(args: argparse.Namespace, lab: Lab, obs: Observatory) -> list[Case]:
    todo = [c for c in cases(args) if c.key in args.cases]
    r = Runner(args, lab, obs)
    for case in todo:
        case.runs["history"].append(r.job(case, "after"))
    for _ in range(args.pairs):
        for case in todo:
            for when in WHEN:
                case.runs[when].append(r.job(case, when))
    time.sleep(obs.interval + 2)  # the agents' last rounds see the last files
    r.tidy(0)
    return todo


def findings(obs: Observatory, job: str) -> dict[str, dict[str, Any]]:
    """The job's findings by code, from `iolens job ID --json`."""
    out = json.loads(obs._run("job", job, "--db", str(obs.db), "--json"))
    return {f["code"]: f for f in out.get("findings") or []}


def predicted(
    found: dict[str, dict[str, Any]], codes: tuple[str, ...], key: str = "seconds"
) -> float:
    """The saving iolens promises for the change: the gain of the findings recommending
    it (0 when none fired: no saving promised); `key` other than "seconds" names the
    figure among the gain's inputs (IOL004's `collective_s`)."""
    out = 0.0
    for c in codes:
        gain = (found.get(c) or {}).get("gain") or {}
        out += float((gain if key == "seconds" else gain.get("inputs") or {}).get(key) or 0.0)
    return out


def analyse(obs: Observatory, todo: list[Case]) -> tuple[list[Row], list[dict[str, Any]]]:
    # the analysis widens each trace-only job's row to all its processes first
    # (`store.queries.refresh_traced_jobs`: found missing by this bench, 2026-12-06)
    obs._run("analyze", "--db", str(obs.db))
    rows, detail = [], []
    for case in todo:
        pred, fired = [], []
        for r in case.runs["before"]:
            found = findings(obs, r["job"])
            pred.append(predicted(found, case.codes, case.gain))
            fired.append(sorted(found))
            detail.append({"case": case.key, "job": r["job"], "findings": found})
        for r in case.runs["after"]:
            detail.append({"case": case.key, "job": r["job"], "findings": findings(obs, r["job"])})
        before = [r["io_s"] for r in case.runs["before"]]
        pairs = [b - a["io_s"] for b, a in zip(before, case.runs["after"], strict=True)]
        hit = sorted({c for f in fired for c in f if c in case.codes})
        others = sorted({c for f in fired for c in f if c not in case.codes})
        col = ", ".join(hit) if hit else "none fired"
        if others:
            col += f" (also: {', '.join(others)})"
        rows.append(Row(case.label, col, before, pairs, pred, recommended=bool(hit)))
    return rows, detail


def report(rows: list[Row], meta: dict[str, Any]) -> str:
    result = score(rows)
    head = (
        f"MooseFS lab, {meta['start']} - {meta['end']} UTC, `{meta['command']}`; load "
        f"average {meta['load_start']} at the start, {meta['load_end']} at the end"
    )
    return head + "\n\n" + result.table()


def load_avg() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=3, help="before/after pairs per change")
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--n1-ranks", type=int, default=0, help="ranks of the N-1 case (--ranks)")
    p.add_argument("--mib", type=int, default=64, help="MiB each rank writes (and reads)")
    p.add_argument("--files", type=int, default=3000, help="files per rank before")
    p.add_argument("--files-after", type=int, default=30, help="files per rank after")
    p.add_argument("--cb-mib", type=int, default=16, help="MiB per rank of the cb case")
    p.add_argument("--cases", nargs="+", default=["nn", "n1i", "n1nn", "cb", "md"],
                   choices=["nn", "n1i", "n1nn", "cb", "md"])  # fmt: skip
    p.add_argument("--gap", type=float, default=2.0, help="seconds between runs")
    p.add_argument("--state", default="/tmp/iolens-lab-savings")
    p.add_argument("--port", type=int, default=28496)
    p.add_argument("--port-base", type=int, default=19719)
    p.add_argument(
        "--json",
        default=None,
        help="the runs, findings and table, for --rescore (default STATE/run.json)",
    )
    p.add_argument("--md", default=None, help="write the table here too")
    p.add_argument("--keep", action="store_true", help="leave the lab up")
    p.add_argument("--rescore", metavar="RUN_JSON", help="analyse a kept run's store again")
    args = p.parse_args()
    if args.pairs < 1 or args.ranks < 1 or args.mib < 1 or args.files < 1:
        p.error("--pairs, --ranks, --mib and --files must be >= 1")
    state = Path(args.state)
    meta: dict[str, Any] = {
        "command": shlex.join(["bench/lab_savings.py", *sys.argv[1:]]),
        "start": datetime.now(UTC).strftime("%Y-%m-%d %H:%M"),
        "load_start": load_avg(),
    }
    if args.rescore:
        kept = json.loads(Path(args.rescore).read_text())
        todo = [Case(**{**c, "codes": tuple(c["codes"])}) for c in kept["cases"]]
        for c in todo:  # a run kept before a case had its own figure
            c.gain = next((d.gain for d in cases(args) if d.key == c.key), c.gain)
        meta = kept["meta"]
        obs = Observatory(state / "iolens", master="", nodes={}, port=args.port)
    else:
        if os.geteuid() != 0:
            p.error("the MooseFS lab needs root")
        shutil.rmtree(state / "iolens", ignore_errors=True)  # a fresh store: fresh job ids
        os.environ.setdefault("LAB_DISK_MB", "4096")  # sparse images: room for lagging frees
        with observed_lab(state, args.port_base, args.port, keep=args.keep) as (lab, obs):
            todo = run_pairs(args, lab, obs)
            obs.stop()  # the agents' last rounds ship, the server closes the store
        meta["end"] = datetime.now(UTC).strftime("%H:%M")
        meta["load_end"] = load_avg()
    rows, detail = analyse(obs, todo)
    table = report(rows, meta)
    headline = [predicted(d["findings"], ("IOL004",)) for d in detail if d["case"] == "cb"
                and d["job"].startswith("cb-before")]  # fmt: skip
    if headline:
        table += (
            "\n\nCollective buffering: IOL004's headline saving (1 MiB requests) for the "
            f"same runs (s): {', '.join(f'{x:.3g}' for x in headline)}"
        )
    print(table)
    (state / "savings.md").write_text(table + "\n")
    if args.md:
        Path(args.md).write_text(table + "\n")
    out = {"meta": meta, "cases": [asdict(c) for c in todo], "detail": detail,
               "table": table, "median_error": score(rows).median_error,
           "io_s": {c.key: {w: statistics.median(r["io_s"] for r in c.runs[w])
                            for w in WHEN} for c in todo}}  # fmt: skip
    Path(args.json or state / "run.json").write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
