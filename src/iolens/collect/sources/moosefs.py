"""MooseFS: the master as the MDS, each chunkserver as an OSS with one target.

One agent anywhere that reaches the master runs `mfscli` (moosefs-cli), which asks the
master and, through it, every chunkserver; two calls a round (docs/sources.md, "MooseFS"):

    mfscli -H M -P P -n -s '|' -SCS -SHD -m 1 -SMO -m 1 -SMC -a 5 -b +cpu,+statfs,...
    mfscli -H M -P P -n -s '|' -SCC -c 5 -d IP:PORT:+datallopr,...   (every chunkserver)

What lands where (`iolens.parse.moosefs` reads the text):

- chunkserver charts, per minute -> `ost` `IP:PORT` (its parent: `oss` `mfscs@IP:PORT`):
  `read_ops`/`write_ops` = low-level (64 KiB block) disk reads/writes, `read_bytes`/
  `write_bytes`, and `service_us` = (rtime + wtime) / those ops, the mean time per disk
  operation (the `[usecs]` of a Lustre OST); the chart `load` -> `oss` `queue_max`, the
  most operations queued in the minute;
- `-SCS` -> `ost` gauges `chunks`, `space_used_bytes`, `space_total_bytes`, and
  `jobstats` = 0: the target keeps no per-job statistics, so ingest attributes the jobs'
  traces to it (`ingest/traced_targets.py`);
- `-SHD -m 1` (the last minute, per disk) -> `disk` `IP:PORT:PATH` gauges `read_us`,
  `write_us`, `fsync_us` (means), `read_ops`, `write_ops`, `fsync_ops`, `disk_ok`;
- master charts, per minute -> `mdt` `mfsmeta@IP:PORT` `md_ops` (every metadata operation
  the master served: not `read`/`write`, chunk locations for data I/O) and `mds` `mfsmaster@IP:PORT`
  (its parent) `cpu_busy`: master CPU over one core, as the master serves metadata on one thread;
- `-SMO -m 1` (this hour, per session) -> `mdt_client` `<mdt>:<client IP>` `md_ops`
  (sessions from one IP summed), the per-NID export stats of a Lustre MDT.

Chart rows are per minute as the servers counted them, so they are shipped with their own
minute (`Reading.window`), each once. `mfscli` prints chart labels in its local time: it
runs with TZ=UTC. A captured tree replays through the same code: `<root>/mfscli/servers.txt`
and `<root>/mfscli/charts.txt` hold the two outputs (`capture`).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

from iolens.collect.base import Reading
from iolens.errors import InputError
from iolens.parse import moosefs as mfs
from iolens.parse._common import read_text
from iolens.parse.moosefs import mds_id, mdt_id, oss_id

#: Chunkserver chart columns, per chunkserver, in this order.
CS_CHARTS = (
    "datallopr",
    "datallopw",
    "databytesr",
    "databytesw",
    "rtime",
    "wtime",
    "hlopr",
    "hlopw",
    "load",
)
#: Master chart columns: CPU, then every operation `-SMO` also counts per session.
MASTER_CHARTS = ("cpu",)
#: Minutes of chart history asked for each round (the agent ships each minute once).
CHART_MINUTES = 5
#: mfscli chart times: nanoseconds per minute of rtime/wtime (measured: rtime / datallopr
#: equals -SHD's mean read time in us x 1000).
NS_PER_US = 1000.0
CAPTURE_DIR = "mfscli"
TIMEOUT_S = 20.0


class MoosefsSource:
    """Every chunkserver and the master, as seen through `mfscli`."""

    name: ClassVar[str] = "moosefs"
    #: Off unless configured: one agent per file system asks the master, not every node.
    DEFAULT_ENABLED: ClassVar[bool] = False
    OPTIONS: ClassVar[tuple[str, ...]] = ("master", "mfscli", "master_cpus")
    SAMPLE: ClassVar[str] = (
        "# Ask a MooseFS master (and through it every chunkserver) with mfscli: enable on\n"
        "# one host per file system\n"
        "enabled = false\n"
        'master = "mfsmaster:9421"\n'
        'mfscli = "mfscli"\n'
        "# CPU the master may use: it serves metadata on one thread (1), less if capped\n"
        "master_cpus = 1.0"
    )

    def __init__(
        self,
        host: str,
        kind: str | None = None,
        master: str = "mfsmaster:9421",
        mfscli: str = "mfscli",
        master_cpus: float = 1.0,
    ) -> None:
        self.host = host
        try:
            self.master_cpus = float(master_cpus)
        except (TypeError, ValueError):
            self.master_cpus = 0.0
        if not self.master_cpus > 0:
            raise InputError("sources.moosefs.master_cpus", f"must be > 0, got {master_cpus!r}")
        address, _, port = master.rpartition(":")
        if not address or not mfs.is_port(port):
            raise InputError("sources.moosefs.master", f"expected HOST:PORT, got {master!r}")
        self.master_host, self.master_port = address, int(port)
        self.mfscli = mfscli

    # -- fetching: live through mfscli, or from a captured tree -----------------------------
    def _base(self) -> list[str]:
        return [self.mfscli, "-H", self.master_host, "-P", str(self.master_port), "-n", "-s", "|"]

    def _run(self, args: list[str]) -> str:
        cmd = self._base() + args
        env = dict(os.environ, TZ="UTC", LC_ALL="C")
        try:
            res = subprocess.run(
                cmd, capture_output=True, text=True, timeout=TIMEOUT_S, env=env, check=False
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise InputError(" ".join(cmd[:1] + args[:1]), f"cannot run: {exc}") from None
        if res.returncode != 0 or "Traceback" in res.stdout:
            tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["no output"]
            raise InputError(" ".join(cmd[:5]), f"exit {res.returncode}: {tail[0]}")
        return res.stdout

    def servers_args(self) -> list[str]:
        charts = ",".join(f"+{c}" for c in MASTER_CHARTS)
        return [
            "-SCS",
            "-SHD",
            "-m",
            "1",
            "-SMO",
            "-m",
            "1",
            "-SMC",
            "-a",
            str(CHART_MINUTES),
            "-b",
            charts,
        ]

    @staticmethod
    def charts_args(chunkservers: list[mfs.Chunkserver]) -> list[str]:
        cols = ",".join(f"{cs.address}:+{c}" for cs in chunkservers for c in CS_CHARTS)
        return ["-SCC", "-c", str(CHART_MINUTES), "-d", cols]

    def fetch(self, root: Path) -> tuple[str, str, str] | None:
        """(servers text, charts text, what to name in errors); None for a captured tree
        (a root other than /) without a capture of this source: absent, not an error."""
        captured = root / CAPTURE_DIR
        if captured.is_dir():
            return (
                read_text(captured / "servers.txt"),
                read_text(captured / "charts.txt"),
                str(captured),
            )
        if root.resolve() != Path("/"):
            return None
        servers = self._run(self.servers_args())
        css = mfs.parse_chunkservers(servers)
        charts = self._run(self.charts_args(css)) if css else ""
        return servers, charts, f"mfscli -H {self.master_host} -P {self.master_port}"

    def capture(self, into: Path) -> None:
        """Save one round's two outputs as a tree `collect(into)` replays."""
        d = into / CAPTURE_DIR
        d.mkdir(parents=True, exist_ok=True)
        servers = self._run(self.servers_args())
        css = mfs.parse_chunkservers(servers)
        (d / "servers.txt").write_text(servers)
        (d / "charts.txt").write_text(self._run(self.charts_args(css)) if css else "")

    # -- readings ------------------------------------------------------------------------
    def collect(self, root: Path) -> Iterator[Reading]:
        got = self.fetch(root)
        if got is None:
            return
        servers, charts, where = got
        css = mfs.parse_chunkservers(servers, where)
        yield from self._chunkservers(css)
        yield from self._disks(mfs.parse_disks(servers, where))
        if css:
            rows = mfs.parse_chart(
                charts, "Chunkserver chart data", len(CS_CHARTS) * len(css), where
            )
            yield from self._cs_charts(css, rows)
        address = f"{self.master_host}:{self.master_port}"
        mdt, mds = mdt_id(address), mds_id(address)
        yield from self._master_charts(
            mds, mfs.parse_chart(servers, "Master chart data", len(MASTER_CHARTS), where)
        )
        yield from self._mounts(mdt, mds, mfs.parse_mounts(servers, where))

    @staticmethod
    def _chunkservers(css: list[mfs.Chunkserver]) -> Iterator[Reading]:
        for cs in css:
            for metric, value in (
                ("chunks", cs.chunks),
                ("space_used_bytes", cs.used_bytes),
                ("space_total_bytes", cs.total_bytes),
                ("jobstats", 0),  # no per-job statistics: ingest attributes the traces
            ):
                yield Reading(
                    "ost",
                    cs.address,
                    metric,
                    float(value),
                    counter=False,
                    parent=oss_id(cs.address),
                )

    @staticmethod
    def _disks(disks: list[mfs.Disk]) -> Iterator[Reading]:
        for d in disks:
            comp = f"{d.chunkserver}:{d.path}"
            yield Reading("disk", comp, "disk_ok", float(d.status == "ok"), counter=False)
            for metric, value in (
                ("read_us", d.read_us),
                ("write_us", d.write_us),
                ("fsync_us", d.fsync_us),
                ("read_ops", d.read_ops),
                ("write_ops", d.write_ops),
                ("fsync_ops", d.fsync_ops),
            ):
                if value is not None:
                    yield Reading("disk", comp, metric, float(value), counter=False)

    @staticmethod
    def _cs_charts(css: list[mfs.Chunkserver], rows: list[mfs.ChartRow]) -> Iterator[Reading]:
        n = len(CS_CHARTS)
        for row in rows:
            window = (row.start, row.start + 60.0)
            for i, cs in enumerate(css):
                v = dict(zip(CS_CHARTS, row.values[i * n : (i + 1) * n], strict=True))
                if any(
                    v[c] is None for c in ("datallopr", "datallopw", "databytesr", "databytesw")
                ):
                    continue  # the chunkserver was not up for that minute
                ost, oss = cs.address, oss_id(cs.address)
                for metric, col in (
                    ("read_ops", "datallopr"),
                    ("write_ops", "datallopw"),
                    ("read_bytes", "databytesr"),
                    ("write_bytes", "databytesw"),
                ):
                    yield Reading("ost", ost, metric, v[col] or 0.0, window=window, parent=oss)
                ops = (v["datallopr"] or 0.0) + (v["datallopw"] or 0.0)
                if ops > 0 and v["rtime"] is not None and v["wtime"] is not None:
                    busy_us = (v["rtime"] + v["wtime"]) / NS_PER_US
                    yield Reading(
                        "ost",
                        ost,
                        "service_us",
                        busy_us,
                        counter=False,
                        per=ops,
                        window=window,
                        parent=oss,
                    )
                if v["load"] is not None:
                    yield Reading("oss", oss, "queue_max", v["load"], counter=False, window=window)

    def _master_charts(self, mds: str, rows: list[mfs.ChartRow]) -> Iterator[Reading]:
        for row in rows:
            cpu = row.values[0]
            if cpu is None:
                continue
            window = (row.start, row.start + 60.0)
            cores = cpu / 100.0
            yield Reading("mds", mds, "cpu_busy", cores, counter=False, window=window)
            yield Reading(
                "mds", mds, "busy", cores / self.master_cpus, counter=False, window=window
            )

    @staticmethod
    def _mounts(mdt: str, mds: str, mounts: list[mfs.Mount]) -> Iterator[Reading]:
        """The master's metadata operations, from every session's count (`-SMO`).

        Not from the master's charts: they count fewer operations than the sessions do
        (measured over 83,500 create + stat + unlink loops: 4 per loop in the charts, 6 in
        `-SMO`, 6 in the clients' `.oplog`), and the per-job counts of `moosefs_client`
        must be in the same units as the total they are a share of."""
        by_ip: dict[str, float] = {}
        for m in mounts:
            by_ip[m.ip] = by_ip.get(m.ip, 0.0) + float(sum(m.ops[op] for op in mfs.METADATA_OPS))
        # this hour's counts: back to zero on the hour, which the agent rates as a restart
        yield Reading("mdt", mdt, "md_ops", sum(by_ip.values()), parent=mds)
        for ip, ops in sorted(by_ip.items()):
            yield Reading("mdt_client", f"{mdt}:{ip}", "md_ops", ops, sparse=True)
