"""How real servers misbehave when nothing is wrong: the simulator's noise and disturbances.

Detectors must work on data as messy as a real site's, so every simulated server sample
goes through this module: service times that depend on request size, read/write mix and
load (`service_time_us`), with correlated multiplicative noise per sample
(`Realism.service_noise`) and the scatter of a mean over few requests
(`Realism.request_noise`); a diurnal load cycle; counter resets (a server restart or
`lctl set_param ... stats=clear`) with the outage before them; missing samples (an agent
late or a read failing); and clock skew between hosts.

The defaults are fitted to real time series and counters by `bench/calibrate_noise.py`
(data, method and caveats: `docs/simulator.md`, "Noise and disturbances (fitted)").
`Realism.quiet()` switches every disturbance off, for tests that need exact arithmetic.
Nothing here is, or may be, read by a detector: it is a tool for making test data.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


def aggregate_ar1(sigma: float, phi: float, k: int) -> tuple[float, float]:
    """Sigma and lag-1 correlation of the means of `k` consecutive values of a stationary
    AR(1) with marginal sd `sigma` and coefficient `phi`: how noise fitted at one step (LMT's
    5 s) looks at a coarser one (an agent's 10 s, a detector's minute)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if k == 1:
        return sigma, phi
    if sigma == 0:
        return 0.0, 0.0
    i = np.arange(k)
    lag = np.abs(i[:, None] - i[None, :])
    var = sigma**2 * float(np.sum(phi**lag)) / k**2
    cov = sigma**2 * float(np.sum(phi ** (i[None, :] + k - i[:, None]))) / k**2
    return float(np.sqrt(var)), cov / var


@dataclass(frozen=True)
class Realism:
    """Fitted noise and disturbance parameters (see the module docstring).

    Every default is printed by `bench/calibrate_noise.py` from the real files it names, at
    the precision the data supports (`tests/simulate/test_realism.py` keeps them equal);
    `docs/simulator.md`, "Noise and disturbances (fitted)", gives data, method and caveats.
    """

    # Multiplicative noise on a server's mean service time per agent sample (`sample_s`):
    # log-normal, AR(1)-correlated between consecutive samples of the same server. Fitted on
    # steady single-stream transfers in NERSC LMT 5 s counters, aggregated to 10 s. Workload
    # (size, mix, load) is not in it: `service_time_us` and the engine make that.
    service_sigma: float = 0.038
    service_ar1: float = 0.09
    # Load cycle: job arrival rate multiplied by 1 + amplitude * cos(2 pi (h - peak) / 24),
    # h in the site's local hours (other users' metadata load on NERSC Edison, six weeks).
    diurnal_amplitude: float = 0.58
    diurnal_peak_hour: float = 9.3
    # Counter restarts per server per day (target restart, failover, stats clear), from the
    # counter epochs of real 2.14+ captures.
    resets_per_day: float = 0.065
    # Share of agent rounds that never arrive, and the mean length of a gap, in rounds
    # (LMT cells missing over six weeks of NERSC job windows).
    missing_share: float = 0.0011
    missing_run: float = 1.8
    # Standard deviation of each host's clock offset, seconds. An assumption: no capture
    # here has two hosts stamping the same round.
    clock_skew_s: float = 0.5
    # Coefficient of variation of single RPC times around their mean within one sample: a
    # sample holding n RPCs has a mean off by ~request_cv / sqrt(n) (`request_noise`).
    request_cv: float = 0.54
    # Seconds before a counter restart during which the host delivers no sample (the target
    # is down or recovering: lmtdb-reset.sqlite3).
    reset_outage_s: float = 270.0
    # The agent sample the per-sample parameters above are stated for, seconds.
    sample_s: float = 10.0

    @classmethod
    def quiet(cls) -> Realism:
        """No noise and no disturbance: exact sums, for equality tests."""
        return cls(
            service_sigma=0.0,
            service_ar1=0.0,
            diurnal_amplitude=0.0,
            resets_per_day=0.0,
            missing_share=0.0,
            missing_run=1.0,
            clock_skew_s=0.0,
            request_cv=0.0,
            reset_outage_s=0.0,
        )

    def for_interval(self, interval_s: float) -> Realism:
        """The same noise seen through another agent interval, a whole multiple of
        `sample_s` (the per-sample service noise averages down; rates per round stay)."""
        k = interval_s / self.sample_s
        if k < 1 or abs(k - round(k)) > 1e-9:
            raise ValueError(
                f"interval {interval_s:g} s is not a whole multiple of {self.sample_s:g} s"
            )
        sigma, phi = aggregate_ar1(self.service_sigma, self.service_ar1, round(k))
        return replace(self, service_sigma=sigma, service_ar1=phi, sample_s=float(interval_s))

    # -- service time ----------------------------------------------------------------------
    def service_noise(self, rng: np.random.Generator, components: int, samples: int) -> np.ndarray:
        """Multiplicative factors [sample, component], log-normal AR(1), median 1."""
        out = np.ones((samples, components))
        if self.service_sigma <= 0 or samples == 0:
            return out
        phi = self.service_ar1
        eps = rng.normal(0.0, self.service_sigma * np.sqrt(1 - phi**2), (samples, components))
        x = np.empty_like(eps)
        x[0] = rng.normal(0.0, self.service_sigma, components)
        for t in range(1, samples):
            x[t] = phi * x[t - 1] + eps[t]
        return np.exp(x)

    def request_noise(self, rng: np.random.Generator, requests: np.ndarray) -> np.ndarray:
        """Factors (same shape as `requests`, mean 1) on a sample's mean service time for
        the scatter of its `requests` single RPCs: log-normal with the variance of a mean
        of n RPCs, CV^2 / n. Samples without RPCs get 1 (they have no mean)."""
        n = np.asarray(requests, float)
        out = np.ones(n.shape)
        busy = n > 0
        if self.request_cv <= 0 or not busy.any():
            return out
        s2 = np.log1p(self.request_cv**2 / n[busy])
        out[busy] = np.exp(rng.normal(-s2 / 2, np.sqrt(s2)))
        return out

    # -- load cycle -------------------------------------------------------------------------
    def diurnal(self, hours_of_day: np.ndarray) -> np.ndarray:
        """Arrival-rate factor at each hour of the day (mean 1 over a day)."""
        phase = 2 * np.pi * (np.asarray(hours_of_day, float) - self.diurnal_peak_hour) / 24
        return 1.0 + self.diurnal_amplitude * np.cos(phase)

    # -- collection disturbances -------------------------------------------------------------
    def resets(
        self, rng: np.random.Generator, hosts: list[str], horizon_s: float
    ) -> dict[str, list[float]]:
        """Seconds (from the start) at which each host's counters restart from zero."""
        rate = self.resets_per_day * horizon_s / 86400
        return {h: sorted(rng.uniform(0, horizon_s, rng.poisson(rate)).tolist()) for h in hosts}

    def missing(
        self,
        rng: np.random.Generator,
        hosts: list[str],
        samples: int,
        resets: dict[str, list[float]] | None = None,
    ) -> dict[str, np.ndarray]:
        """Per host, a boolean mask of the samples that never arrive (runs of mean
        `missing_run`); with `resets` (from :meth:`resets`), also the `reset_outage_s`
        before each restart (sample i covers [i, i + 1) * `sample_s` seconds)."""
        out = {}
        for h in hosts:
            mask = np.zeros(samples, bool)
            if self.missing_share > 0 and samples:
                starts = rng.random(samples) < self.missing_share / self.missing_run
                for s in np.flatnonzero(starts):
                    mask[s : s + max(1, int(rng.geometric(1 / self.missing_run)))] = True
            for t in (resets or {}).get(h, []):
                first = max(0, int(np.ceil((t - self.reset_outage_s) / self.sample_s)))
                mask[first : max(first, int(np.ceil(t / self.sample_s)))] = True
            out[h] = mask
        return out

    def skew(self, rng: np.random.Generator, hosts: list[str]) -> dict[str, float]:
        """Each host's clock offset, seconds (added to the times it stamps)."""
        return {
            h: float(rng.normal(0.0, self.clock_skew_s)) if self.clock_skew_s else 0.0
            for h in hosts
        }


def service_time_us(
    rpc_bytes: np.ndarray | float,
    write_share: np.ndarray | float,
    utilisation: np.ndarray | float,
    *,
    base_us: float = 2900.0,
    bytes_per_us: float = 2100.0,
    write_cost: float = 0.65,
    load_exp: float = 2.0,
) -> np.ndarray:
    """Mean time an OST (or any disk-backed server) spends on one request, microseconds.

    A fixed cost plus the transfer, a write costing `write_cost` times a read, stretched as
    the server gets busy (contention for the disks and the journal): `(base + size / rate)
    * mix * (1 + utilisation ** load_exp)`. Queueing before a thread takes the request is
    *not* in it: Lustre reports that separately (`req_waittime`).

    The constants are fitted to the `[usecs]`/`[bytes]` counters of four real systems at
    the load they ran at (bench/calibrate_noise.py): at 1 MiB they give 3.4 ms, where the
    systems measured 1.7-5.7 ms. Base and rate are pinned only together, `write_cost` not
    at all (flash arrays write cheaper than they read, ZFS on disks dearer), and
    `load_exp` is an assumption: no capture here shows one server at several loads.
    """
    size = np.asarray(rpc_bytes, float)
    mix = 1.0 + (write_cost - 1.0) * np.asarray(write_share, float)
    util = np.clip(np.asarray(utilisation, float), 0.0, None)
    return (base_us + size / bytes_per_us) * mix * (1.0 + util**load_exp)
