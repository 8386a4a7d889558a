"""The MooseFS lab harness (issue 20): a real file system, real faults, ground truth.

`Lab` runs `scripts/mfslab.sh up/down`, reads `$LAB/lab.json` and injects faults into the
real servers: a fail-slow chunkserver (`slow_chunkserver`), a metadata storm from a login
node (`metadata_storm`), and background demand on every chunkserver (`load`, not a fault).
Every fault appends one ground-truth record (a JSON line) to `$LAB/truth.jsonl`, a file the
analyses never read. `capture` saves real tool output for the collector's replay fixtures.
See docs/lab.md for the layout and the measured effect of each fault method.

Everything started here is stopped by process id or undone by name of the cgroup it made;
`Lab.stop_all()` (also run by `down` and at interpreter exit) ends what is still running.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "mfslab.sh"
HERE = Path(__file__).resolve().parent
STORM_USER = "iolensstorm"
JOB_USER = "iolensjob"
CGROUP = Path("/sys/fs/cgroup")
CG_NAME = "iolens-lab"
METHODS = ("sigstop", "cpu", "blkio", "blkio-direct")
THROTTLES = ("read_bps_device", "write_bps_device", "read_iops_device", "write_iops_device")
SCC_COLUMNS = [
    *("hlopr", "rtime", "datallopr", "load"),
    *("databytesr", "databytesw", "hlopw", "wtime", "datallopw"),
]
NO_DATA = 18446744073709551615  # mfscli's "no data" in chart output

# The duty-cycle helper: stopped for (1 - 1/factor) of every period, SIGCONT on the way out
# (SIGTERM, its own deadline, or an error), so a dead harness never leaves a stopped server.
_DUTY = r"""
import os, signal, sys, time
pid = int(sys.argv[1])
factor, period, seconds = (float(x) for x in sys.argv[2:5])
stop = period * (1 - 1 / factor)
done = []
signal.signal(signal.SIGTERM, lambda *_: done.append(1))
end = time.monotonic() + seconds
try:
    while not done and time.monotonic() < end:
        os.kill(pid, signal.SIGSTOP)
        time.sleep(stop)
        os.kill(pid, signal.SIGCONT)
        time.sleep(period - stop)
finally:
    os.kill(pid, signal.SIGCONT)
"""

# The load program: write (and fsync) or read one file over and over, dropping the client's
# cache of it after every pass so each pass reaches the chunkservers.
_LOAD = r"""#!/usr/bin/python3
import os, sys, time
mode, path, seconds, mb = sys.argv[1], sys.argv[2], float(sys.argv[3]), int(sys.argv[4])
end = time.monotonic() + seconds
buf = b"\xa5" * (1 << 20)
while time.monotonic() < end:
    if mode == "w" or not os.path.exists(path):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
        for _ in range(mb):
            os.write(fd, buf)
        os.fsync(fd)
    else:
        fd = os.open(path, os.O_RDONLY)
        while os.read(fd, 1 << 20):
            pass
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
"""


@dataclass
class Chunkserver:
    index: int
    id: str  # ip:port, as mfscli names it
    ip: str
    port: int
    pid: int
    loop: str  # /dev/loopN holding the server's disk
    disk: str  # the mounted disk (the chunkserver's one "hdd")
    image: str
    label: str  # A, B, ... (storage class cs<label> keeps chunks on this server only)


@dataclass
class Node:
    name: str
    ip: str
    mount: str


def run(cmd: list[str], check: bool = True, **kw: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, check=check, capture_output=True, text=True, **kw)


def ensure_user(name: str) -> int:
    """The uid of `name`, created (no home, no login shell) when missing."""
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        run(["useradd", "-M", "-s", "/usr/sbin/nologin", name])
        return pwd.getpwnam(name).pw_uid


def lab_missing() -> str | None:
    """Why the lab cannot run here, or None."""
    if os.geteuid() != 0:
        return "the MooseFS lab needs root (loop devices, FUSE, IP aliases, cgroups)"
    if not Path("/dev/fuse").exists():
        return "no /dev/fuse"
    for c in ("losetup", "mfsmaster", "mfschunkserver", "mfsmount", "mfscli", "mfsscadmin"):
        if shutil.which(c) is None:
            return f"{c} not installed (scripts/mfslab.sh install)"
    return None


class Fault:
    """One running fault: stop() (or leaving the `with` block, or its timer) ends it and
    appends its ground-truth record."""

    def __init__(self, lab: Lab, record: dict[str, Any], undo: Callable[[], None]) -> None:
        self.lab = lab
        self.record = record
        self._undo = undo
        self._lock = threading.Lock()
        self.active = True
        self._timer: threading.Timer | None = None
        lab._faults.append(self)

    def _arm(self, seconds: float | None) -> Fault:
        if seconds is not None:
            self._timer = threading.Timer(seconds, self.stop)
            self._timer.daemon = True
            self._timer.start()
        return self

    def stop(self) -> dict[str, Any]:
        with self._lock:
            if not self.active:
                return self.record
            self.active = False
            try:
                self._undo()
            finally:
                self.record["end"] = round(time.time(), 3)
                self.lab.append_truth(self.record)
                if self._timer is not None and self._timer is not threading.current_thread():
                    self._timer.cancel()
        return self.record

    def wait(self) -> dict[str, Any]:
        """Block until the fault's own duration is over, then end it."""
        if self._timer is not None:
            self._timer.join()
        return self.stop()

    def __enter__(self) -> Fault:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


@dataclass
class Lab:
    lab: Path = field(default_factory=lambda: Path(os.environ.get("LAB", "/tmp/iolens-mfslab")))
    port_base: int = field(default_factory=lambda: int(os.environ.get("LAB_PORT_BASE", "19419")))
    alias_base: str | None = field(default_factory=lambda: os.environ.get("LAB_ALIAS_BASE"))
    node_names: str = "c1 c2 c3 c4 login"
    n_cs: int = 4
    truth_path: Path | None = None
    master: dict[str, Any] = field(default_factory=dict)
    chunkservers: list[Chunkserver] = field(default_factory=list)
    nodes: dict[str, Node] = field(default_factory=dict)
    _faults: list[Fault] = field(default_factory=list, repr=False)
    _procs: list[subprocess.Popen[str]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.lab = Path(self.lab)
        if self.truth_path is None:
            self.truth_path = self.lab / "truth.jsonl"
        atexit.register(self.stop_all)

    # -- lifecycle ---------------------------------------------------------------------
    def env(self) -> dict[str, str]:
        env = dict(os.environ, LAB=str(self.lab), LAB_PORT_BASE=str(self.port_base))
        env.update(LAB_CS=str(self.n_cs), LAB_NODES=self.node_names)
        if self.alias_base:
            env["LAB_ALIAS_BASE"] = self.alias_base
        return env

    def script(self, action: str) -> str:
        res = run(["bash", str(SCRIPT), action], check=False, env=self.env(), timeout=120)
        if res.returncode != 0:
            raise RuntimeError(f"mfslab.sh {action}: {res.returncode}\n{res.stderr[-2000:]}")
        return res.stderr

    def up(self) -> Lab:
        self.script("up")
        self.reload()
        self._wait_disks()
        self._ensure_sclasses()
        return self

    def down(self) -> None:
        self.stop_all()
        self.script("down")

    def reload(self) -> None:
        info = json.loads((self.lab / "lab.json").read_text())
        self.master = info["master"]
        self.chunkservers = [
            Chunkserver(
                index=c["index"],
                id=c["id"],
                ip=c["ip"],
                port=c["port"],
                pid=c["pid"],
                loop=c["loop"],
                disk=c["disk"],
                image=c["image"],
                label=chr(64 + c["index"]),
            )
            for c in info["chunkservers"]
        ]
        self.nodes = {n["name"]: Node(n["name"], n["ip"], n["mount"]) for n in info["nodes"]}

    @property
    def mount(self) -> Path:
        return self.lab / "mnt"

    def _wait_disks(self, timeout: float = 30) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            rows = self.rows("-SCS")
            if len(rows) >= self.n_cs and all(r[9] not in ("0", "-") for r in rows):
                return
            time.sleep(0.5)
        raise RuntimeError(f"chunkserver disks not ready: {self.rows('-SCS')}")

    def _ensure_sclasses(self) -> None:
        have = run(["mfsscadmin", str(self.mount), "list"]).stdout.split()
        for cs in self.chunkservers:
            if f"cs{cs.label}" not in have:
                sc = f"cs{cs.label}"
                run(["mfsscadmin", str(self.mount), "create", "-m", "s", "-K", cs.label, sc])

    def stop_all(self) -> None:
        for f in list(self._faults):
            with contextlib.suppress(Exception):
                f.stop()
        self._faults.clear()
        for p in self._procs:
            if p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    p.terminate()
        for p in self._procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(timeout=10)
            if p.poll() is None:
                p.kill()
                p.wait()
        self._procs.clear()

    # -- reading the master ------------------------------------------------------------
    def mfscli(self, *args: str, sep: bool = True) -> str:
        cmd = ["mfscli", "-H", self.master["ip"], "-P", str(self.master["cl_port"]), *args]
        return run([*cmd, "-s", "|"] if sep else cmd, timeout=30).stdout

    def rows(self, *args: str) -> list[list[str]]:
        """mfscli's rows, split on '|', without the leading section name."""
        return [ln.split("|")[1:] for ln in self.mfscli(*args).splitlines() if "|" in ln]

    def disk_stats(self) -> dict[str, dict[str, float | None]]:
        """Per chunkserver (ip:port): last-minute disk stats from `mfscli -SHD -m 1`."""
        names = ("read_bw", "write_bw", "read_us", "write_us", "fsync_us", "read_ops", "write_ops")
        out: dict[str, dict[str, float | None]] = {}
        for r in self.rows("-SHD", "-m", "1"):
            cs = ":".join(r[0].split(":")[:2])
            vals = r[4:11]
            out[cs] = {n: None if v == "-" else float(v) for n, v in zip(names, vals, strict=True)}
        return out

    def sessions(self) -> dict[str, str]:
        """Mount path -> session IP, from `mfscli -SMS`."""
        return {r[2]: r[1] for r in self.rows("-SMS")}

    # -- ground truth ------------------------------------------------------------------
    def append_truth(self, record: dict[str, Any]) -> None:
        assert self.truth_path is not None
        self.truth_path.parent.mkdir(parents=True, exist_ok=True)
        with self.truth_path.open("a") as f:
            f.write(json.dumps(record, sort_keys=True) + "\n")

    def truth(self) -> list[dict[str, Any]]:
        assert self.truth_path is not None
        if not self.truth_path.exists():
            return []
        return [json.loads(x) for x in self.truth_path.read_text().splitlines() if x.strip()]

    # -- faults ------------------------------------------------------------------------
    def _need_mounted(self, path: str | Path) -> None:
        if not os.path.ismount(path):  # never write into the directory under a lost mount
            raise RuntimeError(f"{path} is not mounted: is the lab up?")

    def cs(self, which: Chunkserver | int | str) -> Chunkserver:
        if isinstance(which, Chunkserver):
            return which
        for c in self.chunkservers:
            if which in (c.index, c.id, c.label):
                return c
        raise KeyError(which)

    def slow_chunkserver(
        self,
        cs: Chunkserver | int | str,
        factor: float,
        seconds: float | None = None,
        method: str = "sigstop",
        period: float = 0.2,
    ) -> Fault:
        """Make one chunkserver `factor` times slower, for `seconds` (or until stop()).

        Methods (docs/lab.md has what each measurably does):
          sigstop       SIGSTOP/SIGCONT duty cycle from a helper process: stopped for
                        (1 - 1/factor) of every `period` (the default: the one that works)
          cpu           cgroup v1 cpu: quota = the server's measured CPU use / factor
          blkio         cgroup v1 blkio throttle of the loop device: measured bps / factor
          blkio-direct  the same with the loop device in direct-I/O mode while it lasts
        """
        if method not in METHODS:
            raise ValueError(f"method {method!r}: one of {METHODS}")
        if factor < 1:
            raise ValueError("factor >= 1")
        c = self.cs(cs)
        record: dict[str, Any] = {
            "kind": "slow_server",
            "component": c.id,
            "start": round(time.time(), 3),
            "end": None,
            "magnitude": factor,
            "method": method,
            "chunkserver": c.index,
            "pid": c.pid,
            "loop": c.loop,
            "disk": c.disk,
        }
        if method == "sigstop":
            undo = self._duty_cycle(c, factor, period, seconds, record)
        elif method == "cpu":
            undo = self._cpu_quota(c, factor, record)
        else:
            undo = self._blkio(c, factor, record, direct=method == "blkio-direct")
        return Fault(self, record, undo)._arm(seconds)

    def _duty_cycle(
        self, c: Chunkserver, factor: float, period: float, seconds: float | None, rec: dict
    ) -> Callable[[], None]:
        life = seconds + 5 if seconds is not None else 24 * 3600
        helper = subprocess.Popen(
            [sys.executable, "-c", _DUTY, str(c.pid), str(factor), str(period), str(life)],
            text=True,
        )
        rec["details"] = {"period_s": period, "stopped_s": round(period * (1 - 1 / factor), 4)}

        def undo() -> None:
            helper.terminate()
            try:
                helper.wait(timeout=5)
            except subprocess.TimeoutExpired:
                helper.kill()
                helper.wait()
            os.kill(c.pid, signal.SIGCONT)

        return undo

    def _cgroup(self, controller: str, c: Chunkserver) -> Path:
        d = CGROUP / controller / CG_NAME / f"cs{c.index}"
        d.mkdir(parents=True, exist_ok=True)
        return d

    def _move_back(self, controller: str, d: Path, pid: int) -> None:
        with contextlib.suppress(ProcessLookupError, OSError):
            (CGROUP / controller / "cgroup.procs").write_text(str(pid))
        for _ in range(50):
            try:
                d.rmdir()
                break
            except OSError:
                time.sleep(0.1)
        with contextlib.suppress(OSError):
            d.parent.rmdir()  # the lab's parent cgroup, once no other fault uses it

    def _cpu_quota(self, c: Chunkserver, factor: float, rec: dict) -> Callable[[], None]:
        def ticks() -> int:
            f = Path(f"/proc/{c.pid}/stat").read_text().rsplit(")", 1)[1].split()
            return int(f[11]) + int(f[12])

        t0, w0 = ticks(), time.monotonic()
        time.sleep(2)
        used = (ticks() - t0) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - w0)
        period = 100_000
        quota = max(1000, int(period * max(used, 0.01) / factor))
        d = self._cgroup("cpu", c)
        (d / "cpu.cfs_period_us").write_text(str(period))
        (d / "cpu.cfs_quota_us").write_text(str(quota))
        (d / "cgroup.procs").write_text(str(c.pid))
        rec["details"] = {"cpu_used": round(used, 3), "period_us": period, "quota_us": quota}

        def undo() -> None:
            with contextlib.suppress(OSError):
                (d / "cpu.cfs_quota_us").write_text("-1")
            self._move_back("cpu", d, c.pid)

        return undo

    def _blkio(self, c: Chunkserver, factor: float, rec: dict, direct: bool) -> Callable[[], None]:
        name = Path(c.loop).name

        def sectors_ios() -> tuple[int, int]:
            for ln in Path("/proc/diskstats").read_text().splitlines():
                f = ln.split()
                if f[2] == name:
                    return int(f[5]) + int(f[9]), int(f[3]) + int(f[7])
            raise KeyError(name)

        (s0, i0), w0 = sectors_ios(), time.monotonic()
        time.sleep(2)
        (s1, i1), dt = sectors_ios(), time.monotonic() - w0
        bps = max(1 << 20, int((s1 - s0) * 512 / dt / factor))
        iops = max(10, int((i1 - i0) / dt / factor))
        st = os.stat(c.loop)
        dev = f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
        if direct:
            run(["losetup", "--direct-io=on", c.loop])
        d = self._cgroup("blkio", c)
        for k in THROTTLES:
            (d / f"blkio.throttle.{k}").write_text(f"{dev} {iops if 'iops' in k else bps}")
        (d / "cgroup.procs").write_text(str(c.pid))
        rec["details"] = {"device": dev, "bps": bps, "iops": iops, "direct_io": direct}

        def undo() -> None:
            for k in THROTTLES:
                with contextlib.suppress(OSError):
                    (d / f"blkio.throttle.{k}").write_text(f"{dev} 0")
            self._move_back("blkio", d, c.pid)
            if direct:
                run(["losetup", "--direct-io=off", c.loop], check=False)

        return undo

    def metadata_storm(
        self, node: str = "login", user: str = STORM_USER, seconds: float = 30, procs: int = 2
    ) -> Fault:
        """`procs` mdstorm processes of an ordinary user, outside any job, creating, stat-ing
        and unlinking files at full speed in their own directory on `node`'s mount. The
        record is appended when they are done (wait()) or stopped."""
        n = self.nodes[node]
        self._need_mounted(n.mount)
        uid = ensure_user(user)
        gid = pwd.getpwnam(user).pw_gid
        exe = self.lab / "bin" / "mdstorm"
        exe.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(HERE / "mdstorm", exe)
        exe.chmod(0o755)
        top = Path(n.mount) / "storm" / user
        top.mkdir(parents=True, exist_ok=True)
        os.chown(top, uid, gid)
        ps = [
            subprocess.Popen(
                [str(exe), str(top / f"p{k}"), str(seconds)],
                user=uid,
                group=gid,
                extra_groups=[],
                cwd="/",
                stdout=subprocess.PIPE,
                text=True,
            )
            for k in range(procs)
        ]
        self._procs.extend(ps)
        record: dict[str, Any] = {
            "kind": "metadata_storm",
            "component": n.name,
            "start": round(time.time(), 3),
            "end": None,
            "magnitude": None,
            "method": "mdstorm",
            "host": n.name,
            "ip": n.ip,
            "mount": n.mount,
            "user": user,
            "uid": uid,
            "comm": "mdstorm",
            "pids": [p.pid for p in ps],
            "dir": str(top),
        }

        def undo() -> None:
            ops = 0
            for p in ps:
                try:
                    out, _ = p.communicate(timeout=seconds + 30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    out, _ = p.communicate()
                for ln in (out or "").splitlines():
                    if ln.startswith("{"):
                        ops += json.loads(ln)["ops"]
            record["magnitude"] = ops  # metadata ops done (create + stat + unlink)

        fault = Fault(self, record, undo)
        return fault._arm(seconds + 1)

    def load(
        self,
        nodes: Iterable[str] | None = None,
        seconds: float = 60,
        mb: int = 64,
        user: str = JOB_USER,
        readers: bool = True,
    ) -> list[subprocess.Popen[str]]:
        """Steady demand on every chunkserver: for each one a writer (on one node) and a
        reader (on the next node) of a file kept on that server only (storage class
        cs<label>). Ordinary processes of `user`; not a fault, no ground truth."""
        names = list(nodes or [n for n in self.nodes if n != "login"] or list(self.nodes))
        for m in [self.mount, *(self.nodes[x].mount for x in names)]:
            self._need_mounted(m)
        uid = ensure_user(user)
        gid = pwd.getpwnam(user).pw_gid
        exe = self.lab / "bin" / "mdload"
        exe.parent.mkdir(parents=True, exist_ok=True)
        exe.write_text(_LOAD)
        exe.chmod(0o755)
        ps: list[subprocess.Popen[str]] = []
        for k, c in enumerate(self.chunkservers):
            d = self.mount / "load" / c.label
            d.mkdir(parents=True, exist_ok=True)
            run(["mfssetsclass", f"cs{c.label}", str(d)])
            os.chown(d, uid, gid)
            w = self.nodes[names[k % len(names)]]
            r = self.nodes[names[(k + 1) % len(names)]]
            jobs = [("w", w, "w"), ("r", r, "r")] if readers else [("w", w, "w")]
            for mode, node, fname in jobs:
                path = Path(node.mount) / "load" / c.label / fname
                if mode == "r" and not path.exists():
                    # the reader's file: written once, kept on this server
                    subprocess.run(
                        [str(exe), "w", str(path), "0.001", str(mb)],
                        user=uid,
                        group=gid,
                        extra_groups=[],
                        check=True,
                    )
                ps.append(
                    subprocess.Popen(
                        [str(exe), mode, str(path), str(seconds), str(mb)],
                        user=uid,
                        group=gid,
                        extra_groups=[],
                        cwd="/",
                        text=True,
                    )
                )
        self._procs.extend(ps)
        return ps

    # -- fixtures ----------------------------------------------------------------------
    def capture(self, out: Path, files: Iterable[str] = ()) -> None:
        """Real tool output for the collector's replay tests, under `out`:
        mfscli/<SECTION>.txt, mfscli/SCC-<ip>-<port>.txt, mfsfileinfo/<dir>-<name>.txt,
        proc/diskstats, proc/cs<i>-io (/proc/<pid>/io), proc/master-stat."""
        out = Path(out)
        (out / "mfscli").mkdir(parents=True, exist_ok=True)
        smc = (
            "+cpu,+ucpu,+scpu,+statfs,+getattr,+setattr,+lookup,+mkdir,+rmdir,+symlink,"
            "+readlink,+mknod,+unlink,+rename,+link,+readdir,+open,+read,+write"
        )
        sections = {
            "SCS": ["-SCS"],
            "SHD": ["-SHD", "-m", "1"],
            "SMC": ["-SMC", "-a", "5", "-b", smc],
            "SMO": ["-SMO", "-m", "1"],
            "SMS": ["-SMS"],
        }
        for name, args in sections.items():
            (out / "mfscli" / f"{name}.txt").write_text(self.mfscli(*args))
        cols = SCC_COLUMNS
        for c in self.chunkservers:
            spec = ",".join(f"{c.id}:+{k}" for k in cols)
            text = self.mfscli("-SCC", "-c", "5", "-d", spec)
            (out / "mfscli" / f"SCC-{c.ip}-{c.port}.txt").write_text(
                f"# columns: time|{'|'.join(cols)}\n" + text
            )
        (out / "mfsfileinfo").mkdir(exist_ok=True)
        for f in files:
            res = run(["mfsfileinfo", f], check=False)
            name = f"{Path(f).parent.name}-{Path(f).name}"  # load/A/w -> A-w.txt
            (out / "mfsfileinfo" / f"{name}.txt").write_text(res.stdout)
        (out / "proc").mkdir(exist_ok=True)
        loops = {Path(c.loop).name for c in self.chunkservers}
        lines = [
            ln for ln in Path("/proc/diskstats").read_text().splitlines() if ln.split()[2] in loops
        ]
        (out / "proc" / "diskstats").write_text("\n".join(lines) + "\n")
        for c in self.chunkservers:
            (out / "proc" / f"cs{c.index}-io").write_text(Path(f"/proc/{c.pid}/io").read_text())
        (out / "proc" / "master-stat").write_text(
            Path(f"/proc/{self.master['pid']}/stat").read_text()
        )
        (out / "lab.json").write_text((self.lab / "lab.json").read_text())
