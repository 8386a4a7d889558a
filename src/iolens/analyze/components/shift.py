"""A sustained shift in a server's latency: CUSUM on its log-ratio to its peers or its past.

Pure numpy on arrays `[component, minute]`, so the detector (`peers.py`) and the accuracy
bench (`bench/slow_ost_roc.py`) run the same code. The steps, each for a reason:

1. **Log latency, with the work's part taken out.** A server's mean time per request depends
   on what it is asked (bigger requests take longer, writes and reads cost differently), so
   `log(latency)` is regressed on `log(bytes per request)` and the write share of requests
   across the components busy in the same minute (all centred on that minute's mean), with
   a Huber fit that slow minutes cannot pull, on each component's minute-to-minute
   changes (a fault that brings other work with it then counts at its two ends, not at
   each of its minutes: `_changes`). The elasticity to size is kept in [0, 1] (a
   request cannot get cheaper as it grows, nor dearer than in proportion) and the
   write/read cost ratio within 1/8..8; a covariate that does not vary is left out. What
   remains is the server's own speed. A group that never has peers is
   not normalised: in one component's own series, a change of work and a fault arrive
   together (the jobs that run when it is slow) and a fit would confuse them.
2. **A reference.** With at least `min_peers` components busy in a minute, the reference is
   the median of the *other* busy ones (leave-one-out, so a component is never compared
   with itself); else the component's own latency. A component keeps the reference it has
   in most of its busy minutes and skips the others (the two kinds of log-ratio have
   different noise, and the test needs one noise model). Its usual level under that
   reference is subtracted, so an OST that is always 20 % slower than the others
   (hardware, fill level) is normal for it. That level is the lower quartile plus 0.6745
   noise sigmas (the median, for noise alone): slowness only ever raises latency, so a
   shift covering up to three quarters of the loaded busy minutes cannot become the
   normal it is measured against.
3. **Noise from the data.** Per-minute latencies are correlated (AR(1)); `phi` and the
   innovations' `sigma` are estimated robustly from first differences (MADs, which a
   level shift touches only at its ends), pooled over the components of a group and per
   reference kind, and the series pre-whitened: `u_t = (d_t - phi * d_{t-1}) / sigma` is
   close to independent N(0, 1) while nothing changes. What AR(1) leaves correlated is
   measured by batch means (the long-run variance) and `u` stretched by it, so sums of
   `u` (which is what a CUSUM is) vary as the test assumes; then `u` is clipped to
   +-`clip` so that no single minute decides.
4. **One-sided CUSUM** `S_t = max(0, S_{t-1} + u_t - k)`, alarm at `S > h`. For
   independent N(0, 1) input, Siegmund's approximation gives the average run length
   between false alarms as a function of `h`; `h` is solved for `false_alarm_minutes`, so
   the threshold follows from a false-alarm rate, not from any fault size. (When the noise
   is so small that half of `min_slowdown` is more than `k` sigmas, `u` is lowered by the
   difference: a quiet server's 5 % shift is certain, and not worth an episode; false
   alarms only get rarer.) The episode starts where the
   excursion that alarmed began (the CUSUM change-point estimate); its end is found the
   same way by a second CUSUM, for a fall from the episode's own mean back to normal,
   with the same threshold: the episode ends where that fall began.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

#: Reference kinds of a minute.
NONE, PEERS, HISTORY = 0, 1, 2
MODE_NAMES = {PEERS: "peers", HISTORY: "history"}

#: Siegmund's correction for the overshoot of a normal CUSUM over its threshold.
_SIEGMUND = 1.166


@dataclass(frozen=True)
class ShiftParams:
    """What the test needs that the data do not give (defaults and reasoning: diagnosis.md)."""

    min_peers: int = 3  # busy components in a minute for a peer reference (itself included)
    false_alarm_minutes: float = 1.0e6  # average busy minutes between false alarms
    k: float = 0.5  # CUSUM reference value, in noise sigmas
    clip: float = 5.0  # no minute adds more than this many sigmas
    min_sigma: float = 0.02  # noise floor (log units), for noise-free series (a simulator)
    min_noise_minutes: int = 60  # busy minutes needed to learn the noise of a reference kind
    max_idle: int = 30  # minutes without demand after which the CUSUM forgets
    min_slowdown: float = 1.25  # a smaller shift is not worth an episode, however sure

    @property
    def h(self) -> float:
        return cusum_threshold(self.k, self.false_alarm_minutes)


def cusum_arl(k: float, h: float) -> float:
    """Average run length of a one-sided CUSUM on N(0, 1) data (Siegmund, 1985)."""
    b = 2 * k * (h + _SIEGMUND)
    return (math.exp(b) - b - 1) / (2 * k * k)


def cusum_threshold(k: float, arl: float) -> float:
    """The `h` whose in-control average run length is `arl` (bisection; ARL grows with h)."""
    lo, hi = 0.0, 200.0
    for _ in range(100):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if cusum_arl(k, mid) < arl else (lo, mid)
    return hi


@dataclass(frozen=True)
class Noise:
    """The pre-whitening model of one reference kind."""

    ar1: float  # lag-1 correlation of the log-ratio
    sigma: float  # standard deviation of the innovations, log units
    minutes: int  # busy minutes it was estimated from
    long_run: float = 1.0  # what the innovations' sd was stretched by (see `_long_run`)


@dataclass
class Shift:
    """The evidence of every component and minute (arrays [component, minute])."""

    busy: np.ndarray  # the minute has demand and a latency
    mode: np.ndarray  # NONE, PEERS or HISTORY: what the minute was compared with
    peers: np.ndarray  # busy peers the minute was compared with (0 under HISTORY)
    adjusted: np.ndarray  # log latency with the work's part removed
    log_ratio: np.ndarray  # adjusted minus reference minus the component's usual offset
    u: np.ndarray  # standardised innovations; NaN where not assessed
    noise: dict[int, Noise]  # per mode
    size_elasticity: float
    write_factor: float
    load_elasticity: float  # how latency grows with the requests a server is asked to serve
    unassessed: dict[int, int]  # busy minutes per mode left out for want of noise data


def standardise(
    latency: np.ndarray,
    busy: np.ndarray,
    bytes_per_request: np.ndarray,
    write_share: np.ndarray,
    p: ShiftParams,
    load: np.ndarray | None = None,
) -> Shift:
    """Steps 1-3 of the module docstring for one group of comparable components."""
    busy = busy & np.isfinite(latency) & (latency > 0)
    n_busy = busy.sum(axis=0)
    mode = np.where(busy, np.where(n_busy >= p.min_peers, PEERS, HISTORY), NONE).astype(np.int8)
    # One reference per component, the one it mostly has: the two have different noise
    # (the history also moves with the load every server shares), so a series hopping
    # between them would be judged against the wrong noise; the other minutes are skipped.
    peers_mostly = (mode == PEERS).sum(axis=1) >= (mode == HISTORY).sum(axis=1)
    mode = np.where(np.where(peers_mostly[:, None], PEERS, HISTORY) == mode, mode, NONE)
    mode = mode.astype(np.int8)
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.where(busy, np.log(latency), np.nan)
        size = np.where(busy & (bytes_per_request > 0), np.log(bytes_per_request), np.nan)
    mix = np.where(busy, write_share, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        rate = (
            np.where(busy & (load > 0), np.log(load), np.nan)
            if load is not None
            else np.full(y.shape, np.nan)
        )

    b_size, b_write, b_load = _work_fit(y, size, mix, mode, rate)
    adjusted = (
        y
        - b_size * np.nan_to_num(size - _nanmedian(size))
        - b_write * np.nan_to_num(mix)
        - b_load * np.nan_to_num(rate - _nanmedian(rate))
    )

    peer_ref, peers = _leave_one_out_median(np.where(mode == PEERS, adjusted, np.nan))
    raw = np.where(mode == PEERS, adjusted - peer_ref, np.where(mode == HISTORY, adjusted, np.nan))

    ratio = np.full(y.shape, np.nan)
    u = np.full(y.shape, np.nan)
    noise: dict[int, Noise] = {}
    unassessed: dict[int, int] = {}
    for m in (PEERS, HISTORY):
        here = mode == m
        if not here.any():
            continue
        if here.sum() < p.min_noise_minutes:
            unassessed[m] = int(here.sum())
            continue
        nz = _noise(raw, here)  # from differences: each row's level cancels
        level = _usual(raw, here, nz.sigma / math.sqrt(1 - nz.ar1**2))
        nz = Noise(nz.ar1, max(nz.sigma, p.min_sigma), nz.minutes)  # the floor: for the test only
        here &= np.isfinite(level)[:, None]
        d = raw - np.nan_to_num(level)[:, None]
        ratio = np.where(here, d, ratio)
        prev_ok = np.zeros_like(here)
        prev_ok[:, 1:] = here[:, 1:] & here[:, :-1]
        prev = np.zeros_like(d)
        prev[:, 1:] = d[:, :-1]
        stationary = nz.sigma / math.sqrt(1 - nz.ar1**2)
        e = np.where(prev_ok, (d - nz.ar1 * np.nan_to_num(prev)) / nz.sigma, d / stationary)
        stretch = _long_run(e, here)
        noise[m] = Noise(nz.ar1, nz.sigma, nz.minutes, stretch)
        # On a quiet series even a 5 % shift is certain; the CUSUM's reference value is
        # then raised to half the smallest slowdown worth reporting, in noise units.
        least = math.log(p.min_slowdown) * (1 - nz.ar1) / (nz.sigma * stretch) / 2
        u = np.where(here, np.clip(e / stretch - max(0.0, least - p.k), -p.clip, p.clip), u)
    return Shift(
        busy=busy,
        mode=mode,
        peers=np.where(mode == PEERS, peers, 0),
        adjusted=adjusted,
        log_ratio=ratio,
        u=u,
        noise=noise,
        size_elasticity=b_size,
        write_factor=math.exp(b_write),
        load_elasticity=b_load,
        unassessed=unassessed,
    )


def _nanmedian(a: np.ndarray, axis: int | None = None) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(a, axis=axis)


def _centred(a: np.ndarray, mode: np.ndarray) -> np.ndarray:
    """`a` minus its mean over the same minute's peers, on PEERS cells (NaN elsewhere): the
    fixed-effects form of the regression, so only differences between components at the
    same time inform it."""
    peer = np.where(mode == PEERS, a, np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return peer - np.nanmean(peer, axis=0)[None, :]


#: Bounds of the work fit (module docstring, step 1), and the least spread worth fitting.
_SIZE_BOUNDS = (0.0, 1.0)
_LOAD_BOUNDS = (0.0, 1.5)
_WRITE_BOUNDS = (-math.log(8), math.log(8))
_MIN_SPREAD = 0.05
_MIN_FIT_POINTS = 30
_MAX_FIT_POINTS = 100_000


def _work_fit(
    y: np.ndarray, size: np.ndarray, mix: np.ndarray, mode: np.ndarray, rate: np.ndarray
) -> tuple[float, float, float]:
    """(size elasticity, log write/read cost ratio, load elasticity) from Huber
    regressions across peers; 0 for what cannot be fitted.

    What a request costs (its size, read or write) is fitted on minute-to-minute changes
    (`_changes`): a fault can bring bigger requests with it, and in levels those minutes
    would fit it away. The load term is what tells a hot spot from a failing server:
    among servers busy at the same minute, one asked for more requests takes longer per
    request (queueing, disk contention), and that part of its latency is its load, not
    its health. It is fitted on levels, with the request's cost taken out: a queue builds
    over minutes, which changes see only in part (on the simulator they found 25 % less
    of it, and hot spots came back as episodes), and here a fault can only pull the
    other way: a failing server is slower at its load, and a slow server in a closed
    loop is asked *fewer* requests per second, so its part only grows."""
    yc, sc, wc, rc = (_centred(a, mode) for a in (y, size, mix, rate))
    rc = np.where(np.isfinite(rc), rc, 0.0)  # no rate known: no load part
    b_size, b_write, _ = _huber(_changes(yc), [_changes(sc), _changes(wc), _changes(rc)])
    b_size, b_write = float(np.clip(b_size, *_SIZE_BOUNDS)), float(np.clip(b_write, *_WRITE_BOUNDS))
    (b_load,) = _huber((yc - b_size * sc - b_write * wc).ravel(), [rc.ravel()])
    return b_size, b_write, float(np.clip(b_load, *_LOAD_BOUNDS))


def _huber(y: np.ndarray, xs: list[np.ndarray]) -> list[float]:
    """Coefficients of a Huber regression of `y` on `xs` (no intercept: all centred); 0
    for a covariate that does not vary, all 0 with too few points."""
    from sklearn.linear_model import HuberRegressor  # import cost only when fitting

    ok = np.isfinite(y) & np.logical_and.reduce([np.isfinite(x) for x in xs])
    out = [0.0] * len(xs)
    if ok.sum() < _MIN_FIT_POINTS:
        return out
    if ok.sum() > _MAX_FIT_POINTS:  # a few numbers need no more: every n-th point, in order
        keep = np.flatnonzero(ok)
        ok = np.zeros_like(ok)
        ok[keep[:: -(-keep.size // _MAX_FIT_POINTS)]] = True
    columns = [i for i, x in enumerate(xs) if _mad(x[ok]) >= _MIN_SPREAD]
    if not columns:
        return out
    x = np.column_stack([xs[i][ok] for i in columns])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter: the callers' bounds keep it sane
        coef = HuberRegressor(fit_intercept=False, alpha=0.0, max_iter=200).fit(x, y[ok]).coef_
    for i, c in zip(columns, coef, strict=True):
        out[i] = float(c)
    return out


def _changes(a: np.ndarray) -> np.ndarray:
    """Minute-to-minute changes of each row, flattened (NaN where either minute is).

    The fit learns from how a component's latency moves with its work, not from its level:
    a fault lasts minutes, and while it lasts the work a server is handed can change with
    it (a stalled MooseFS chunkserver was sent 4-6x larger requests, its clients having
    merged what queued). In levels each of those minutes is a high-leverage point, which
    a Huber fit resists no better than least squares, and a dozen of them fitted the fault
    away as "bigger requests" (docs/accuracy.md, "A miss in CI"); in changes a fault
    counts at its two ends only. A component's lasting differences (bigger requests all
    along) are its usual level, which step 2 subtracts anyway."""
    return (a[:, 1:] - a[:, :-1]).ravel()


def _leave_one_out_median(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per cell, the median of the other finite values of its minute, and how many there were."""
    n = np.isfinite(a).sum(axis=0)  # [minute]
    order = np.argsort(np.where(np.isfinite(a), a, np.inf), axis=0)
    s = np.take_along_axis(a, order, axis=0)  # sorted, NaN last
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(a.shape[0])[:, None].repeat(a.shape[1], 1), axis=0)
    m = n - 1  # others per minute
    rows = a.shape[0]

    def nth(i: np.ndarray) -> np.ndarray:
        """The i-th smallest of the others: skip the cell's own rank."""
        j = np.where(i >= rank, i + 1, i)
        return np.take_along_axis(s, np.clip(j, 0, rows - 1), axis=0)

    lo = np.broadcast_to((m - 1) // 2, a.shape)
    hi = np.broadcast_to(m // 2, a.shape)
    with np.errstate(invalid="ignore"):
        med = (nth(lo) + nth(hi)) / 2
    med = np.where(np.isfinite(a) & (m >= 1), med, np.nan)
    return med, np.where(np.isfinite(a), m, 0)


#: Busy minutes a component's usual level is learnt from, at the least.
LEAST_MINUTES = 30
#: The lower quartile of a normal variable lies this many sigmas below its mean.
_Q25 = 0.6745


def _usual(raw: np.ndarray, here: np.ndarray, sigma: float) -> np.ndarray:
    """Per component, its usual level: lower quartile + 0.6745 sigma over its `here` cells.

    For noise alone that is the median; but a fault only ever raises latency, and the
    lower quartile is the last statistic it moves, so a slowdown covering up to about
    three quarters of a component's busy minutes does not become its normal (a median
    would give way at half). A component with fewer than `LEAST_MINUTES` busy minutes
    takes the level of all of them together (a forwarder busy for ten minutes is judged
    against its kind's usual latency); NaN when even they are too few."""

    def level(values: np.ndarray) -> float:
        if values.size < LEAST_MINUTES:
            return np.nan
        return float(np.percentile(values, 25)) + _Q25 * sigma

    own = np.array([level(raw[i][here[i]]) for i in range(raw.shape[0])])
    return np.where(np.isnan(own), level(raw[here]), own)


def _mad(x: np.ndarray) -> float:
    return 1.4826 * float(np.median(np.abs(x - np.median(x)))) if x.size else 0.0


def _noise(ratio: np.ndarray, here: np.ndarray) -> Noise:
    """Robust AR(1) coefficient and innovation sigma of `ratio` over the cells `here`.

    Both come from first differences, which a level shift touches only at its two ends
    (the shift itself, a quarter of a short history perhaps, would otherwise pass for
    slow correlation): for AR(1), the lag-1 correlation of the differences is
    -(1 - phi) / 2 and their variance 2 sigma^2 / (1 + phi). The correlation is the
    Gnanadesikan-Kettenring one with MADs, so the few large differences do not count."""
    three = here[:, 2:] & here[:, 1:-1] & here[:, :-2]
    diff = ratio[:, 1:] - ratio[:, :-1]
    x, y = diff[:, :-1][three], diff[:, 1:][three]
    if x.size < _MIN_FIT_POINTS:
        return Noise(0.0, _mad(ratio[here]), int(here.sum()))
    plus, minus = _mad(x + y) ** 2, _mad(x - y) ** 2
    rho = (plus - minus) / (plus + minus) if plus + minus > 0 else -0.5
    phi = min(max(1 + 2 * rho, 0.0), 0.95)
    sigma = _mad(np.concatenate([x, y])) * math.sqrt((1 + phi) / 2)
    return Noise(ar1=phi, sigma=sigma, minutes=int(here.sum()))


#: Minutes per batch of the long-run variance check, and the batches it needs.
_BATCH = 15
_MIN_BATCHES = 20


def _long_run(e: np.ndarray, here: np.ndarray) -> float:
    """How much to stretch the innovations so that their long-run variance is 1 (never < 1).

    AR(1) is a model: what it leaves correlated (the median of several AR(1) series is not
    quite AR(1); a load cycle is slower) makes sums of innovations vary more than their
    count, and the CUSUM is a sum. Batch means over `_BATCH` busy minutes measure that:
    `_BATCH x var(batch mean)` is the long-run variance (robustly, by MAD, so batches in a
    shift do not count). Without enough batches nothing is stretched."""
    cols = e.shape[1] // _BATCH * _BATCH
    if cols == 0:
        return 1.0
    shape = (e.shape[0], cols // _BATCH, _BATCH)
    full = here[:, :cols].reshape(shape).all(axis=2)
    means = e[:, :cols].reshape(shape).mean(axis=2)[full]
    if means.size < _MIN_BATCHES:
        return 1.0
    return max(1.0, math.sqrt(_BATCH) * _mad(means))


@dataclass(frozen=True)
class Segment:
    """One alarm of one component, as minute indices."""

    start: int  # first minute of the excursion that alarmed (the change point)
    alarm: int  # minute the CUSUM crossed h
    end: int  # last minute of the shift (before the reversal's change point)
    ongoing: bool  # no evidence yet that the shift reversed, at the last minute of data
    peak: float  # the CUSUM at its peak, sigmas


@dataclass
class _Open:
    """An alarm whose end is still sought: a second CUSUM, for a fall from the episode's
    own mean `m` back to 0, `D = max(0, D + m / 2 - u)`: the reference value halfway
    between the two levels, as for any CUSUM between two known means, so that `m`, an
    estimate from the minutes that raised the alarm (and so somewhat high), can be off
    by a good deal before `D` drifts up within the shift."""

    start: int
    alarm: int
    total: float  # sum and count of u over the minutes that belong to the shift
    count: float
    peak: float
    last_in: int  # last minute with D at 0: still in the shift
    d: float = 0.0

    def step(self, t: int, x: float, s: float) -> None:
        self.d = max(0.0, self.d + self.total / self.count / 2 - x)
        self.peak = max(self.peak, s)
        if self.d == 0.0:
            self.last_in = t
            self.total += x
            self.count += 1

    def segment(self, ongoing: bool) -> Segment:
        return Segment(self.start, self.alarm, self.last_in, ongoing, self.peak)


def segments(u: np.ndarray, k: float, h: float, max_idle: int) -> list[list[Segment]]:
    """Step 4 of the module docstring, per component (row of `u`; NaN = no evidence).

    The alarm CUSUM `S` runs over every component at once; an open episode also runs the
    reversal CUSUM `D` (see `_Open`), and closes when `D > h` (as much evidence that the
    shift ended as it took to say it began) or `S` is back at 0, or after `max_idle`
    minutes without evidence. It ends at the reversal's change point."""
    rows, cols = u.shape
    s = np.zeros(rows)
    run_start = np.zeros(rows, np.int64)
    run_sum = np.zeros(rows)
    run_n = np.zeros(rows)
    last_seen = np.full(rows, -(10**9), np.int64)
    episodes: dict[int, _Open] = {}
    out: list[list[Segment]] = [[] for _ in range(rows)]
    for t in range(cols):
        seen = np.isfinite(u[:, t])
        x = np.nan_to_num(u[:, t])
        idle = seen & (t - last_seen > max_idle + 1)
        for i in np.flatnonzero(idle):
            if int(i) in episodes:
                out[i].append(episodes.pop(int(i)).segment(False))
        s[idle] = 0.0
        new = np.where(seen, np.maximum(0.0, s + x - k), s)
        started = seen & (s == 0) & (new > 0)
        run_start[started], run_sum[started], run_n[started] = t, 0.0, 0.0
        grow = seen & (new > 0)
        run_sum[grow] += x[grow]
        run_n[grow] += 1
        s = new
        last_seen[seen] = t
        for i in np.flatnonzero(seen & (s > h)):
            if int(i) not in episodes:
                episodes[int(i)] = _Open(
                    int(run_start[i]), t, float(run_sum[i]), float(run_n[i]), float(s[i]), t
                )
        for i, ep in list(episodes.items()):
            if not seen[i] or ep.alarm == t:
                continue
            ep.step(t, float(x[i]), float(s[i]))
            if ep.d > h or s[i] == 0:
                out[i].append(episodes.pop(i).segment(False))
                s[i] = 0.0
    for i, ep in episodes.items():  # still open at the end of the data
        out[i].append(ep.segment(ep.d <= h and cols - 1 - last_seen[i] <= max_idle))
    return out
