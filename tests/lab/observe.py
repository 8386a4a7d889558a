"""iolens watching the MooseFS lab: a server, a storage agent asking the master (`moosefs`)
and a client agent following the mounts (`moosefs_client`, `tracer_spool`), as a site
would run them; then the component detectors over what they stored.

Nothing here knows a fault: the ground truth stays in the lab's file, which only the
scorer (`bench/lab.py`, the lab tests) reads, after the detectors have run.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

from tests.cluster.harness import iolens_bin, stop_group


@dataclass
class Observatory:
    state: Path  # store, configs, logs, spools
    master: str  # IP:PORT of the master's client port
    nodes: dict[str, str]  # node name -> its client IP (site aliases)
    port: int = 28490
    token: str = "lab-agent-token"
    interval: float = 10.0
    master_cpus: float = 1.0  # the CPU the master may use (the lab caps it: master_cpu.py)
    procs: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)

    @property
    def db(self) -> Path:
        return self.state / "iolens.duckdb"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def trace_spool(self) -> Path:
        return self.state / "traces"

    @property
    def mdt(self) -> str:
        from iolens.parse.moosefs import mdt_id

        return mdt_id(self.master)

    def topology(self) -> str:
        """The site file: the node names of the clients' addresses."""
        lines = []
        if self.nodes:
            names = sorted(self.nodes)
            lines += [
                "[[aliases]]",
                f"hosts = {json.dumps(names)}",
                f"aliases = {json.dumps([self.nodes[n] for n in names])}",
                "",
            ]
        return "\n".join(lines) + "\n"

    def start(self) -> None:
        self.state.mkdir(parents=True, exist_ok=True)
        self.trace_spool.mkdir(exist_ok=True)
        self.trace_spool.chmod(0o1777)
        from iolens.store.duckdb_store import DuckDBStore

        umask = os.umask(0o022)
        try:  # the store the site file goes into, before serve owns it
            DuckDBStore(self.db).close()
        finally:  # opening a store sets umask 077 for its process: not for the lab's files
            os.umask(umask)
        topo = self.state / "topology.toml"
        topo.write_text(self.topology())
        self._run("site", "topology", str(topo), "--db", str(self.db))
        self._spawn(
            "serve",
            ["serve", "--db", str(self.db), "--port", str(self.port), "--agent-token", self.token],
        )
        self._wait_http(60)
        self._agent(
            "storage",
            {
                "moosefs": f'master = "{self.master}"\nmaster_cpus = {self.master_cpus}',
                "diskstats": "",  # the chunkservers' disks (loop devices here)
                "procio": 'names = ["mfschunkserver", "mfsmaster"]',
            },
            role="mds",
        )
        self._agent(
            "clients", {"moosefs_client": "", "tracer_spool": ""}, role="login", traces=True
        )

    def _agent(self, name: str, sources: dict[str, str], role: str, traces: bool = False) -> None:
        from iolens.collect.sources import source_names

        on = "\n".join(f"[sources.{s}]\nenabled = true\n{extra}" for s, extra in sources.items())
        off = "\n".join(
            f"[sources.{s}]\nenabled = false" for s in source_names() if s not in sources
        )
        cfg = self.state / f"agent-{name}.toml"
        cfg.write_text(
            f'[agent]\nserver = "{self.url}"\ntoken = "{self.token}"\nhost = "lab-{name}"\n'
            f'spool = "{self.state / ("spool-" + name)}"\ninterval = {self.interval}\n'
            f'role = "{role}"\ntrace_spool = "{self.trace_spool}"\n{on}\n{off}\n'
        )
        self._spawn(f"agent-{name}", ["agent", "--config", str(cfg)])
        del traces

    def _spawn(self, name: str, args: list[str]) -> None:
        log = open(self.state / f"{name}.log", "ab")  # noqa: SIM115 - lives with the process
        self.procs[name] = subprocess.Popen(
            [iolens_bin(), *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=dict(os.environ, TZ="UTC"),
        )

    def _wait_http(self, timeout: float) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                if httpx.get(f"{self.url}/healthz", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.3)
        raise AssertionError(
            f"iolens serve did not answer: {(self.state / 'serve.log').read_text()[-2000:]}"
        )

    def _run(self, *args: str) -> str:
        res = subprocess.run(
            [iolens_bin(), *args], capture_output=True, text=True, timeout=600, check=False
        )
        assert res.returncode == 0, res.stdout + res.stderr
        return res.stdout

    def stop(self) -> None:
        """Agents first (their last round ships), then the server (its store closes)."""
        for name in sorted(self.procs, key=lambda n: n == "serve"):
            stop_group(self.procs.pop(name))

    # -- after the run: what iolens found ---------------------------------------------------
    def analyze(self) -> list[dict[str, Any]]:
        """Run the component detectors over everything stored; their episodes."""
        self._run("analyze", "--db", str(self.db))
        return json.loads(self._run("anomalies", "--db", str(self.db), "--json"))["episodes"]

    def detect_at(self, times: list[datetime]) -> dict[datetime, list[dict[str, Any]]]:
        """The episodes the detectors would have reported at each time `t` (data up to
        `t` only), for time-to-detect: the online view replayed over the stored data."""
        from iolens.analyze.components import DETECTORS
        from iolens.analyze.components.base import Context
        from iolens.store.duckdb_store import DuckDBStore

        out: dict[datetime, list[dict[str, Any]]] = {}
        store = DuckDBStore(self.db, create=False, read_only=True)
        try:
            first = store.query("SELECT min(ts) AS t FROM server_samples").column("t")[0].as_py()
            for t in times:
                ctx = Context(store, first, t.replace(tzinfo=None), open_ended=True)
                found = []
                for det in DETECTORS:
                    for ep in det().detect(ctx):
                        found.append(
                            {
                                "kind": ep.kind,
                                "component": ep.component_id,
                                "start": ep.start,
                                "end": ep.end,
                            }
                        )
                out[t] = found
        finally:
            store.close()
        return out


def minutes(start: datetime, end: datetime) -> list[datetime]:
    """Every minute boundary from `start` to `end` (UTC)."""
    t = start.replace(second=0, microsecond=0, tzinfo=UTC) + timedelta(minutes=1)
    out = []
    while t <= end.replace(tzinfo=UTC):
        out.append(t)
        t += timedelta(minutes=1)
    return out
