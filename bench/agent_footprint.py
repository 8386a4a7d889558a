"""Agent footprint: install size, resident memory and CPU of `iolens agent` at 1 Hz.

Builds the wheel of this checkout, installs it into two fresh venvs under a temporary
directory - the agent install (`iolens[agent]`, the base) and, as the baseline, the full
one (`iolens[server]`) - and in each runs the real `iolens agent` with every source
enabled (and, on the agent install, with a compute node's sources only: node, Lustre
client, InfiniBand, tracer spool), at 1 Hz, against one node tree merged from every
source's captured fixture (node /proc, Lustre OSS/MDS/client, InfiniBand, LNet;
tests/collect/trees.py) whose counters
grow every second, shipping every round to a real `iolens serve` on loopback. The agent
process is read from /proc: CPU share over the run, resident memory (median of the
samples after start-up, and the kernel's high-water mark VmHWM). Each figure is the
median over `--runs` runs. It also compares the agent's payload in both wire forms.
`--baseline-ref REF` adds the agent of another commit (e.g. the one before issue 18),
installed as that commit's `pip install .`.

    python bench/agent_footprint.py [--seconds 20] [--runs 3] [--keep DIR] [--baseline-ref REF]

Needs network access to PyPI (or a pip cache) for the two installs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tests.collect.trees import CASES, build_root, grow

from bench.common import table

REPO = Path(__file__).resolve().parents[1]


def run(cmd: list[str], **kw: object) -> None:
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, **kw)  # type: ignore[call-overload]


#: The sources a compute node runs (the rest read server files it does not have).
COMPUTE_OFF = ("lustre_oss", "lustre_mds", "iofwd", "lnet_router")


def build_wheel(src: Path, out: Path) -> Path:
    for old in out.glob("iolens-*.whl"):
        old.unlink()
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(src)])
    return next(out.glob("iolens-*.whl"))


def make_venv(path: Path, wheel: Path, extra: str | None) -> None:
    """A fresh venv with `wheel[extra]`; a kept one gets this wheel over its old one."""
    py = str(path / "bin" / "python")
    if not (path / "bin" / "iolens").exists():
        base = getattr(sys, "_base_executable", sys.executable)
        run([base, "-m", "venv", str(path)])
        run([py, "-m", "pip", "install", "-q", f"{wheel}[{extra}]" if extra else str(wheel)])
    else:
        run([py, "-m", "pip", "install", "-q", "--no-deps", "--force-reinstall", str(wheel)])


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


def one_run(
    venv: Path, root: Path, url: str, work: Path, seconds: float, off: tuple[str, ...] = ()
) -> dict[str, float]:
    spool = work / "spool"
    work.mkdir(parents=True, exist_ok=True)
    config = work / "agent.toml"
    config.write_text("".join(f"[sources.{s}]\nenabled = false\n" for s in off))
    agent = subprocess.Popen(
        [str(venv / "bin" / "iolens"), "agent", "--config", str(config), "--root", str(root),
         "--interval", "1", "--spool", str(spool), "--server", url],
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


def payload_sizes(root: Path, repeat: int = 50) -> dict[str, float]:
    """One agent round over `root` (after a first) in both wire forms: bytes, and median
    ms to encode (agent side) and to decode into Arrow (server side)."""
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

    def ms(fn: Callable[[], object]) -> float:
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return 1000 * statistics.median(times)

    out: dict[str, float] = {"rows": batch.rows()}
    light = wire.encode(batch)
    out["light_bytes"], out["light_encode_ms"] = len(light), ms(lambda: wire.encode(batch))
    out["light_decode_ms"] = ms(lambda: wire.decode(light).conformed())
    batch.tables()  # Arrow from here on
    arrow = wire.encode(batch)
    out["arrow_bytes"], out["arrow_encode_ms"] = len(arrow), ms(lambda: wire.encode(batch))
    out["arrow_decode_ms"] = ms(lambda: wire.decode(arrow).conformed())
    return out


def print_payload(p: dict[str, float]) -> None:
    print(
        f"one agent round ({p['rows']:.0f} rows, every source), median of 50:\n\n"
        + table(
            ["wire form", "bytes", "encode (agent)", "decode + schema cast (server)"],
            [
                [name, f"{p[f'{k}_bytes']:,.0f}", f"{p[f'{k}_encode_ms']:.2f} ms",
                 f"{p[f'{k}_decode_ms']:.2f} ms"]
                for name, k in (("IOLB2 (zlib JSON)", "light"), ("IOLB1 (Arrow, zstd)", "arrow"))
            ],
        )
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=20.0, help="measured seconds per run")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="build the venvs here and keep them")
    ap.add_argument("--baseline-ref", help="also measure this commit's agent (full install)")
    ap.add_argument("--payload-only", action="store_true", help="only the wire-form figures")
    args = ap.parse_args()
    if args.payload_only:
        with tempfile.TemporaryDirectory() as tmp:
            build_root(Path(tmp), sorted(p.name for p in CASES.iterdir() if p.is_dir()))
            print_payload(payload_sizes(Path(tmp)))
        return
    tmp_ctx = tempfile.TemporaryDirectory(prefix="iolens-footprint-")
    work = args.keep or Path(tmp_ctx.name)
    work.mkdir(parents=True, exist_ok=True)
    wheel = build_wheel(REPO, work / "dist")
    venvs = {"agent": work / "venv-agent", "full": work / "venv-full"}
    make_venv(venvs["agent"], wheel, "agent")
    make_venv(venvs["full"], wheel, "server")
    # (label, venv, sources off)
    setups = [
        ("`iolens[agent]`, every source", venvs["agent"], ()),
        ("`iolens[agent]`, compute node's sources", venvs["agent"], COMPUTE_OFF),
        ("`iolens[server]`, every source", venvs["full"], ()),
    ]
    if args.baseline_ref:
        src = work / "ref-src"
        shutil.rmtree(src, ignore_errors=True)
        src.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.baseline_ref],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        ref_venv = work / f"venv-{args.baseline_ref}"
        make_venv(ref_venv, build_wheel(src, work / "dist-ref"), None)
        venvs[args.baseline_ref] = ref_venv
        setups.append((f"{args.baseline_ref} (before), every source", ref_venv, ()))
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
    results: dict[str, list[dict[str, float]]] = {label: [] for label, _, _ in setups}
    try:
        wait_up(url)
        for i in range(args.runs):
            for j, (label, venv, off) in enumerate(setups):  # interleaved: same machine load
                shutil.rmtree(work / f"run-{j}-{i}", ignore_errors=True)
                got = one_run(venv, root, url, work / f"run-{j}-{i}", args.seconds, off)
                results[label].append(got)
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    payload = payload_sizes(root)

    def med(label: str, key: str) -> float:
        return statistics.median(r[key] for r in results[label])

    print(
        f"iolens agent at 1 Hz over {', '.join(used)} (tracer spool empty), "
        f"{args.seconds:.0f} s per run, median of {args.runs} runs; wheel {wheel.name}\n"
    )
    print(
        table(
            ["install", "venv on disk", "without pip/setuptools"],
            [
                [name, f"{t / 1e6:.0f} MB", f"{s / 1e6:.0f} MB"]
                for name, (t, s) in ((n, sizes(v)) for n, v in venvs.items())
            ],
        )
    )
    print()
    rows = [
        [
            label,
            f"{med(label, 'cpu_pct'):.2f} % ({med(label, 'ms_per_round'):.1f} ms/round)",
            f"{med(label, 'rss_mib'):.1f} MiB",
            f"{med(label, 'peak_mib'):.1f} MiB",
            f"{max(r['undelivered'] for r in results[label])}",
        ]
        for label, _, _ in setups
    ]
    print(
        table(
            ["agent", "CPU of one core", "RSS steady", "RSS peak", "batches left undelivered"],
            rows,
        )
    )
    print()
    print_payload(payload)
    tmp_ctx.cleanup() if args.keep is None else None


if __name__ == "__main__":
    main()
