"""A sustained shift in a server's latency: CUSUM on its log-ratio to its peers or its past.

Pure numpy on arrays `[component, minute]`, so the detector (`peers.py`) and the accuracy
bench (`bench/slow_ost_roc.py`) run the same code. The steps, each for a reason:

1. **Log latency, with the work's part taken out.** A server's mean time per request depends
   on what it is asked (bigger requests take longer, writes and reads cost differently), so
   `log(latency)` is regressed on `log(bytes per request)` and the write share of requests,
   all centred the way the comparison is made (on the same minute's peers, or on the
   component's own history), with a Huber fit that slow minutes cannot pull. The elasticity
   to size is kept in [0, 1] (a request cannot get cheaper as it grows, nor dearer than in
   proportion) and the write/read cost ratio within 1/8..8; a covariate that does not vary
   is left out. What remains is the server's own speed.
2. **A reference.** With at least `min_peers` components busy in a minute, the reference is
   the median of the *other* busy ones (leave-one-out, so a component is never compared
   with itself); else the component's own latency. A component keeps the reference it has
   in most of its busy minutes and skips the others (the two kinds of log-ratio have
   different noise, and the test needs one noise model). Its usual level under that
   reference (the median over the hours before the minute) is subtracted, so an OST that
   is always 20 % slower than the others (hardware, fill level) is normal for it, and a
   shift in progress does not raise its own baseline.
3. **Noise from the data.** Per-minute latencies are correlated (AR(1)); the lag-1
   correlation `phi` is estimated robustly (Gnanadesikan-Kettenring, with MADs) and the
   series pre-whitened, `e_t = d_t - phi * d_{t-1}`; `sigma` is 1.4826 x the MAD of `e`,
   pooled over the components of a group and per reference kind. `u = e / sigma` is then
   close to independent N(0, 1) while nothing changes, clipped to +-`clip` so that no
   single minute decides.
4. **One-sided CUSUM** `S_t = max(0, S_{t-1} + u_t - k)`, alarm at `S > h`. For independent
   N(0, 1) input, Siegmund's approximation gives the average run length between false
   alarms as a function of `h`; `h` is solved for `false_alarm_minutes`, so the threshold
   follows from a false-alarm rate, not from any fault size. The episode starts where the
   excursion that alarmed began (the CUSUM change-point estimate), and ends at the peak of
   `S` (the last minute the shift still added evidence), once `S` has fallen `h` below its
   peak (the same amount of evidence that the shift reversed) or back to 0.
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
    clip: float = 4.0  # no minute adds more than this many sigmas
    min_sigma: float = 0.02  # noise floor (log units): 2 %, below any real server's
    min_noise_minutes: int = 60  # busy minutes needed to learn the noise of a reference kind
    max_idle: int = 30  # minutes without demand after which the CUSUM forgets

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
    unassessed: dict[int, int]  # busy minutes per mode left out for want of noise data


def standardise(
    latency: np.ndarray,
    busy: np.ndarray,
    bytes_per_request: np.ndarray,
    write_share: np.ndarray,
    p: ShiftParams,
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

    b_size, b_write = _work_fit(y, size, mix, mode)
    adjusted = y - b_size * np.nan_to_num(size - _nanmedian(size)) - b_write * np.nan_to_num(mix)

    peer_ref, peers = _leave_one_out_median(np.where(mode == PEERS, adjusted, np.nan))
    ratio = np.where(
        mode == PEERS, adjusted - peer_ref, np.where(mode == HISTORY, adjusted, np.nan)
    )
    # minus the component's usual level under its reference (its usual log-ratio to its
    # peers, or its usual latency), learnt from the hours before each minute
    ratio = ratio - np.nan_to_num(_past_median(ratio, PAST_MINUTES))

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
        nz = _noise(ratio, here, p.min_sigma)
        noise[m] = nz
        prev_ok = np.zeros_like(here)
        prev_ok[:, 1:] = here[:, 1:] & here[:, :-1]
        prev = np.zeros_like(ratio)
        prev[:, 1:] = ratio[:, :-1]
        stationary = nz.sigma / math.sqrt(1 - nz.ar1**2)
        e = np.where(prev_ok, (ratio - nz.ar1 * np.nan_to_num(prev)) / nz.sigma, ratio / stationary)
        u = np.where(here, np.clip(e, -p.clip, p.clip), u)
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
        unassessed=unassessed,
    )


def _nanmedian(a: np.ndarray, axis: int | None = None) -> np.ndarray:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(a, axis=axis)


def _centred(a: np.ndarray, mode: np.ndarray) -> np.ndarray:
    """`a` minus its mean over the same minute's peers (PEERS) or the component (HISTORY):
    the fixed-effects form of the regression, so only differences within a minute (or
    within a component's history) inform it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        by_minute = a - np.nanmean(np.where(mode == PEERS, a, np.nan), axis=0)[None, :]
        by_component = a - np.nanmean(np.where(mode == HISTORY, a, np.nan), axis=1)[:, None]
    return np.where(mode == PEERS, by_minute, np.where(mode == HISTORY, by_component, np.nan))


#: Bounds of the work fit (module docstring, step 1), and the least spread worth fitting.
_SIZE_BOUNDS = (0.0, 1.0)
_WRITE_BOUNDS = (-math.log(8), math.log(8))
_MIN_SPREAD = 0.05
_MIN_FIT_POINTS = 30


def _work_fit(
    y: np.ndarray, size: np.ndarray, mix: np.ndarray, mode: np.ndarray
) -> tuple[float, float]:
    """(size elasticity, log write/read cost ratio) from a Huber regression; 0 when unfit."""
    from sklearn.linear_model import HuberRegressor  # import cost only when fitting

    yc, sc, wc = (_centred(a, mode).ravel() for a in (y, size, mix))
    ok = np.isfinite(yc) & np.isfinite(sc) & np.isfinite(wc)
    if ok.sum() < _MIN_FIT_POINTS:
        return 0.0, 0.0
    columns = [
        i
        for i, x in enumerate((sc[ok], wc[ok]))
        if 1.4826 * float(np.median(np.abs(x - np.median(x)))) >= _MIN_SPREAD
    ]
    if not columns:
        return 0.0, 0.0
    x = np.column_stack([(sc, wc)[i][ok] for i in columns])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence chatter: the bounds below keep it sane
        coef = HuberRegressor(fit_intercept=False, alpha=0.0, max_iter=200).fit(x, yc[ok]).coef_
    out = [0.0, 0.0]
    for i, c in zip(columns, coef, strict=True):
        out[i] = float(c)
    return float(np.clip(out[0], *_SIZE_BOUNDS)), float(np.clip(out[1], *_WRITE_BOUNDS))


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


#: Busy minutes a component's usual level is learnt from, at the least; and the block
#: (minutes) over which that level is held fixed.
PAST_MINUTES = 30
_BLOCK = 60


def _past_median(a: np.ndarray, least: int) -> np.ndarray:
    """Per cell, the median of its row over the whole blocks of `_BLOCK` minutes before it.

    A shift in progress thus never raises its own baseline: the reference is what was known
    before (what an analysis running every hour had). Until a row has `least` finite values
    before a block, its first `least` values (or all it has) stand in."""
    rows, cols = a.shape
    out = np.full(a.shape, np.nan)
    finite = np.isfinite(a)
    count = np.cumsum(finite, axis=1)
    first = np.full(rows, np.nan)
    for i in range(rows):
        enough = np.flatnonzero(count[i] >= least)
        end = int(enough[0]) + 1 if enough.size else cols
        if finite[i, :end].any():
            first[i] = float(np.median(a[i, :end][finite[i, :end]]))
    for start in range(0, cols, _BLOCK):
        before = count[:, start - 1] if start else np.zeros(rows, np.int64)
        known = _nanmedian(a[:, :start], axis=1) if start else np.full(rows, np.nan)
        out[:, start : start + _BLOCK] = np.where(before >= least, known, first)[:, None]
    return out


def _mad(x: np.ndarray) -> float:
    return 1.4826 * float(np.median(np.abs(x - np.median(x)))) if x.size else 0.0


def _noise(ratio: np.ndarray, here: np.ndarray, min_sigma: float) -> Noise:
    """Robust AR(1) coefficient and innovation sigma of `ratio` over the cells `here`."""
    pair = here[:, 1:] & here[:, :-1]
    x, y = ratio[:, :-1][pair], ratio[:, 1:][pair]
    phi = 0.0
    if x.size >= _MIN_FIT_POINTS:
        plus, minus = _mad(x + y) ** 2, _mad(x - y) ** 2
        if plus + minus > 0:
            phi = min(max((plus - minus) / (plus + minus), 0.0), 0.95)
    resid = y - phi * x if x.size >= _MIN_FIT_POINTS else ratio[here] * math.sqrt(1 - phi**2)
    return Noise(ar1=phi, sigma=max(_mad(resid), min_sigma), minutes=int(here.sum()))


@dataclass(frozen=True)
class Segment:
    """One alarm of one component, as minute indices."""

    start: int  # first minute of the excursion that alarmed (the change point)
    alarm: int  # minute the CUSUM crossed h
    end: int  # last minute of the shift (peak of the CUSUM)
    ongoing: bool  # still alarming at the last minute of data
    peak: float  # the CUSUM at its peak, sigmas


def segments(u: np.ndarray, k: float, h: float, max_idle: int) -> list[list[Segment]]:
    """Step 4 of the module docstring, per component (row of `u`; NaN = no evidence)."""
    rows, cols = u.shape
    s = np.zeros(rows)
    run_start = np.zeros(rows, np.int64)
    last_seen = np.full(rows, -(10**9), np.int64)
    alarm = np.full(rows, -1, np.int64)  # -1: not in an episode
    peak = np.zeros(rows)
    peak_at = np.zeros(rows, np.int64)
    out: list[list[Segment]] = [[] for _ in range(rows)]

    def close(i: int, ongoing: bool) -> None:
        out[i].append(
            Segment(int(run_start[i]), int(alarm[i]), int(peak_at[i]), ongoing, float(peak[i]))
        )
        s[i] = peak[i] = 0.0
        alarm[i] = -1

    for t in range(cols):
        ut = u[:, t]
        seen = np.isfinite(ut)
        idle = seen & (t - last_seen > max_idle + 1)
        for i in np.flatnonzero(idle & (alarm >= 0)):
            close(int(i), False)
        s[idle] = 0.0
        before = s.copy()
        s = np.where(seen, np.maximum(0.0, s + np.nan_to_num(ut) - k), s)
        started = seen & (before == 0) & (s > 0)
        run_start[started] = t
        last_seen[seen] = t
        fresh = seen & (alarm < 0) & (s > h)
        alarm[fresh] = t
        open_ = alarm >= 0
        higher = open_ & seen & (s >= peak)
        peak[higher], peak_at[higher] = s[higher], t
        for i in np.flatnonzero(open_ & seen & ((peak - s > h) | (s == 0))):
            close(int(i), False)
    for i in np.flatnonzero(alarm >= 0):  # still open at the end of the data
        close(int(i), bool(peak[i] - s[i] <= h and cols - 1 - last_seen[i] <= max_idle))
    return out
