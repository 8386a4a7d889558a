"""Page-render times of the web UI on the simulated 1,024-node x 2 h store.

A real `iolens serve` runs on loopback (background analyses off, so nothing else competes);
one client logs in as a user and as an admin and fetches each page `--repeat` times. The
figure is the server's own time per request (its `Server-Timing` header: routing, the
authorisation gate, queries, rendering), median and 90th percentile, plus the first
(cold-cache) request and the client-side wall time. `--extra-jobs N` pads the store with N
synthetic finished jobs (scheduler rows and summaries) to time the pages on a large store.

    python bench/web_render.py [--repeat 20] [--extra-jobs 100000] [--db FILE]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.loopback import free_port, start_server, stop

from bench.common import table


def build_store(path: Path, extra_jobs: int) -> dict[str, Any]:
    """Simulate, load, analyse (jobs and components); add accounts; returns names/ids."""
    from iolens.analyze.components import analyze_components
    from iolens.analyze.pipeline import analyze_jobs
    from iolens.present.web.accounts import add_user
    from iolens.present.web.episode_views import episode_key
    from iolens.simulate import SimConfig, simulate
    from iolens.store import DuckDBStore

    sim = simulate(SimConfig(nodes=1024, hours=2.0, seed=3))
    with DuckDBStore(path) as store:
        sim.load(store)
        analyze_jobs(store)
        analyze_components(store)
        job = store.query(
            'SELECT f.subject_id AS job_id, j."user" FROM findings f JOIN jobs j '
            "ON j.job_id = f.subject_id ORDER BY f.subject_id LIMIT 1"
        ).to_pylist()[0]
        others = (
            store.query(
                'SELECT job_id FROM jobs WHERE "user" = ? AND job_id <> ? ORDER BY job_id',
                [job["user"], job["job_id"]],
            )
            .column("job_id")
            .to_pylist()
        )
        ep = store.query(
            "SELECT kind, component_id, \"start\" FROM anomalies WHERE kind = 'slow_ost' LIMIT 1"
        ).to_pylist()[0]
        ost = store.query(
            "SELECT DISTINCT component_id FROM server_samples WHERE job_id = ? AND kind = 'ost' "
            "ORDER BY 1 LIMIT 1",
            [job["job_id"]],
        ).to_pylist()[0]["component_id"]
        if extra_jobs:
            pad(store, extra_jobs, job["user"])
        return {
            "job": job["job_id"],
            "user": job["user"],
            "ost": ost,
            "others": others,
            "episode": episode_key(ep["kind"], ep["component_id"], ep["start"]),
            "user_token": add_user(store, job["user"], replace=True),
            "admin_token": add_user(store, "root", admin=True, replace=True),
        }


def pad(store, n: int, user: str) -> None:
    """N finished synthetic jobs over the last year, a tenth of them `user`'s."""
    from iolens.model.schema import JOB_SUMMARIES, JOBS

    base = store.query('SELECT min("start") AS t FROM jobs').to_pylist()[0]["t"]
    apps = ["wrf", "cesm", "lammps", "vasp", "gromacs", "awp", "xcfd", "shentu", "dndc"]
    jobs, sums = [], []
    for i in range(n):
        start = base - timedelta(minutes=5 * (i + 1))
        jid = f"9{i:07d}"
        jobs.append(
            {
                "job_id": jid,
                "user": user if i % 10 == 0 else f"user{i % 500:03d}",
                "app": apps[i % len(apps)],
                "nodes": [f"cn{(i * 7) % 1024:05d}"],
                "nprocs": 32,
                "start": start,
                "end": start + timedelta(minutes=3),
                "state": "COMPLETED",
                "source": "bench",
            }
        )
        sums.append(
            {
                "job_id": jid,
                "io_mode": "N-N",
                "read_bytes": 2**30 + i,
                "write_bytes": 2**29 + i,
                "read_bw_avg": 1e8,
                "write_bw_avg": 5e7,
                "io_time_s": 30.0 + i % 100,
                "md_ops": 1000,
                "md_ops_rate": 10.0,
                "iops_avg": 100.0,
                "findings": 0,
                "analyzed": start + timedelta(minutes=4),
            }
        )
    with store.transaction():
        store.append("jobs", pa.Table.from_pylist(jobs, schema=JOBS))
        store.append("job_summaries", pa.Table.from_pylist(sums, schema=JOB_SUMMARIES))


def server_ms(res: httpx.Response) -> float:
    timing = res.headers.get("server-timing", "")
    return float(timing.split("dur=")[1]) if "dur=" in timing else float("nan")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--extra-jobs", type=int, default=0)
    ap.add_argument("--keep", type=Path, help="keep the built store here")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="iolens-web-bench-"))
    db = tmp / "web.duckdb"
    t0 = time.perf_counter()
    ids = build_store(db, args.extra_jobs)
    print(f"store built in {time.perf_counter() - t0:.0f} s ({args.extra_jobs} extra jobs)")
    if args.keep:
        shutil.copyfile(db, args.keep)
    port = free_port()
    proc = start_server(
        db, port, tmp / "server.log", "--analyze-every", "0", "--components-every", "0"
    )
    base = f"http://127.0.0.1:{port}"
    user_pages = [
        ("my jobs", "/jobs"),
        ("my jobs, sorted by bytes", "/jobs?sort=bytes&order=desc"),
        ("job page", f"/jobs/{ids['job']}"),
        ("job: OST during the job", f"/jobs/{ids['job']}/components/{ids['ost']}"),
        ("job: HTML report", f"/jobs/{ids['job']}/report"),
        ("GET /api/jobs/{id}", f"/api/jobs/{ids['job']}"),
        ("GET /api/jobs", "/api/jobs?limit=1000"),
    ]
    admin_pages = [
        ("admin: system now", "/admin"),
        ("admin: load by hour", "/admin/load"),
        ("admin: anomalies", "/admin/anomalies"),
        ("admin: anomaly episode", f"/admin/anomalies/{ids['episode']}"),
        ("admin: interference", "/admin/interference"),
        ("admin: MDS", "/admin/mds"),
        ("admin: switches", "/admin/switches"),
        ("admin: top users/apps", "/admin/top"),
        ("admin: component", f"/admin/components/{ids['ost']}"),
        ("admin: all jobs", "/jobs"),
    ]
    rows = []
    try:
        for token, pages in ((ids["user_token"], user_pages), (ids["admin_token"], admin_pages)):
            with httpx.Client(base_url=base, timeout=300, follow_redirects=True) as c:
                c.get(f"/jobs?token={token}").raise_for_status()  # session cookie
                for name, path in pages:
                    first = c.get(path)
                    first.raise_for_status()
                    srv, wall = [], []
                    for _ in range(args.repeat):
                        w0 = time.perf_counter()
                        res = c.get(path)
                        wall.append((time.perf_counter() - w0) * 1000)
                        srv.append(server_ms(res))
                    srv.sort()
                    rows.append(
                        [
                            name,
                            f"{server_ms(first):.0f}",
                            f"{statistics.median(srv):.1f}",
                            f"{srv[int(0.9 * (len(srv) - 1))]:.1f}",
                            f"{statistics.median(wall):.1f}",
                            f"{len(first.content) / 1024:.0f}",
                        ]
                    )
        # Job pages nobody opened yet: everything computed (modules already imported).
        with httpx.Client(base_url=base, timeout=300, follow_redirects=True) as c:
            c.get(f"/jobs?token={ids['user_token']}").raise_for_status()
            others = ids["others"][:6]
            cold = {
                "job page": sorted(server_ms(c.get(f"/jobs/{j}")) for j in others),
                "HTML report": sorted(server_ms(c.get(f"/jobs/{j}/report")) for j in others),
            }
        for what, ms in cold.items():
            rows.append(
                [
                    f"{what}, cold cache ({len(ms)} other jobs)",
                    f"{ms[-1]:.0f} (max)",
                    f"{statistics.median(ms):.1f}",
                    "-",
                    "-",
                    "-",
                ]
            )
    finally:
        stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        table(
            ["page", "first (ms)", "median (ms)", "p90 (ms)", "client wall (ms)", "KiB"],
            rows,
        )
    )


if __name__ == "__main__":
    main()
