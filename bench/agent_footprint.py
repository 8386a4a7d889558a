"""Agent footprint: install size, resident memory and CPU of `iolens agent` at 1 Hz.

Builds the wheel of this checkout, installs it into two fresh venvs under a temporary
directory - the agent install (`iolens[agent]`, the base) and, as the baseline, the full
one (`iolens[server]`) - and in each runs the real `iolens agent` with every source
enabled, at 1 Hz, against one node tree merged from every source's captured fixture (node
/proc, Lustre OSS/MDS/client, InfiniBand, LNet; tests/collect/trees.py) whose counters
grow every second, shipping every round to a real `iolens serve` on loopback. The agent
process is read from /proc: CPU share over the run, resident memory (median of the
samples after start-up, and the kernel's high-water mark VmHWM). Each figure is the
median over `--runs` runs. It also compares the agent's payload in both wire forms.

    python bench/agent_footprint.py [--seconds 20] [--runs 3] [--keep DIR]

Needs network access to PyPI (or a pip cache) for the two installs.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tests.collect.trees import CASES, build_root, grow

from bench.common import table

REPO = Path(__file__).resolve().parents[1]


def run(cmd: list[str], **kw: object) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]


def build_wheel(out: Path) -> Path:
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(REPO)])
    return next(out.glob("iolens-*.whl"))


def make_venv(path: Path, wheel: Path, extra: str) -> None:
    base = getattr(sys, "_base_executable", sys.executable)
    run([base, "-m", "venv", str(path)])
    run([str(path / "bin" / "python"), "-m", "pip", "install", "-q", f"{wheel}[{extra}]"])


def du(path: Path) -> int:
    """Bytes on disk (allocated blocks) under `path`."""
    return sum(p.lstat().st_blocks * 512 for p in path.rglob("*"))


def sizes(venv: Path) -> tuple[int, int]:
    """(whole venv, site-packages without pip and setuptools) in bytes."""
    site = next((venv / "lib").glob("python3*/site-packages"))
    tooling = sum(
        du(p)
        for p in site.iterdir()
        if p.name.split("-")[0] in ("pip", "setuptools", "_distutils_hack")
    )
    return du(venv), du(site) - tooling


def proc(pid: int) -> tuple[float, int, int]:
    """(CPU seconds, resident bytes, peak resident bytes) of a process."""
    stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
    status = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    kib = lambda k: int(status[k].split()[0]) * 1024  # noqa: E731
    return cpu, kib("VmRSS"), kib("VmHWM")


def wait_up(url: str) -> None:
    for _ in range(600):
        try:
            urllib.request.urlopen(f"{url}/healthz", timeout=1)
            return
        except OSError:
            time.sleep(0.1)
    raise SystemExit(f"server at {url} did not start")


def one_run(venv: Path, root: Path, url: str, work: Path, seconds: float) -> dict[str, float]:
    spool = work / "spool"
    agent = subprocess.Popen(
        [str(venv / "bin" / "iolens"), "agent", "--root", str(root), "--interval", "1",
         "--spool", str(spool), "--server", url],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    k = 0
    try:
        deadline = time.monotonic() + 3  # imports and the first rounds are start-up
        while time.monotonic() < deadline:
            k += 1
            grow(root, 1)
            time.sleep(1)
        cpu0, _, _ = proc(agent.pid)
        t0 = time.monotonic()
        rss: list[int] = []
        while time.monotonic() - t0 < seconds:
            grow(root, 1)
            rss.append(proc(agent.pid)[1])
            time.sleep(1)
        cpu1, _, hwm = proc(agent.pid)
        elapsed = time.monotonic() - t0
    finally:
        agent.send_signal(signal.SIGTERM)
        agent.wait(timeout=30)
    left = len(list((spool / "outbox").glob("*.iolb")))
    return {
        "cpu_pct": 100 * (cpu1 - cpu0) / elapsed,
        "ms_per_round": 1000 * (cpu1 - cpu0) / elapsed,
        "rss_mib": statistics.median(rss) / 2**20,
        "peak_mib": hwm / 2**20,
        "undelivered": left,
    }


def payload_sizes(root: Path) -> tuple[int, int, float, float]:
    """One agent round over `root` (after a first): bytes and ms to encode, light vs Arrow."""
    from iolens.collect.agent import Agent
    from iolens.collect.sources import SOURCES
    from iolens.collect.sources.node import NodeSource
    from iolens.ship import wire

    sources = [
        cls("bench", "oss")
        if cls is NodeSource or getattr(cls, "takes_role", False)
        else cls("bench")
        for cls in SOURCES.values()
    ]
    clock = iter(range(1000, 10**6, 10))
    agent = Agent("bench", root, sources, clock=lambda: float(next(clock)))
    agent.collect_round()
    grow(root, 10)
    batch = agent.collect_round()
    t0 = time.perf_counter()
    light = wire.encode(batch)
    t1 = time.perf_counter()
    batch.tables()
    t2 = time.perf_counter()
    arrow = wire.encode(batch)
    t3 = time.perf_counter()
    return len(light), len(arrow), 1000 * (t1 - t0), 1000 * (t3 - t2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="measured seconds per run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="build the venvs here and keep them")
    args = ap.parse_args()
    tmp_ctx = tempfile.TemporaryDirectory(prefix="iolens-footprint-")
    work = args.keep or Path(tmp_ctx.name)
    work.mkdir(parents=True, exist_ok=True)
    wheel = build_wheel(work / "dist")
    venvs = {"agent": work / "venv-agent", "full": work / "venv-full"}
    for extra, path in (("agent", venvs["agent"]), ("server", venvs["full"])):
        if not (path / "bin" / "iolens").exists():
            make_venv(path, wheel, extra)
    root = work / "node"
    names = sorted(p.name for p in CASES.iterdir() if p.is_dir())
    if not root.exists():
        root.mkdir()
        used = build_root(root, names)
    else:
        used = names
    port = 18000 + os.getpid() % 1000
    url = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [str(venvs["full"] / "bin" / "iolens"), "serve", "--db", str(work / "s.duckdb"),
         "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    results: dict[str, list[dict[str, float]]] = {k: [] for k in venvs}
    try:
        wait_up(url)
        for i in range(args.runs):
            for name, venv in venvs.items():  # interleaved: both see the same machine load
                results[name].append(one_run(venv, root, url, work / f"{name}-{i}", args.seconds))
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    light, arrow, light_ms, arrow_ms = payload_sizes(root)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in results[name])

    print(
        f"iolens agent at 1 Hz, every source on ({', '.join(used)}; tracer spool empty), "
        f"{args.seconds:.0f} s per run, median of {args.runs} runs; wheel {wheel.name}\n"
    )
    rows = []
    for name, venv in venvs.items():
        total, site = sizes(venv)
        rows.append(
            [
                f"`{'iolens[agent]' if name == 'agent' else 'iolens[server]'}`",
                f"{total / 1e6:.0f} MB",
                f"{site / 1e6:.0f} MB",
                f"{med(name, 'cpu_pct'):.2f} % ({med(name, 'ms_per_round'):.1f} ms/round)",
                f"{med(name, 'rss_mib'):.1f} MiB",
                f"{med(name, 'peak_mib'):.1f} MiB",
                f"{max(r['undelivered'] for r in results[name])}",
            ]
        )
    print(
        table(
            ["install", "venv on disk", "without pip/setuptools", "CPU of one core",
             "RSS steady", "RSS peak", "batches left undelivered"],
            rows,
        )
    )  # fmt: skip
    print(
        f"\none round's batch: light wire form {light:,} B in {light_ms:.1f} ms, "
        f"Arrow form {arrow:,} B in {arrow_ms:.1f} ms"
    )
    tmp_ctx.cleanup() if args.keep is None else None


if __name__ == "__main__":
    main()
