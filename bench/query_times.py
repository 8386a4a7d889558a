"""Query times of the web UI with and without the plot cache (Beacon Figure 13).

Beacon timed 2,000 real queries and showed, as a CDF, what its in-memory cache buys. Here
the real app (`create_app`, in process, over the simulated 1,024-node x 2 h store) answers
the same mix of user and admin queries `--rounds` times twice: once as served (the plot
cache on), once with a cache that keeps nothing (every query computed). The times are the
server's own (`present/web/query_times.py`: from routing to the last byte), so what is
measured is what the admins' `/admin/sysviews` page shows for a live server.

    python bench/query_times.py [--rounds 10] [--svg FILE] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table
from bench.web_render import build_store


def paths(ids: dict[str, Any]) -> list[tuple[str, str]]:
    """(token kind, path): what users and admins ask, pages and REST alike."""
    job, ost = ids["job"], ids["ost"]
    user = [f"/jobs/{job}", f"/api/jobs/{job}", f"/jobs/{job}/components/{ost}"]
    user += [f"/jobs/{j}" for j in ids["others"][:4]]
    admin = ["/admin", "/admin/load", "/admin/mds", "/admin/top", "/admin/interference",
             "/admin/switches", "/admin/sysviews"]  # fmt: skip
    admin.append(f"/admin/anomalies/{ids['episode']}")
    admin += [f"/api/admin/sysview/{n}" for n in ("durations", "corehours", "modes", "osts")]
    return [("user_token", p) for p in user] + [("admin_token", p) for p in admin]


def run(db: Path, ids: dict[str, Any], rounds: int, cached: bool) -> dict[str, Any]:
    from fastapi.testclient import TestClient

    from iolens.present.web.app import create_app
    from iolens.present.web.cache import PlotCache
    from iolens.store import DuckDBStore

    with DuckDBStore(db) as store:
        app = create_app(store)
        web = app.state.web
        if not cached:
            web.cache = PlotCache(size=0)  # remembers nothing: every lookup computes
        asks = paths(ids)
        with TestClient(app) as c:
            for _ in range(rounds):
                for who, path in asks:
                    c.get(path, headers={"Authorization": f"Bearer {ids[who]}"}).raise_for_status()
        return web.query_times.summary()


def main() -> None:
    from iolens.present.web import svg

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--svg", type=Path, help="write the CDF here")
    ap.add_argument("--json", type=Path, help="write the times here")
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="iolens-qt-bench-"))
    db = tmp / "web.duckdb"
    t0 = time.perf_counter()
    ids = build_store(db, 0)
    print(f"store built in {time.perf_counter() - t0:.0f} s")
    try:
        with_cache = run(db, ids, args.rounds, cached=True)
        without = run(db, ids, args.rounds, cached=False)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    both = sorted(with_cache["cached"]["seconds"] + with_cache["computed"]["seconds"])
    none = without["computed"]["seconds"]

    def q(xs: list[float], p: float) -> str:
        return f"{1000 * xs[min(len(xs) - 1, int(p * len(xs)))]:.1f}"

    rows = [
        [name, str(len(xs)), q(xs, 0.5), q(xs, 0.9), q(xs, 0.95), f"{1000 * xs[-1]:.1f}"]
        for name, xs in (("with cache", both), ("without cache", none))
    ]
    print(table(["queries", "n", "p50 ms", "p90 ms", "p95 ms", "max ms"], rows))
    print(f"served from the cache: {with_cache['cached']['n']} of {with_cache['queries']}")
    if args.json:
        args.json.write_text(json.dumps({"with_cache": with_cache, "without_cache": without}))
    if args.svg:
        args.svg.write_text(
            svg.cdf(
                [("with cache", svg.READ, both), ("without cache", svg.WRITE, none)],
                xlabel="query time, seconds",
                label="query time CDF",
            )
        )


if __name__ == "__main__":
    main()
