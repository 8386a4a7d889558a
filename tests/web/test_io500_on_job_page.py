"""The job page shows where the job sits in its system's IO500 box, as the CLI does."""

from __future__ import annotations

import html
import json

import httpx

from tests.conftest import run_cli
from tests.io500 import write_run
from tests.loopback import free_port, start_server, stop


def test_job_page_places_the_job_in_the_scaled_box(web_db, sim_db, tmp_path):
    db = web_db.copy(tmp_path / "io500.duckdb")
    io500_nodes = 10
    write_run(tmp_path / "lab" / "results" / "r1", nodes=io500_nodes)
    assert run_cli("import", "io500", str(tmp_path / "lab"), "--db", str(db)).returncode == 0
    nodes = {j: sim_db.truth["jobs"][j]["nnodes"] for j in web_db.a_jobs}
    job = min(web_db.a_jobs, key=lambda j: (nodes[j] >= io500_nodes, j))  # scaled if any
    f = min(1.0, nodes[job] / io500_nodes)
    box = json.loads(run_cli("expect", "--db", str(db), "--json").stdout)["boxes"][0]["aggregate"]
    cli = json.loads(run_cli("job", job, "--db", str(db), "--json").stdout)["expectation"]
    assert cli["verdict"]
    port = free_port()
    proc = start_server(db, port, tmp_path / "server.log", "--analyze-every", "0")
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", timeout=120, headers=web_db.auth(web_db.user)
        ) as c:
            res = c.get(f"/jobs/{job}")
    finally:
        stop(proc)
    assert res.status_code == 200
    page = html.unescape(res.text)
    assert 'id="io500"' in page and "Against the IO500 box" in page
    assert f'<span class="verdict">{cli["verdict"]}</span>' in page
    if f < 1:
        assert f"scaled by ×{f:.3g} to the job's {nodes[job]} of IO500's 10 client nodes" in page
    for a in cli["axes"]:
        lo, hi = ("bw_lo", "bw_hi") if a["axis"] == "bandwidth" else ("md_lo", "md_hi")
        # the page's worst and best are IO500's box times the job's share of its nodes
        row = (
            f'<td>{a["axis"]}</td><td class="n">{a["value"]:,.3g} {a["unit"]}</td>'
            f'<td class="n">{box[lo] * f:,.3g}</td><td class="n">{box[hi] * f:,.3g}</td>'
            f"<td>{a['position'].replace('_', ' ')}</td>"
        )
        assert row in page
    assert cli["meaning"] in page
    assert "cdn" not in page.lower()
