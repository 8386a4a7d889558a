"""Load test of the ingest server with the agent traffic of a 40,960-node system.

Beacon's TaihuLight ratios: 80 forwarding nodes, 288 OSS (864 OSTs), 1 MDS, ~6,000
switches, all sampled at 1 Hz, plus tracer batches from the compute nodes. Every agent
ships its 1 Hz samples every `--ship-every` seconds. A real `iolens serve` runs on
loopback; client threads send pre-encoded batches for `--seconds` (bounded) and the
server's CPU and memory are read from /proc.

    python bench/ingest_load.py [--seconds 30] [--clients 8] [--ship-every 10]
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import httpx
import numpy as np
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table
from bench.store_append import client_records
from iolens.model.batch import Batch
from iolens.model.schema import METRICS
from iolens.ship import wire
from iolens.ship.transport import INGEST_PATH

# (agent kind, agents, components per agent, metrics per component)
FLEET = [("switch", 6000, 1, 8), ("oss", 288, 3, 12), ("forwarder", 80, 1, 12), ("mds", 1, 1, 40)]
TRACE_RECORDS_PER_S = 20_000  # ~100 GB/day of raw trace before compression (Beacon 2.2)


def agent_batch(kind: str, agent: int, comps: int, metrics: int, seconds: int, t0: float) -> Batch:
    n = comps * metrics * seconds
    ts = ((t0 + np.repeat(np.arange(seconds), comps * metrics)) * 1e6).astype("datetime64[us]")
    comp = np.tile(np.repeat([f"{kind}{agent:05d}-{c}" for c in range(comps)], metrics), seconds)
    metric = np.tile([f"m{m:02d}" for m in range(metrics)], comps * seconds)
    t = pa.table(
        {
            "ts": ts,
            "interval_s": np.ones(n),
            "kind": [kind] * n,
            "component_id": comp,
            "job_id": pa.nulls(n, pa.string()),
            "metric": metric,
            "value": np.random.default_rng(agent).random(n),
        },
        schema=METRICS,
    )
    return Batch(source=f"agent:{kind}{agent}", key=f"{kind}{agent}:{t0}", metrics=t)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_stats(pid: int) -> tuple[float, int]:
    """(CPU seconds used, resident bytes) of a process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    rss_pages = int(fields[21])
    return (int(fields[11]) + int(fields[12])) / ticks, rss_pages * os.sysconf("SC_PAGE_SIZE")


def send_all(
    url: str, payloads: list[tuple[bytes, int]], threads: int, deadline: float
) -> dict[str, int]:
    """One load-generator process: `threads` threads posting payloads until the deadline."""
    lock = threading.Lock()
    state = {"next": 0, "batches": 0, "rows": 0, "errors": 0}

    def client() -> None:
        with httpx.Client(base_url=url, timeout=60) as c:
            while time.monotonic() < deadline:
                with lock:
                    i = state["next"]
                    state["next"] += 1
                if i >= len(payloads):
                    return
                body, rows = payloads[i]
                ok = c.post(INGEST_PATH, content=body).status_code == 200
                with lock:
                    state["batches" if ok else "errors"] += 1
                    state["rows"] += rows if ok else 0

    pool = [threading.Thread(target=client) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    del state["next"]
    return state


def fleet_payloads(every: int, periods: int) -> tuple[list[tuple[bytes, int]], float, float]:
    """Pre-encoded shipping periods of the whole fleet plus trace batches (the generator then
    spends its CPU on sending, not encoding); and the rows and batches per second the fleet
    sends."""
    payloads: list[tuple[bytes, int]] = []
    trace_batches = 40
    per = TRACE_RECORDS_PER_S * every // trace_batches
    recs = client_records(per * trace_batches, seed=3)
    for period in range(periods):
        t0 = 1_741_000_000.0 + period * every
        for kind, agents, comps, metrics in FLEET:
            for a in range(agents):
                b = agent_batch(kind, a, comps, metrics, every, t0)
                payloads.append((wire.encode(b), b.rows()))
        for i in range(trace_batches):
            b = Batch(
                source="tracer", key=f"trace:{period}:{i}", client_io=recs.slice(i * per, per)
            )
            payloads.append((wire.encode(b), per))
    return payloads, sum(r for _, r in payloads) / periods / every, len(payloads) / periods / every


def measure_server(
    serve_args: list[str],
    sender: Callable[..., dict[str, int]],
    shares: list[list[tuple[bytes, int]]],
    seconds: float,
    *sender_args: object,
) -> dict[str, float]:
    """A real `iolens serve` (with `serve_args`) on loopback, loaded by one process per share
    running `sender(url, share, *sender_args, deadline)`: throughput, CPU and peak RSS."""
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "iolens", "serve", "--port", str(port), *serve_args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            break
        except httpx.HTTPError:
            time.sleep(0.1)
    cpu0, _ = proc_stats(server.pid)
    started = time.monotonic()
    deadline = started + seconds
    peak = 0
    # Load comes from separate processes, so the generator's own GIL does not cap what the
    # server is shown.
    with ProcessPoolExecutor(len(shares)) as pool:
        futures = [pool.submit(sender, url, s, *sender_args, deadline) for s in shares]
        while not all(f.done() for f in futures):
            peak = max(peak, proc_stats(server.pid)[1])
            time.sleep(0.5)
        results = [f.result() for f in futures]
    elapsed = time.monotonic() - started
    cpu1, _ = proc_stats(server.pid)
    server.send_signal(signal.SIGTERM)
    server.wait(timeout=120)
    done = {k: sum(r[k] for r in results) for k in ("batches", "rows", "errors")}
    return {
        "batches_per_s": done["batches"] / elapsed,
        "rows_per_s": done["rows"] / elapsed,
        "errors": done["errors"],
        "cpu": (cpu1 - cpu0) / elapsed,
        "rss_mib": peak / 2**20,
        "seconds": elapsed,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--clients", type=int, default=4, help="Threads per generator process.")
    ap.add_argument("--procs", type=int, default=2, help="Load generator processes.")
    ap.add_argument("--ship-every", type=int, default=10)
    ap.add_argument("--periods", type=int, default=6, help="Shipping periods to pre-encode.")
    args = ap.parse_args()
    every = args.ship_every

    payloads, needed_rows, needed_batches = fleet_payloads(every, args.periods)

    with tempfile.TemporaryDirectory() as tmp:
        shares = [payloads[k :: args.procs] for k in range(args.procs)]
        got = measure_server(
            ["--db", f"{tmp}/load.duckdb"], send_all, shares, args.seconds, args.clients
        )

    rows_s, batches_s, elapsed = got["rows_per_s"], got["batches_per_s"], got["seconds"]
    print(
        f"Fleet per second at 1 Hz: {needed_rows:,.0f} rows in {needed_batches:,.0f} "
        f"batches (agents ship every {every} s); {args.procs} x {args.clients} client threads, "
        f"{elapsed:.0f} s on loopback\n"
    )
    print(
        table(
            ["figure", "value"],
            [
                ["batches/s sustained", f"{batches_s:,.0f}"],
                ["rows/s sustained", f"{rows_s:,.0f}"],
                [
                    "headroom vs the 40,960-node fleet",
                    f"{rows_s / needed_rows:.2f}x rows, {batches_s / needed_batches:.2f}x batches",
                ],
                ["errors", str(got["errors"])],
                ["server CPU (of one core)", f"{100 * got['cpu']:.0f} %"],
                ["server peak RSS", f"{got['rss_mib']:,.0f} MiB"],
            ],
        )
    )


if __name__ == "__main__":
    main()
