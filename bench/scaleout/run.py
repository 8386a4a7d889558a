"""Scale-out benchmark (issue 10): a simulated 40,960-node site on a partitioned dataset.

Stages (each can be skipped; every figure is printed as a markdown table and saved as
JSON with `--out`):

1. **simulate** `--nodes` x `--hours` (Beacon's 80 groups of 512 compute nodes, one per
   forwarder) and split it into keyed agent batches per group (`fleet.py`);
2. **write**: one in-process segment writer per group loads its batches in group commits
   (what each ingest server does after HTTP): rows/s of one core, first-pass bytes;
3. **http**: a real `iolens serve --dataset --group` on loopback under the agent traffic
   model of `bench/ingest_load.py` (switch/OSS/forwarder/MDS agents at 1 Hz plus tracer
   batches), next to the same load on a single-DuckDB-file server;
4. **compact**: merge segments and second-pass client records: bytes after each pass,
   ratios per application and per I/O mode;
5. **analyze**: everything `iolens analyze` does, embedded and on a Dask LocalCluster
   with 1 and 2 worker processes (1 thread each), on copies of the compacted dataset;
6. **query**: per-job report latency (`iolens job --json`) on the dataset, cold and warm.

    python bench/scaleout/run.py                       # 40,960 nodes x 1 h (~25 min here)
    python bench/scaleout/run.py --nodes 4096 --skip http
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from bench.common import table
from bench.ingest_load import fleet_payloads, measure_server
from bench.scaleout.fleet import agent_batches

from iolens.model.batch import Batch
from iolens.ship.transport import INGEST_PATH
from iolens.simulate import SimConfig, simulate
from iolens.store.compaction import compact, dataset_bytes, second_pass_ratios
from iolens.store.dataset import DatasetStore
from iolens.store.segments import SegmentWriter
from iolens.store.site_config import RetentionSection

GiB = 2**30
MiB = 2**20


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# -- 1, 2: simulate and write ---------------------------------------------------------------


def simulate_and_write(args: argparse.Namespace, root: Path, res: dict[str, Any]) -> None:
    t = time.perf_counter()
    sim = simulate(SimConfig(nodes=args.nodes, hours=args.hours, seed=args.seed))
    res["simulate_s"] = time.perf_counter() - t
    groups = [f"g{i:02d}" for i in range(max(1, args.nodes // 512))]
    res["groups"] = len(groups)
    res["jobs"] = len(sim.result.jobs)
    say(f"simulated {args.nodes} nodes x {args.hours} h in {res['simulate_s']:.0f} s")
    writers = {g: SegmentWriter(root, g, fsync=True) for g in groups}
    pending: dict[str, list[Batch]] = defaultdict(list)
    rows: dict[str, int] = defaultdict(int)
    batches = 0
    write_s = 0.0

    def flush(g: str) -> float:
        t0 = time.perf_counter()
        writers[g].load_many(pending[g])
        pending[g] = []
        return time.perf_counter() - t0

    # Batches are produced (simulator, splitting) outside the timed part; each group
    # commits every `--commit-batches` batches, as a server commits what `flush_s` brings.
    for g, batch in agent_batches(sim, groups, max_rows=args.batch_rows):
        batches += 1
        for name, tbl in batch.tables().items():
            rows[name] += tbl.num_rows
        pending[g].append(batch)
        if len(pending[g]) >= args.commit_batches:
            write_s += flush(g)
    for g in groups:
        if pending[g]:
            write_s += flush(g)
    stats = [w.stats for w in writers.values()]
    for w in writers.values():
        w.close()
    total = sum(rows.values())
    res["rows"] = dict(rows)
    res["batches"] = batches
    res["write"] = {
        "seconds": write_s,
        "rows_per_s": total / write_s,
        "commits": sum(s["commits"] for s in stats),
        "files": sum(s["files"] for s in stats),
    }
    res["first_pass_bytes"] = dataset_bytes(root)
    say(f"wrote {total:,} rows in {batches:,} batches: {total / write_s:,.0f} rows/s")


# -- 3: HTTP ingest -------------------------------------------------------------------------


def send_async(
    url: str, payloads: list[tuple[bytes, int]], concurrency: int, deadline: float
) -> dict[str, int]:
    """One load-generator process: `concurrency` requests in flight until the deadline.

    Agents of a real site are thousands of independent clients, each waiting for its
    commit; a server that commits every `flush_s` needs that many requests in flight to
    show its throughput, which a few threads cannot give it.
    """
    import asyncio

    async def run() -> dict[str, int]:
        state = {"batches": 0, "rows": 0, "errors": 0}
        it = iter(payloads)
        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

            async def worker() -> None:
                while time.monotonic() < deadline:
                    try:
                        body, rows = next(it)
                    except StopIteration:
                        return
                    try:
                        ok = (await client.post(INGEST_PATH, content=body)).status_code == 200
                    except httpx.HTTPError:
                        ok = False
                    state["batches" if ok else "errors"] += 1
                    state["rows"] += rows if ok else 0

            await asyncio.gather(*(worker() for _ in range(concurrency)))
        return state

    return asyncio.run(run())


def http_stage(args: argparse.Namespace, tmp: Path, res: dict[str, Any]) -> None:
    payloads, need_rows, need_batches = fleet_payloads(args.ship_every, args.periods)
    res["fleet"] = {"rows_per_s": need_rows, "batches_per_s": need_batches}
    out = {}
    for name, extra in (
        (
            "dataset group server",
            ["--dataset", str(tmp / "http-ds"), "--group", "g00", "--flush-every", "2"],
        ),
        ("DuckDB file server (baseline)", ["--db", str(tmp / "http.duckdb")]),
    ):
        say(f"HTTP load on the {name} for {args.http_seconds:.0f} s")
        shares = [payloads[k :: args.procs] for k in range(args.procs)]
        out[name] = measure_server(extra, send_async, shares, args.http_seconds, args.concurrency)
    res["http"] = out


# -- 4: compaction --------------------------------------------------------------------------


def compact_stage(root: Path, res: dict[str, Any]) -> None:
    say("compacting (merge + second pass)")
    rep = compact(root, RetentionSection(settle_s=0, grace_s=0, full_days=100_000))
    res["compact"] = {"seconds": rep.seconds, **rep.summary()}
    res["second_pass_bytes"] = dataset_bytes(root)
    t = time.perf_counter()
    res["ratios_app"] = second_pass_ratios(root, by="app")
    res["ratios_seconds"] = time.perf_counter() - t


def downsample_stage(root: Path, tmp: Path, res: dict[str, Any]) -> None:
    copy = tmp / "downsampled"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("*.lock"))
    rep = compact(copy, RetentionSection(settle_s=0, grace_s=0, full_days=0, downsample_s=60))
    res["downsampled_bytes"] = dataset_bytes(copy)
    res["downsample_seconds"] = rep.seconds
    shutil.rmtree(copy)


# -- 5, 6: analysis and queries -------------------------------------------------------------


def _warm() -> bool:
    import iolens.analyze.components
    import iolens.analyze.distributed
    import iolens.analyze.pipeline  # noqa: F401

    return True


def fresh_copy(root: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(root, dst, ignore=shutil.ignore_patterns("*.lock", "_results"))
    (dst / "_results").mkdir()
    return dst


def analyze_stage(root: Path, tmp: Path, args: argparse.Namespace, res: dict[str, Any]) -> None:
    from distributed import Client, LocalCluster

    from iolens.analyze.components import analyze_components
    from iolens.analyze.distributed import analyze_distributed
    from iolens.analyze.pipeline import analyze_jobs

    out: dict[str, Any] = {}
    copy = fresh_copy(root, tmp / "an-embedded")
    with DatasetStore(copy, threads=1) as store:
        say("analysing embedded (one process, DuckDB 1 thread)")
        t = time.perf_counter()
        analyze_jobs(store)
        t_jobs = time.perf_counter() - t
        analyze_components(store)
        out["embedded, 1 thread"] = {
            "jobs": t_jobs,
            "components": time.perf_counter() - t - t_jobs,
            "total": time.perf_counter() - t,
        }
    for n in (1, 2):
        copy = fresh_copy(root, tmp / f"an-dask{n}")
        say(f"analysing on Dask, {n} worker(s)")
        with (
            LocalCluster(
                n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            Client(cluster) as client,
            DatasetStore(copy) as store,
        ):
            client.run(_warm)  # workers import the analyses once, before the clock starts
            run = analyze_distributed(store, client)
        out[f"Dask, {n} worker(s) x 1 thread"] = {**run.seconds, "tasks": run.tasks}
    res["analyze"] = out
    res["ratios_io_mode"] = second_pass_ratios(copy, by="io_mode")


def query_stage(
    root: Path, args: argparse.Namespace, res: dict[str, Any], key: str = "second pass"
) -> None:
    from iolens.present import views

    with DatasetStore(root, read_only=True) as store:
        ids = store.query("SELECT job_id FROM jobs ORDER BY job_id").column("job_id").to_pylist()
    step = max(1, len(ids) // args.query_jobs)
    sample = ids[::step][: args.query_jobs]
    cold, warm = [], []
    for j in sample:
        t = time.perf_counter()
        store = DatasetStore(root, read_only=True)
        views.job(store, j)
        cold.append(time.perf_counter() - t)
        t = time.perf_counter()
        views.job(store, j)
        warm.append(time.perf_counter() - t)
        store.close()
    res.setdefault("query", {})[key] = {
        "jobs": len(sample),
        "cold_median": statistics.median(cold),
        "cold_max": max(cold),
        "warm_median": statistics.median(warm),
        "warm_max": max(warm),
    }


# -- report ---------------------------------------------------------------------------------


def report(res: dict[str, Any], args: argparse.Namespace) -> None:
    hours = args.hours
    print(
        f"\n{args.nodes:,} nodes x {hours:g} h, seed {args.seed}: {res.get('jobs')} jobs, "
        f"{res.get('groups')} groups; simulated in {res.get('simulate_s', 0):.0f} s\n"
    )
    if "write" in res:
        w = res["write"]
        rows = res["rows"]
        print(
            table(
                ["figure", "value"],
                [
                    ["agent batches", f"{res['batches']:,}"],
                    *[[f"rows: {k}", f"{v:,}"] for k, v in sorted(rows.items())],
                    ["segment writer, one core", f"{w['rows_per_s']:,.0f} rows/s"],
                    ["commits / segment files", f"{w['commits']:,} / {w['files']:,}"],
                ],
            )
        )
    if "http" in res:
        f = res["fleet"]
        print(
            f"\nFleet model at 1 Hz: {f['rows_per_s']:,.0f} rows/s in "
            f"{f['batches_per_s']:,.0f} batches/s (agents ship every {args.ship_every} s)\n"
        )
        print(
            table(
                [
                    "server",
                    "batches/s",
                    "rows/s",
                    "server CPU",
                    "CPU ms/batch",
                    "batches/s per core (est.)",
                    "peak RSS",
                ],
                [
                    [
                        name,
                        f"{h['batches_per_s']:,.0f}",
                        f"{h['rows_per_s']:,.0f}",
                        f"{100 * h['cpu']:.0f} %",
                        f"{1000 * h['cpu'] / max(h['batches_per_s'], 1e-9):.2f}",
                        f"{h['batches_per_s'] / max(h['cpu'], 1e-9):,.0f}",
                        f"{h['rss_mib']:,.0f} MiB",
                    ]
                    for name, h in res["http"].items()
                ],
            )
        )
    if "first_pass_bytes" in res:
        day = 24 / hours
        first, second = res["first_pass_bytes"], res.get("second_pass_bytes", {})
        sorted1 = res.get("first_pass_compacted", {}).get("bytes", {})
        down = res.get("downsampled_bytes", {})
        names = sorted(set(first) | set(second))
        print("\nBytes on disk (per day: x" + f"{day:g})\n")
        print(
            table(
                ["table", "as ingested", "compacted", "+ second pass", "+ downsampled (60 s)"],
                [
                    [
                        n,
                        f"{first.get(n, 0) / MiB:,.1f} MiB",
                        f"{sorted1.get(n, 0) / MiB:,.1f} MiB",
                        f"{second.get(n, 0) / MiB:,.1f} MiB",
                        f"{down.get(n, 0) / MiB:,.1f} MiB" if down else "-",
                    ]
                    for n in names
                ]
                + [
                    [
                        "**per day**",
                        f"{sum(first.values()) * day / GiB:,.2f} GiB",
                        f"{sum(sorted1.values()) * day / GiB:,.2f} GiB",
                        f"{sum(second.values()) * day / GiB:,.2f} GiB",
                        f"{sum(down.values()) * day / GiB:,.2f} GiB" if down else "-",
                    ]
                ],
            )
        )
    for key, label in (("ratios_app", "app"), ("ratios_io_mode", "io_mode")):
        if key in res:
            print(f"\nSecond pass per {label}\n")
            print(
                table(
                    [label, "records", "merged rows", "rows x", "1st MiB", "2nd MiB", "bytes x"],
                    [
                        [
                            r[label],
                            f"{r['records']:,}",
                            f"{r['merged_rows']:,}",
                            f"{r['row_ratio']}",
                            f"{r['first_pass_bytes'] / MiB:.2f}",
                            f"{r['second_pass_bytes'] / MiB:.2f}",
                            f"{r['byte_ratio']}",
                        ]
                        for r in res[key]
                    ],
                )
            )
    if "analyze" in res:
        print("\nAnalysis (all jobs, then components)\n")
        print(
            table(
                ["run", "per-job tasks s", "+ windows s", "jobs s", "components s", "total s"],
                [
                    [
                        name,
                        f"{a['reports']:.1f}" if "reports" in a else "-",
                        f"{a['windows']:.1f}" if "windows" in a else "-",
                        f"{a['jobs']:.1f}",
                        f"{a.get('components', 0):.1f}",
                        f"{a['total']:.1f}",
                    ]
                    for name, a in res["analyze"].items()
                ],
            )
        )
    if "query" in res:
        print("\nPer-job report (`iolens job ID --json`) on the dataset\n")
        print(
            table(
                ["client records", "jobs", "cold median s", "cold max s", "warm median s"],
                [
                    [
                        k,
                        str(q["jobs"]),
                        f"{q['cold_median']:.2f}",
                        f"{q['cold_max']:.2f}",
                        f"{q['warm_median']:.2f}",
                    ]
                    for k, q in res["query"].items()
                ],
            )
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=40_960)
    ap.add_argument("--hours", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--batch-rows", type=int, default=20_000)
    ap.add_argument("--commit-batches", type=int, default=32)
    ap.add_argument("--http-seconds", type=float, default=20.0)
    ap.add_argument("--procs", type=int, default=2, help="HTTP load generator processes.")
    ap.add_argument(
        "--concurrency", type=int, default=256, help="Requests in flight per generator process."
    )
    ap.add_argument("--ship-every", type=int, default=10)
    ap.add_argument("--periods", type=int, default=3)
    ap.add_argument("--query-jobs", type=int, default=20)
    ap.add_argument("--skip", default="", help="Comma list: http, analyze, downsample, query.")
    ap.add_argument("--keep", type=Path, help="Build the dataset here and keep it.")
    ap.add_argument("--reuse", type=Path, help="Only analyse and query this kept dataset.")
    ap.add_argument("--out", type=Path, help="Write all figures as JSON here.")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    res: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        root = args.keep or tmp / "ds"
        if "http" not in skip:
            http_stage(args, tmp, res)
        if args.reuse:
            root = args.reuse  # compacted by an earlier run (--keep)
        else:
            simulate_and_write(args, root, res)
            first = tmp / "first-pass"
            shutil.copytree(root, first, ignore=shutil.ignore_patterns("*.lock"))
            say("compacting a copy without the second pass")
            keep = RetentionSection(settle_s=0, grace_s=0, full_days=100_000)
            fp = compact(first, keep, second_pass=False)
            res["first_pass_compacted"] = {"seconds": fp.seconds, "bytes": dataset_bytes(first)}
            compact_stage(root, res)
            if "query" not in skip:
                query_stage(first, args, res, "first pass, compacted")
            shutil.rmtree(first)
            if "downsample" not in skip:
                downsample_stage(root, tmp, res)
        if "query" not in skip:
            query_stage(root, args, res, "second pass")
        if "analyze" not in skip:
            analyze_stage(root, tmp, args, res)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(res, indent=1, default=str))
    report(res, args)


if __name__ == "__main__":
    main()
