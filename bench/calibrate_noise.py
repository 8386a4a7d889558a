"""Fit the simulator's noise and disturbances to real time series (issue 17, item 2).

Every number `iolens.simulate.realism` uses by default comes from here, from the real files
in `../shared/data` (docs/simulator.md, "Noise and disturbances (fitted)", explains each fit):

- service noise: the 5 s LMT counters of a NERSC Lustre file system (`snx11025`), steady
  single-stream transfers only, mapped to the 10 s agent sample;
- per-request spread, cross-OST dispersion and service time vs request size: the `[usecs]`
  and `[bytes]` counters of real 2.14/2.15 servers (DDN ai400x2 at two times 235 s apart,
  DDN es01a job_stats, an ai400 lab system, LLNL lflood);
- diurnal load: other users' metadata activity on NERSC Edison during 500 benchmark jobs
  over six weeks (TOKIO-ABC summaries, LMT-derived);
- missing samples: the LMT cells missing in those 500 job windows; the outage around a
  counter reset: `lmtdb-reset.sqlite3`;
- counter resets: the counter epochs (`start_time`) of every 2.14+ capture.

Clock skew is the one default no file here can pin: it is an assumption, printed as such.

    python bench/calibrate_noise.py [--data ../shared/data] [--plots docs/img] [--json FILE]

It prints every fitted figure, then the `Realism(...)` and `service_time_us` defaults it
proposes; `tests/simulate/test_realism.py` checks that realism.py holds exactly those.
"""

from __future__ import annotations

import argparse
import json
import math
import sqlite3
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import optimize, stats

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import table
from iolens.parse import lctl, lustre_stats
from iolens.parse.lmt import read_lmt
from iolens.parse.lustre_stats import LustreStats
from iolens.simulate.realism import Realism, aggregate_ar1

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LMT_DAY = "pytokio-lmt-and-lustre-cli/snx11025_2018-01-28.sqlite3"
LMT_RESET = "pytokio-lmt-and-lustre-cli/lmtdb-reset.sqlite3"
ABC = "tokio-abc-job-io-summaries/sample_summaries.csv.gz"
WHAM = "lustre-lctl-whamcloud-lustrefs-exporter"
DDN_EARLY = f"{WHAM}/lustre-collector-fixtures/lustre-2.14.0_ddn133__2.14.0_ddn133_exports.txt"
DDN_LATE = f"{WHAM}/testcmds-stdout/lctl_get_param_server_stats.txt"
DDN_JOBS = f"{WHAM}/testcmds-stdout/lctl_get_param_job_stats_B.txt"
AI400 = f"{WHAM}/lustre-collector-fixtures/valid.txt"
LLNL = "lustre-procfs-llnl-lmt/lustre-2.15.4_1"
#: 2.14+ captures whose counter epochs date restarts: (name, lctl output or proc tree).
#: Left out: `lctl_get_param_server_stats.txt`, whose only epochs (io_latency_stats) are
#: stamped 2026, two years after the rest of that file: a spliced test fixture.
EPOCH_CAPTURES = (
    ("LLNL lflood (2.15, one server, 4 OST + 4 MDT)", LLNL),
    (
        "DDN 2.14 ddn145 (VM)",
        f"{WHAM}/lustre-collector-fixtures/lustre-2.14.0_ddn145__2.14.0_ddn145_stats.txt",
    ),
    ("DDN ai400 lab (2.14)", AI400),
    ("DDN fs-OST0003 (2.14)", f"{WHAM}/lustre-collector-fixtures/osd.txt"),
)

AGENT_INTERVAL_S = 10.0  # the simulator's default agent sample (SimConfig.agent_interval_s)
ASSUMED_CLOCK_SKEW_S = 0.5  # no capture pins it: see Skew below
ASSUMED_LOAD_EXP = 2.0  # no capture pins it: see ServiceFit below
ACTIVE = 1e6  # bytes/s: below it an OST is idle for the workload figures
BOOTSTRAP = 500
SEED = 17


def sig(x: float, digits: int = 2) -> float:
    """`x` rounded to `digits` significant digits: the precision the data supports."""
    if x == 0 or not math.isfinite(x):
        return float(x)
    return float(round(x, digits - 1 - math.floor(math.log10(abs(x)))))


# -- 1. service noise: steady streams in the 5 s LMT counters ---------------------------


@dataclass(frozen=True)
class RateNoise:
    """Per-OST throughput noise in the LMT day file (5 s steps)."""

    osts: int
    steps: int
    step_s: float
    busy_floor_mb_s: float
    runs: int
    run_samples: int
    sigma_5s: float  # marginal sd of log rate within a run (`ar1_within_runs`)
    sigma_5s_se: float  # parametric bootstrap over the same run lengths
    sigma_5s_robust: float  # 1.4826 x MAD: the core without the spikes
    excess_kurtosis: float
    phi_5s: float  # AR(1) per step (`ar1_within_runs`)
    phi_5s_se: float
    run_level_sd: float  # sd of the run means across OSTs
    run_level_sd_noise: float  # what noise alone would give
    offset_sigma: float  # persistent per-OST spread left over (0 = none)
    sigma_agent: float
    phi_agent: float
    sigma_60s_derived: float
    workload_sd_5s: float  # robust sd of log(rate / the OST's median), active samples
    workload_sd_60s: float
    idle_share_5s: float  # samples below ACTIVE
    cross_ost_sd_5s: float  # median over steps of the robust sd across active OSTs
    cross_ost_sd_60s: float
    series: list[list[float]] = field(repr=False, default_factory=list)  # for the plot


def lmt_matrix(path: Path) -> tuple[list[str], np.ndarray, float]:
    """Total (read + write) bytes/s per [interval, OST], NaN where a row is missing."""
    data = read_lmt(path)
    times = sorted({s.time for s in data.ost})
    osts = sorted({s.ost for s in data.ost})
    cum = np.full((len(times), len(osts), 2), np.nan)
    ti = {t: i for i, t in enumerate(times)}
    oi = {o: i for i, o in enumerate(osts)}
    for s in data.ost:
        cum[ti[s.time], oi[s.ost]] = (s.read_bytes, s.write_bytes)
    steps = np.diff([t.timestamp() for t in times])
    step = float(np.median(steps))
    delta = np.diff(cum, axis=0).sum(axis=2)
    if (delta < 0).any():  # a reset: this file has none, the reset file is read separately
        raise ValueError(f"{path}: counter reset in the noise file")
    return osts, delta / steps[:, None], step


def steady_runs(rate: np.ndarray, floor: float, min_len: int = 4) -> list[tuple[int, int, int]]:
    """(ost, first, end) of runs of >= `min_len` consecutive samples at or above `floor`."""
    out = []
    for j in range(rate.shape[1]):
        busy = np.nan_to_num(rate[:, j]) >= floor
        i = 0
        while i < len(busy):
            if not busy[i]:
                i += 1
                continue
            k = i
            while k < len(busy) and busy[k]:
                k += 1
            if k - i >= min_len:
                out.append((j, i, k))
            i = k
    return out


def _mean_factor(phi: float, n: int) -> float:
    """n var(mean of n) / sigma^2 for a stationary AR(1): 1 without correlation."""
    h = np.arange(1, n)
    return 1.0 + 2.0 * float(np.sum((n - h) * phi**h)) / n


def ar1_within_runs(runs: list[np.ndarray]) -> tuple[float, float]:
    """(sigma, phi) of a stationary AR(1) seen in short runs whose means are unknown.

    Removing each run's mean biases the plain estimates (sd low, lag-1 correlation very
    low for runs of 4-6). Method of moments instead: the within-run sum of squares has
    expectation sigma^2 sum(n - m_n(phi)) (m_n: see `_mean_factor`), the sum of squared
    first differences 2 sigma^2 (1 - phi) sum(n - 1); their ratio fixes phi, then sigma.
    """
    ss = sum(float(((x - x.mean()) ** 2).sum()) for x in runs)
    dd = sum(float((np.diff(x) ** 2).sum()) for x in runs)
    pairs = sum(len(x) - 1 for x in runs)
    lengths = np.unique([len(x) for x in runs], return_counts=True)

    def effective(phi: float) -> float:
        return sum(c * (n - _mean_factor(phi, n)) for n, c in zip(*lengths, strict=True))

    def gap(phi: float) -> float:
        return 2 * (1 - phi) * pairs / effective(phi) - dd / ss

    lo, hi = -0.95, 0.95
    if gap(lo) * gap(hi) < 0:
        phi = float(optimize.brentq(gap, lo, hi))
    else:  # the data sit beyond what an AR(1) can give: take the nearer bound
        phi = lo if abs(gap(lo)) < abs(gap(hi)) else hi
    return math.sqrt(ss / effective(phi)), phi


def fit_rate_noise(path: Path) -> RateNoise:
    """:func:`rate_noise` of the LMT file at `path`."""
    _osts, rate, step = lmt_matrix(path)
    return rate_noise(rate, step)


def rate_noise(rate: np.ndarray, step: float, bootstrap: int = BOOTSTRAP) -> RateNoise:
    """Noise of steady single-stream transfers in `rate` [step, OST] (bytes/s), then the
    workload's own variability.

    A steady run: >= 4 consecutive samples at >= 1/4 of the highest rate any OST reached
    (the LMT capture's streams run at ~320 MB/s, everything else below 80 MB/s). The first
    and last sample of a run are partial intervals and are dropped. Within a run the stream
    is the same, so what is left is the server's (and the client's) noise (see
    :func:`ar1_within_runs`).
    """
    floor = float(np.nanmax(rate)) / 4
    runs = steady_runs(rate, floor)
    logs, means, series = [], [], []
    for j, a, b in runs:
        x = np.log(rate[a + 1 : b - 1, j])
        logs.append(x)
        means.append(x.mean())
        series.append((rate[a:b, j] / 1e6).tolist())
    sigma, phi = ar1_within_runs(logs)
    var = sigma**2
    # parametric bootstrap: the same run lengths, drawn from the fitted AR(1)
    rng = np.random.default_rng(SEED)
    noise = Realism(service_sigma=sigma, service_ar1=phi)
    boot = np.array(
        [
            ar1_within_runs([np.log(noise.service_noise(rng, 1, len(x))[:, 0]) for x in logs])
            for _ in range(bootstrap)
        ]
    ).reshape(-1, 2)
    e = np.concatenate([x - x.mean() for x in logs])
    robust = float(1.4826 * np.median(np.abs(np.concatenate([x - np.median(x) for x in logs]))))
    sizes = [len(x) for x in logs]
    level_sd = float(np.std(means, ddof=1))
    level_noise = math.sqrt(float(np.mean([var * _mean_factor(phi, n) / n for n in sizes])))
    offset = math.sqrt(max(0.0, level_sd**2 - level_noise**2))
    k_agent = round(AGENT_INTERVAL_S / step)
    s_agent, p_agent = aggregate_ar1(sigma, phi, k_agent)
    s60, _ = aggregate_ar1(sigma, phi, round(60 / step))

    def mad_sd(v: np.ndarray) -> float:
        return float(1.4826 * np.median(np.abs(v - np.median(v))))

    def workload(r: np.ndarray) -> tuple[float, float]:
        logs = []
        for j in range(r.shape[1]):
            v = r[:, j][r[:, j] >= ACTIVE]
            if len(v) >= 2:
                logs.append(np.log(v / np.median(v)))
        spread = mad_sd(np.concatenate(logs)) if logs else math.nan
        return spread, float(np.mean(r < ACTIVE))

    def cross(r: np.ndarray) -> float:
        sds = [mad_sd(np.log(row[row >= ACTIVE])) for row in r if (row >= ACTIVE).sum() >= 4]
        return float(np.median(sds)) if sds else math.nan

    n60 = round(60 / step)
    minutes = rate[: len(rate) // n60 * n60].reshape(-1, n60, rate.shape[1]).mean(axis=1)
    wl5, idle5 = workload(rate)
    wl60, _ = workload(minutes)
    return RateNoise(
        osts=rate.shape[1],
        steps=rate.shape[0],
        step_s=step,
        busy_floor_mb_s=floor / 1e6,
        runs=len(runs),
        run_samples=len(e),
        sigma_5s=sigma,
        sigma_5s_se=float(boot[:, 0].std()) if bootstrap else math.nan,
        sigma_5s_robust=robust,
        excess_kurtosis=float(stats.kurtosis(e)),
        phi_5s=phi,
        phi_5s_se=float(boot[:, 1].std()) if bootstrap else math.nan,
        run_level_sd=level_sd,
        run_level_sd_noise=level_noise,
        offset_sigma=offset,
        sigma_agent=s_agent,
        phi_agent=p_agent,
        sigma_60s_derived=s60,
        workload_sd_5s=wl5,
        workload_sd_60s=wl60,
        idle_share_5s=idle5,
        cross_ost_sd_5s=cross(rate),
        cross_ost_sd_60s=cross(minutes),
        series=series,
    )


# -- 2. latency counters of real servers -------------------------------------------------


@dataclass(frozen=True)
class LatencyPoint:
    """Mean time per RPC of one op on one target (or one job), and its mean RPC size."""

    system: str
    target: str
    op: str
    rpcs: int
    mean_us: float
    mean_bytes: float
    cv: float | None  # per-RPC coefficient of variation, from sumsq


def _point(
    system: str, target: str, op: str, n: int, s: float, ss: float | None, b: float
) -> LatencyPoint:
    mean = s / n
    cv = None
    if ss is not None and ss * n >= s * s:
        cv = math.sqrt(max(0.0, ss / n - mean * mean)) / mean
    return LatencyPoint(system, target, op, n, mean, b / n, cv)


def _lctl_stats(path: Path) -> dict[str, LustreStats]:
    """obdfilter target (and `OSS.ost_io`) -> its stats, from one `lctl get_param` output."""
    out: dict[str, LustreStats] = {}
    for entry in lctl.parse_file(path):
        p = entry.path
        if p.name == "stats" and (p.kind == "obdfilter" or p.target == "OSS.ost_io"):
            parsed = lctl.parse_value(entry, str(path))
            if isinstance(parsed, LustreStats):
                out[p.target] = parsed
    return out


def _long_run(system: str, stats_by_target: dict[str, LustreStats]) -> list[LatencyPoint]:
    pts = []
    for target, st in sorted(stats_by_target.items()):
        if ".exports." in target or target == "OSS.ost_io":
            continue
        c = st.by_name()
        for op in ("read", "write"):
            lat, size = c.get(op), c.get(f"{op}_bytes")
            if lat and size and lat.unit == "usecs" and lat.samples >= 1000 and lat.sum:
                ss = lat.sumsq if lat.sumsq_reliable else None
                pts.append(_point(system, target, op, lat.samples, lat.sum, ss, size.sum or 0))
    return pts


def es01a_jobs(data: Path) -> list[LatencyPoint]:
    """One point per job entry of the es01a OST's job_stats (writes only: no job read)."""
    out = []
    for entry in lctl.parse_file(data / DDN_JOBS):
        for job in lctl.parse_value(entry, str(data / DDN_JOBS)) or []:
            c = job.by_name()
            w, wb = c.get("write"), c.get("write_bytes")
            if w and wb and w.samples and w.sum:
                ss = w.sumsq if w.sumsq is not None else None
                out.append(_point("DDN es01a", job.job_id, "write", w.samples, w.sum, ss, wb.sum))
    return out


def latency_points(data: Path) -> tuple[list[LatencyPoint], list[LatencyPoint], dict[str, float]]:
    """Long-run points (one per target and op, whole counter life), interval points (the
    DDN ai400x2 OSTs between two captures 235 s apart) and that interval's OSS state."""
    early, late = _lctl_stats(data / DDN_EARLY), _lctl_stats(data / DDN_LATE)
    longrun = _long_run("DDN ai400x2", late)
    longrun += _long_run("DDN ai400 lab", _lctl_stats(data / AI400))
    llnl = {
        p.parent.name: lustre_stats.parse_file(p)
        for p in sorted((data / LLNL / "proc/fs/lustre/obdfilter").glob("*/stats"))
    }
    longrun += _long_run("LLNL lflood", llnl)
    # DDN es01a: one OST's job_stats, all jobs pooled into one point (one system, one vote)
    jobs = es01a_jobs(data)
    n = sum(j.rpcs for j in jobs)
    s = sum(j.mean_us * j.rpcs for j in jobs)
    ss = sum(((j.cv or 0.0) ** 2 + 1) * j.mean_us**2 * j.rpcs for j in jobs)
    b = sum(j.mean_bytes * j.rpcs for j in jobs)
    longrun.append(_point("DDN es01a job_stats", "es01a-OST0001", "write", n, s, ss, b))

    interval = []
    for target in sorted(late):
        if target not in early or target == "OSS.ost_io" or ".exports." in target:
            continue
        a, z = early[target].by_name(), late[target].by_name()
        for op in ("read", "write"):
            dn = z[op].samples - a[op].samples
            ds = (z[op].sum or 0) - (a[op].sum or 0)
            dss = (z[op].sumsq or 0) - (a[op].sumsq or 0)
            db = (z[f"{op}_bytes"].sum or 0) - (a[f"{op}_bytes"].sum or 0)
            interval.append(_point("DDN ai400x2, 235 s", target, op, dn, ds, dss, db))
    io_a, io_z = early["OSS.ost_io"].by_name(), late["OSS.ost_io"].by_name()
    dn = io_z["req_active"].samples - io_a["req_active"].samples
    oss = {
        "interval_s": float(
            (late[interval[0].target].snapshot_time or 0)
            - (early[interval[0].target].snapshot_time or 0)
        ),
        "req_active_interval": ((io_z["req_active"].sum or 0) - (io_a["req_active"].sum or 0)) / dn,
        "req_active_longrun": io_z["req_active"].mean or 0.0,
    }
    return longrun, interval, oss


@dataclass(frozen=True)
class RequestSpread:
    """How much single RPC times scatter around their mean (sets the noise of a sample's
    mean when it holds few RPCs) and how OSTs differ at the same time."""

    cv_interval: list[float]
    cv_jobs: float
    cv_longrun: list[float]
    request_cv: float
    same_time_ost_log_ratio: dict[str, float]
    paired_client_log_ratio_mean: dict[str, float]
    paired_client_log_ratio_sd: dict[str, float]
    req_active_interval: float
    req_active_longrun: float
    jobs_compared: int  # es01a jobs of >= 100 RPCs, same OST, same hours
    jobs_log_mean_sd: float  # sd of log(mean RPC time) across them
    jobs_log_mean_sd_sampling: float  # what their RPC counts and CVs alone would give


def fit_request_spread(
    data: Path, longrun: list[LatencyPoint], interval: list[LatencyPoint], oss: dict[str, float]
) -> RequestSpread:
    """CV per RPC within one workload and time (the 235 s interval, the es01a jobs): their
    median is `request_cv`. Long-run CVs mix loads and are shown, not used."""
    cv_int = [p.cv for p in interval if p.cv is not None]
    jobs = next(p for p in longrun if p.system.startswith("DDN es01a"))
    cv_long = [p.cv for p in longrun if p.cv is not None and not p.system.startswith("DDN es01a")]
    request_cv = float(np.median([*cv_int, jobs.cv]))
    by = {(p.target, p.op): p.mean_us for p in interval}
    same_time = {
        op: math.log(by[("ai400x2-OST0000", op)] / by[("ai400x2-OST0001", op)])
        for op in ("read", "write")
    }
    # the same client on both OSTs (1 MiB RPCs only): OST difference with workload held
    per_client: dict[tuple[str, str, str], float] = {}
    for target, st in _lctl_stats(data / DDN_EARLY).items():
        if ".exports." not in target:
            continue
        ost, client = target.split(".exports.")
        c = st.by_name()
        for op in ("read", "write"):
            lat, size = c.get(op), c.get(f"{op}_bytes")
            if lat and size and lat.samples and abs((size.mean or 0) - 2**20) < 1024:
                per_client[(ost, client, op)] = lat.mean or 0.0
    mean, sd = {}, {}
    for op in ("read", "write"):
        r = [
            math.log(v / per_client[("ai400x2-OST0001", cl, o)])
            for (ost, cl, o), v in per_client.items()
            if ost == "ai400x2-OST0000" and o == op and ("ai400x2-OST0001", cl, o) in per_client
        ]
        mean[op], sd[op] = float(np.mean(r)), float(np.std(r, ddof=1))
    big = [j for j in es01a_jobs(data) if j.rpcs >= 100 and j.cv is not None]
    sampling = math.sqrt(float(np.mean([(j.cv or 0.0) ** 2 / j.rpcs for j in big])))
    return RequestSpread(
        jobs_compared=len(big),
        jobs_log_mean_sd=float(np.std([math.log(j.mean_us) for j in big], ddof=1)),
        jobs_log_mean_sd_sampling=sampling,
        cv_interval=cv_int,
        cv_jobs=jobs.cv or 0.0,
        cv_longrun=cv_long,
        request_cv=request_cv,
        same_time_ost_log_ratio=same_time,
        paired_client_log_ratio_mean=mean,
        paired_client_log_ratio_sd=sd,
        req_active_interval=oss["req_active_interval"],
        req_active_longrun=oss["req_active_longrun"],
    )


@dataclass(frozen=True)
class ServiceFit:
    """`service_time_us` constants: (base + size / rate) * (write_cost for writes), fitted in
    log space to the long-run points, one per system and op."""

    points: int
    base_us: float
    bytes_per_us: float
    write_cost: float
    log_se: dict[str, float]  # standard errors of log(parameter)
    residual_sd: float
    residuals: dict[str, float]


def pool_by_system(points: list[LatencyPoint]) -> list[LatencyPoint]:
    """One point per system and op (RPC-weighted means over its targets): one system, one
    vote, so two OSTs of one array do not outvote another site's hardware."""
    acc: dict[tuple[str, str], tuple[int, float, float]] = {}
    for p in points:
        n, s, b = acc.get((p.system, p.op), (0, 0.0, 0.0))
        acc[(p.system, p.op)] = (n + p.rpcs, s + p.mean_us * p.rpcs, b + p.mean_bytes * p.rpcs)
    return [
        LatencyPoint(system, "all", op, n, s / n, b / n, None)
        for (system, op), (n, s, b) in acc.items()
    ]


def fit_service(points: list[LatencyPoint]) -> ServiceFit:
    """Least squares of log(mean RPC time) over the systems' pooled points."""
    points = pool_by_system(points)
    size = np.array([p.mean_bytes for p in points])
    lat = np.array([p.mean_us for p in points])
    write = np.array([p.op == "write" for p in points], float)

    def resid(theta: np.ndarray) -> np.ndarray:
        base, rate, wc = np.exp(theta)
        return np.log((base + size / rate) * (1 + (wc - 1) * write)) - np.log(lat)

    fit = optimize.least_squares(resid, np.log([300.0, 1000.0, 1.3]))
    dof = len(points) - 3
    cov = np.linalg.inv(fit.jac.T @ fit.jac) * float(fit.fun @ fit.fun) / dof
    base, rate, wc = np.exp(fit.x)
    names = ("base_us", "bytes_per_us", "write_cost")
    return ServiceFit(
        points=len(points),
        base_us=float(base),
        bytes_per_us=float(rate),
        write_cost=float(wc),
        log_se={n: float(s) for n, s in zip(names, np.sqrt(np.diag(cov)), strict=True)},
        residual_sd=float(np.sqrt(fit.fun @ fit.fun / dof)),
        residuals={
            f"{p.system} {p.target} {p.op}": float(r) for p, r in zip(points, fit.fun, strict=True)
        },
    )


# -- 3. diurnal load, missing samples (TOKIO-ABC: six weeks of Edison) -------------------


#: md_stats ops LMT stores per second in the TOKIO-ABC summaries (fs_ave_<op>_ops_per_sec)
MD_OPS = "open close getattr setattr getxattr statfs mkdir rmdir mknod link unlink rename"


@dataclass(frozen=True)
class Diurnal:
    """Other users' metadata ops/s per local hour; log-linear fit with one level per file
    system: log(ops) = level_fs + b cos(2 pi h / 24) + c sin(2 pi h / 24)."""

    windows: int
    dropped: int
    days: int
    hours_covered: list[int]
    amplitude: float
    peak_hour: float
    amplitude_ci: tuple[float, float]
    peak_hour_ci: tuple[float, float]
    residual_sd: float
    hourly_median: dict[int, float] = field(repr=False, default_factory=dict)
    points: list[tuple[float, float]] = field(repr=False, default_factory=list)


def _abc(data: Path) -> pd.DataFrame:
    return pd.read_csv(data / ABC)


def harmonic(hours: np.ndarray, fs: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """(amplitude, peak hour, residual sd) of the log-linear fit (see `Diurnal`)."""
    levels = sorted(set(fs))
    w = 2 * np.pi * hours / 24
    x = np.column_stack([*(fs == f for f in levels), np.cos(w), np.sin(w)]).astype(float)
    coef, *_ = np.linalg.lstsq(x, y, rcond=None)
    b, c = coef[-2], coef[-1]
    # exp(r cos(w - p)) has max/min e^{+-r}: as 1 + A cos(...), A = tanh(r)
    r = math.hypot(b, c)
    resid = y - x @ coef
    return math.tanh(r), (math.degrees(math.atan2(c, b)) / 15) % 24, float(np.std(resid))


def fit_diurnal(data: Path) -> Diurnal:
    """Background = the file system's metadata ops/s during the job minus the job's own
    (Darshan opens x 2 for open+close, plus stats); Edison is at NERSC (Pacific time)."""
    d = _abc(data)
    dur = (d["_datetime_end"] - d["_datetime_start"]).to_numpy(float)
    fs_ops = sum(d[f"fs_ave_{op}_ops_per_sec"].to_numpy(float) for op in MD_OPS.split())
    own = (
        2 * d["darshan_tot_opens_posix"].fillna(0).to_numpy(float)
        + d["darshan_tot_stats_posix"].fillna(0).to_numpy(float)
    ) / dur
    bg = fs_ops - own
    local = pd.to_datetime(d["_datetime_start"], unit="s", utc=True).dt.tz_convert(
        "America/Los_Angeles"
    )
    hours = (local.dt.hour + local.dt.minute / 60).to_numpy(float)
    ok = bg > 0
    h, fs, y = hours[ok], d["_file_system"].to_numpy()[ok], np.log(bg[ok])
    amp, peak, rsd = harmonic(h, fs, y)
    rng = np.random.default_rng(SEED)
    boots = []
    for _ in range(BOOTSTRAP):
        i = rng.integers(0, len(y), len(y))
        boots.append(harmonic(h[i], fs[i], y[i])[:2])
    ba = np.array(boots)
    # the peak hour is circular: centre the bootstrap on the estimate before taking quantiles
    dp = (ba[:, 1] - peak + 12) % 24 - 12
    hourly = pd.Series(bg[ok]).groupby(np.floor(h).astype(int)).median()
    return Diurnal(
        windows=int(ok.sum()),
        dropped=int((~ok).sum()),
        days=int(local.dt.date.nunique()),
        hours_covered=sorted(int(x) for x in set(np.floor(hours).astype(int))),
        amplitude=amp,
        peak_hour=peak,
        amplitude_ci=(float(np.quantile(ba[:, 0], 0.025)), float(np.quantile(ba[:, 0], 0.975))),
        peak_hour_ci=(
            float((peak + np.quantile(dp, 0.025)) % 24),
            float((peak + np.quantile(dp, 0.975)) % 24),
        ),
        residual_sd=rsd,
        hourly_median={int(k): float(v) for k, v in hourly.items()},
        points=list(zip(h.tolist(), bg[ok].tolist(), strict=True)),
    )


@dataclass(frozen=True)
class Missing:
    """LMT cells (one OST at one 5 s round) that never arrived."""

    windows: int
    cells: int
    missing_cells: int
    share: float
    windows_with_gaps: int
    start_prob: float  # per OST and round: a gap starts
    mean_run: float  # rounds per gap
    day_file_missing: int
    day_file_cells: int
    reset_missing_rounds: int
    reset_zero_rounds: int
    reset_outage_s: float


def _window_cells(frac: float, osts: int, dur: float, step: float = 5.0) -> tuple[int, int]:
    """(rounds, missing cells) of one job window: pytokio stores the missing share, which is
    k / (osts x rounds) for an integer k; the round count is the one that makes k whole."""
    best = None
    for rounds in range(max(1, int(dur // step) - 1), int(dur // step) + 3):
        k = frac * osts * rounds
        err = abs(k - round(k))
        if best is None or err < best[0]:
            best = (err, rounds, round(k))
    assert best is not None
    return best[1], best[2]


def fit_missing(data: Path) -> Missing:
    """Share of missing cells over the 500 windows, and gap starts and lengths: the chance
    of a window without gaps is exp(-cells x q) (Poisson starts, MLE for q); the mean gap
    length is the missing cells over the expected number of starts."""
    d = _abc(data)
    dur = (d["_datetime_end"] - d["_datetime_start"]).to_numpy(float)
    osts = d["fshealth_ost_count"].to_numpy(float)
    frac = d["fs_frac_missing"].to_numpy(float)
    cells, miss = [], []
    for f, n, t in zip(frac, osts, dur, strict=True):
        rounds, k = _window_cells(f, int(n), t)
        cells.append(int(n) * rounds)
        miss.append(k)
    c, k = np.array(cells, float), np.array(miss, float)
    q, mean_run = gap_process(c, k)
    day = read_lmt(data / LMT_DAY)
    day_cells = len({s.time for s in day.ost}) * len({s.ost for s in day.ost})
    gap_rounds, zero_rounds, step = _reset_outage(data / LMT_RESET)
    return Missing(
        windows=len(c),
        cells=int(c.sum()),
        missing_cells=int(k.sum()),
        share=float(k.sum() / c.sum()),
        windows_with_gaps=int((k > 0).sum()),
        start_prob=q,
        mean_run=mean_run,
        day_file_missing=day_cells - len(day.ost),
        day_file_cells=day_cells,
        reset_missing_rounds=gap_rounds,
        reset_zero_rounds=zero_rounds,
        reset_outage_s=(gap_rounds + zero_rounds) * step,
    )


def gap_process(cells: np.ndarray, missing: np.ndarray) -> tuple[float, float]:
    """(q, mean gap length) from windows of `cells` cells with `missing` of them missing:
    gaps start in a cell with probability q, so a window has none with probability
    exp(-cells q) (maximum likelihood for q); the mean length is the missing cells over the
    expected number of starts."""
    gap = missing > 0

    def nll(q: float) -> float:
        return float(q * cells[~gap].sum() - np.log1p(-np.exp(-cells[gap] * q)).sum())

    q = float(optimize.minimize_scalar(nll, bounds=(1e-9, 0.5), method="bounded").x)
    return q, float(missing.sum() / (cells.sum() * q))


def _reset_outage(path: Path) -> tuple[int, int, float]:
    """Rounds with no row and rounds with zeroed counters around the reset in the file."""
    con = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        stamps = [t for (t,) in con.execute("SELECT TS_ID FROM TIMESTAMP_INFO ORDER BY TS_ID")]
        rows = dict(con.execute("SELECT TS_ID, READ_BYTES + WRITE_BYTES FROM OST_DATA"))
        times = [
            pd.Timestamp(t).timestamp()
            for (t,) in con.execute("SELECT TIMESTAMP FROM TIMESTAMP_INFO ORDER BY TS_ID")
        ]
    finally:
        con.close()
    present = [t for t in stamps if t in rows]
    drop = next(i for i in range(1, len(present)) if rows[present[i]] < rows[present[i - 1]])
    before, after = present[drop - 1], present[drop]
    span = [t for t in stamps if before < t]
    missing = sum(1 for t in span if t not in rows and t < after)
    zeros = sum(1 for t in span if t in rows and rows[t] == 0)
    return missing, zeros, float(np.median(np.diff(times)))


# -- 4. counter resets ------------------------------------------------------------------


@dataclass(frozen=True)
class Resets:
    """Restarts seen in counter epochs while a server was up (after its targets' mount)."""

    captures: list[dict[str, float | str | int]]
    events: int
    exposure_days: float
    per_day: float
    per_day_ci: tuple[float, float]
    nersc_oss_days: float
    nersc_failovers: int
    nersc_upper_per_day: float


#: Counter sets of server targets and services (a client's llite mount is not a restart).
SERVER_KINDS = {"obdfilter", "mdt", "ost", "mds", "mgs", "osd-ldiskfs", "osd-zfs"}


def _epochs(path: Path) -> tuple[list[float], float]:
    """Counter epochs (start_time) of the target stats in a capture, and its snapshot time."""
    found: list[LustreStats] = []
    if path.is_dir():
        for p in sorted(path.glob("proc/fs/lustre/*/*/*stats")):
            if p.name in ("stats", "md_stats") and p.parent.parent.name in SERVER_KINDS:
                found.append(lustre_stats.parse_file(p))
    else:
        for entry in lctl.parse_file(path):
            pp = entry.path
            if (
                pp.name in ("stats", "md_stats")
                and pp.kind in SERVER_KINDS
                and ".exports." not in pp.target
            ):
                parsed = lctl.parse_value(entry, str(path))
                if isinstance(parsed, LustreStats):
                    found.append(parsed)
    epochs = [s.start_time for s in found if s.start_time and s.start_time > 1e9]
    snaps = [s.snapshot_time for s in found if s.start_time and s.snapshot_time]
    return epochs, max(snaps)


def fit_resets(data: Path, cluster_s: float = 3600.0) -> Resets:
    """Events: epochs later than the first mount, restarts less than `cluster_s` apart
    counted once (one maintenance); exposure: first mount to snapshot. Exact Poisson CI."""
    caps, events, exposure = [], 0, 0.0
    for name, rel in EPOCH_CAPTURES:
        epochs, snap = _epochs(data / rel)
        mount = min(epochs)
        later = sorted(e for e in epochs if e > mount + 600)
        n = sum(1 for i, e in enumerate(later) if i == 0 or e - later[i - 1] > cluster_s)
        days = (snap - mount) / 86400
        caps.append({"capture": name, "targets": len(epochs), "days": days, "restarts": n})
        events, exposure = events + n, exposure + days
    lo = stats.chi2.ppf(0.025, 2 * events) / 2 / exposure if events else 0.0
    hi = stats.chi2.ppf(0.975, 2 * events + 2) / 2 / exposure
    # NERSC: OSTs running on their failover partner, sampled at each of the 500 jobs
    d = _abc(data).sort_values("_datetime_start")
    oss_days, failovers = 0.0, 0
    for _fs, g in d.groupby("_file_system"):
        span = (g["_datetime_start"].max() - g["_datetime_start"].min()) / 86400
        oss_days += span * float(g["fshealth_ost_count"].iloc[0])
        failovers += int((np.diff(g["fshealth_ost_overloaded_ost_count"].to_numpy()) != 0).sum())
    upper = stats.chi2.ppf(0.95, 2 * failovers + 2) / 2 / oss_days
    return Resets(
        captures=caps,
        events=events,
        exposure_days=exposure,
        per_day=events / exposure,
        per_day_ci=(float(lo), float(hi)),
        nersc_oss_days=oss_days,
        nersc_failovers=failovers,
        nersc_upper_per_day=float(upper),
    )


# -- the whole calibration ----------------------------------------------------------------


@dataclass(frozen=True)
class Calibration:
    rate: RateNoise
    spread: RequestSpread
    service: ServiceFit
    longrun: list[LatencyPoint]
    interval: list[LatencyPoint]
    diurnal: Diurnal
    missing: Missing
    resets: Resets

    def realism(self) -> dict[str, float]:
        """The `Realism` defaults these fits give, at the precision the data supports."""
        return {
            "service_sigma": sig(self.rate.sigma_agent),
            "service_ar1": round(self.rate.phi_agent, 2),
            "diurnal_amplitude": round(self.diurnal.amplitude, 2),
            "diurnal_peak_hour": round(self.diurnal.peak_hour, 1),
            "resets_per_day": sig(self.resets.per_day),
            "missing_share": sig(self.missing.share),
            "missing_run": sig(self.missing.mean_run),
            "clock_skew_s": ASSUMED_CLOCK_SKEW_S,
            "request_cv": sig(self.spread.request_cv),
            "reset_outage_s": float(round(self.missing.reset_outage_s)),
            "sample_s": AGENT_INTERVAL_S,
        }

    def service_defaults(self) -> dict[str, float]:
        """The `service_time_us` keyword defaults."""
        return {
            "base_us": sig(self.service.base_us),
            "bytes_per_us": sig(self.service.bytes_per_us),
            "write_cost": sig(self.service.write_cost),
            "load_exp": ASSUMED_LOAD_EXP,
        }


def calibrate(data: Path = DATA) -> Calibration:
    """Run every fit on the real files under `data` (FileNotFoundError when absent)."""
    if not (data / LMT_DAY).is_file():
        raise FileNotFoundError(f"{data / LMT_DAY}: the shared real data is not there")
    longrun, interval, oss = latency_points(data)
    return Calibration(
        rate=fit_rate_noise(data / LMT_DAY),
        spread=fit_request_spread(data, longrun, interval, oss),
        service=fit_service(longrun),
        longrun=longrun,
        interval=interval,
        diurnal=fit_diurnal(data),
        missing=fit_missing(data),
        resets=fit_resets(data),
    )


# -- output -------------------------------------------------------------------------------


def _f(x: float, digits: int = 3) -> str:
    return f"{x:.{digits}g}"


def _pair(d: dict[str, float]) -> str:
    return f"{_f(d['read'])}, {_f(d['write'])}"


def report(cal: Calibration) -> Iterable[str]:
    """The fitted figures as Markdown, section by section, then the proposed defaults."""
    r, s, sv, d, m, rs = cal.rate, cal.spread, cal.service, cal.diurnal, cal.missing, cal.resets
    yield f"## 1. Service noise: steady streams in {LMT_DAY}"
    yield f"{r.osts} OSTs x {r.steps} steps of {r.step_s:g} s"
    yield table(
        ["figure", "value"],
        [
            ["steady runs (>= 4 samples at >= 1/4 of the top rate)", f"{r.runs}"],
            [
                "their interior samples; rate floor",
                f"{r.run_samples}; {r.busy_floor_mb_s:.0f} MB/s",
            ],
            [
                "sigma of log rate within a run, 5 s (1 se)",
                f"{_f(r.sigma_5s)} ({_f(r.sigma_5s_se, 2)})",
            ],
            ["robust sigma (1.4826 MAD), 5 s", _f(r.sigma_5s_robust)],
            ["excess kurtosis", _f(r.excess_kurtosis)],
            ["AR(1) per 5 s step (1 se)", f"{_f(r.phi_5s)} ({_f(r.phi_5s_se, 2)})"],
            ["sd of run levels across OSTs", _f(r.run_level_sd)],
            ["... expected from the noise alone", _f(r.run_level_sd_noise)],
            ["persistent per-OST offset (sd)", _f(r.offset_sigma)],
            [f"per agent sample ({AGENT_INTERVAL_S:g} s): sigma", _f(r.sigma_agent)],
            [f"per agent sample ({AGENT_INTERVAL_S:g} s): AR(1)", _f(r.phi_agent)],
            ["per 60 s (derived: no stream lasts 60 s)", _f(r.sigma_60s_derived)],
            ["workload: robust sd of log(rate / OST median), 5 s", _f(r.workload_sd_5s)],
            ["workload: the same, 60 s", _f(r.workload_sd_60s)],
            ["workload: share of 5 s samples under 1 MB/s", _f(r.idle_share_5s)],
            ["cross-OST robust sd at the same step, 5 s", _f(r.cross_ost_sd_5s)],
            ["cross-OST robust sd at the same step, 60 s", _f(r.cross_ost_sd_60s)],
        ],
    )
    yield ""
    yield "## 2. Latency counters: per-RPC spread, OSTs side by side"
    rows = []
    for p in [*cal.longrun, *cal.interval]:
        cv = "-" if p.cv is None else f"{p.cv:.2f}"
        kib = f"{p.mean_bytes / 1024:.0f}"
        rows.append([p.system, p.target, p.op, str(p.rpcs), f"{p.mean_us:.0f}", kib, cv])
    yield table(["system", "target", "op", "RPCs", "mean us", "mean KiB", "CV per RPC"], rows)
    yield ""
    yield table(
        ["figure", "value"],
        [
            ["request CV (median: the 235 s interval, es01a jobs)", _f(s.request_cv)],
            ["same 235 s: log(OST0000 / OST0001), read, write", _pair(s.same_time_ost_log_ratio)],
            ["same client, both OSTs: mean log ratio", _pair(s.paired_client_log_ratio_mean)],
            ["same client, both OSTs: sd across clients", _pair(s.paired_client_log_ratio_sd)],
            [f"{s.jobs_compared} es01a jobs on one OST: sd of log mean", _f(s.jobs_log_mean_sd)],
            ["... expected from their RPC counts alone", _f(s.jobs_log_mean_sd_sampling)],
            ["OSS busy threads (req_active), 235 s", f"{s.req_active_interval:.1f}"],
            ["OSS busy threads (req_active), long run", f"{s.req_active_longrun:.1f}"],
        ],
    )
    yield ""
    yield f"## 3. Service time vs size and mix ({sv.points} system points, log least squares)"
    se = {k: f"{math.exp(v):.2f}" for k, v in sv.log_se.items()}
    yield table(
        ["constant", "fit", "x/ factor (1 se)"],
        [
            ["base_us", f"{sv.base_us:.0f}", se["base_us"]],
            ["bytes_per_us", f"{sv.bytes_per_us:.0f}", se["bytes_per_us"]],
            ["write_cost", f"{sv.write_cost:.2f}", se["write_cost"]],
            ["load_exp", f"{ASSUMED_LOAD_EXP:g} (assumption)", "-"],
            ["residual sd (log)", _f(sv.residual_sd), "-"],
        ],
    )
    yield ""
    yield f"## 4. Diurnal load: {d.windows} TOKIO-ABC job windows, {d.days} days"
    yield f"({d.dropped} windows dropped: the job's own metadata exceeds the file system's)"
    amp_ci = f"{d.amplitude_ci[0]:.2f}-{d.amplitude_ci[1]:.2f}"
    peak_ci = f"{d.peak_hour_ci[0]:.1f}-{d.peak_hour_ci[1]:.1f}"
    yield table(
        ["figure", "value"],
        [
            ["local hours with data", ",".join(map(str, d.hours_covered))],
            ["amplitude (1 + A cos)", f"{d.amplitude:.2f} (95 % {amp_ci})"],
            ["peak hour (Pacific)", f"{d.peak_hour:.1f} (95 % {peak_ci})"],
            ["residual sd of log ops/s", _f(d.residual_sd)],
        ],
    )
    yield ""
    yield "## 5. Missing samples and the outage around a reset"
    yield table(
        ["figure", "value"],
        [
            ["LMT cells in the job windows", str(m.cells)],
            ["... missing", str(m.missing_cells)],
            ["missing share per OST round", _f(m.share)],
            ["windows with a gap", f"{m.windows_with_gaps} of {m.windows}"],
            ["gap start per OST round (MLE)", _f(m.start_prob)],
            ["mean gap length (rounds)", _f(m.mean_run)],
            ["day file: missing cells", f"{m.day_file_missing} of {m.day_file_cells}"],
            ["reset file: rounds without a row", str(m.reset_missing_rounds)],
            ["reset file: rounds with zeroed counters", str(m.reset_zero_rounds)],
            ["outage before the restart", f"{m.reset_outage_s:g} s"],
        ],
    )
    yield ""
    yield "## 6. Counter resets (counter epochs of 2.14+ captures)"
    rows = [
        [str(c["capture"]), str(c["targets"]), f"{float(c['days']):.2f}", str(c["restarts"])]
        for c in rs.captures
    ]
    yield table(["capture", "targets", "days up", "restarts"], rows)
    yield ""
    ci = f"{rs.per_day_ci[0]:.4f}-{rs.per_day_ci[1]:.2f}"
    yield (
        f"{rs.events} restart(s) in {rs.exposure_days:.1f} server-days: "
        f"{rs.per_day:.3f}/day (95 % {ci}); NERSC Edison: {rs.nersc_failovers} failovers "
        f"in {rs.nersc_oss_days:.0f} OSS-days (< {rs.nersc_upper_per_day:.5f}/day, 95 %)."
    )
    yield ""
    yield f"## 7. Clock skew: an assumption ({ASSUMED_CLOCK_SKEW_S} s sd)"
    yield "No capture has two hosts stamping the same round."
    yield ""
    yield "## Proposed defaults"
    yield "Realism(" + ", ".join(f"{k}={v!r}" for k, v in cal.realism().items()) + ")"
    kw = ", ".join(f"{k}={v!r}" for k, v in cal.service_defaults().items())
    yield f"service_time_us(..., {kw})"


def plots(cal: Calibration, out: Path) -> list[Path]:
    """Two PNGs for docs/simulator.md: the steady streams and their noise; the day."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    r = cal.rate
    fig, (a, b) = plt.subplots(1, 2, figsize=(9, 3.2), dpi=100)
    for run in r.series:
        a.plot(np.arange(len(run)) * r.step_s, run, marker="o", ms=3, lw=1)
    a.set(
        xlabel="seconds into the run",
        ylabel="MB/s",
        title="Steady streams, one OST each (LMT, 5 s)",
    )
    resid = []
    for run in r.series:
        x = np.log(np.array(run[1:-1]))
        resid += list(x - x.mean())
    b.hist(resid, bins=15, density=True, color="#8ab")
    xs = np.linspace(-0.2, 0.2, 200)
    b.plot(xs, stats.norm.pdf(xs, 0, r.sigma_5s), "k-", lw=1, label=f"normal, sd {r.sigma_5s:.3f}")
    b.set(xlabel="log(rate / run mean)", title="Their 5 s noise")
    b.legend(fontsize=8)
    fig.tight_layout()
    p1 = out / "noise-streams.png"
    fig.savefig(p1)
    plt.close(fig)

    d = cal.diurnal
    fig, ax = plt.subplots(figsize=(6.5, 3.2), dpi=100)
    h, v = zip(*d.points, strict=True)
    ax.scatter(h, v, s=6, alpha=0.35, color="#8ab", label="job windows")
    hm = sorted(d.hourly_median.items())
    ax.plot([k + 0.5 for k, _ in hm], [x for _, x in hm], "ko", ms=4, label="hourly median")
    hours = np.linspace(0, 24, 97)
    med = float(np.median(v))
    curve = 1 + d.amplitude * np.cos(2 * np.pi * (hours - d.peak_hour) / 24)
    ax.plot(
        hours,
        med * curve,
        "r-",
        lw=1.2,
        label=f"1 + {d.amplitude:.2f} cos, peak {d.peak_hour:.1f} h",
    )
    ax.set_yscale("log")
    ax.set(xlabel="hour (Pacific)", ylabel="other users' metadata ops/s", xlim=(0, 24))
    ax.set_title("Edison scratch, Feb-Mar 2017 (TOKIO-ABC)")
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    p2 = out / "noise-diurnal.png"
    fig.savefig(p2)
    plt.close(fig)
    return [p1, p2]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA, help="the shared real data folder")
    ap.add_argument("--plots", type=Path, help="write the PNGs into this folder")
    ap.add_argument("--json", type=Path, help="write every figure as JSON")
    args = ap.parse_args()
    cal = calibrate(args.data)
    for line in report(cal):
        print(line)
    if args.plots:
        for p in plots(cal, args.plots):
            print(f"wrote {p}")
    if args.json:
        doc = asdict(cal) | {"realism": cal.realism(), "service": cal.service_defaults()}
        args.json.write_text(json.dumps(doc, indent=1, default=float))


if __name__ == "__main__":
    main()
