"""How real servers misbehave when nothing is wrong: the simulator's noise and disturbances.

Detectors must work on data as messy as a real site's, so every simulated server sample
goes through this module: service times that depend on request size, read/write mix and
load, with correlated multiplicative noise; a diurnal load cycle; counter resets (a server
restart or `lctl set_param ... stats=clear`); missing samples (an agent late or a read
failing); and clock skew between hosts.

The parameters of `Realism` are fitted from real time series (`bench/calibrate_noise.py`,
`docs/simulator.md`, "Noise"): the defaults below are that fit. `Realism.quiet()` switches
every disturbance off, for tests that need exact arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Realism:
    """Fitted noise and disturbance parameters (see the module docstring)."""

    # Multiplicative noise on a server's mean service time per sample: log-normal, with
    # AR(1) correlation between consecutive samples of the same server.
    service_sigma: float = 0.25
    service_ar1: float = 0.5
    # Load cycle: job arrival rate multiplied by 1 + amplitude * cos(2 pi (h - peak) / 24).
    diurnal_amplitude: float = 0.3
    diurnal_peak_hour: float = 14.0
    # Counter resets per server per day (restart, failover, stats clear).
    resets_per_day: float = 0.2
    # Share of agent samples that never arrive, and the mean length of a gap, in samples.
    missing_share: float = 0.005
    missing_run: float = 3.0
    # Standard deviation of each host's clock offset, seconds.
    clock_skew_s: float = 0.5

    @classmethod
    def quiet(cls) -> Realism:
        """No noise and no disturbance: exact sums, for equality tests."""
        return cls(0.0, 0.0, 0.0, 14.0, 0.0, 0.0, 1.0, 0.0)

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
        self, rng: np.random.Generator, hosts: list[str], samples: int
    ) -> dict[str, np.ndarray]:
        """Per host, a boolean mask of the samples that never arrive (runs of mean
        `missing_run`)."""
        out = {}
        for h in hosts:
            mask = np.zeros(samples, bool)
            if self.missing_share > 0 and samples:
                starts = rng.random(samples) < self.missing_share / self.missing_run
                for s in np.flatnonzero(starts):
                    mask[s : s + max(1, int(rng.geometric(1 / self.missing_run)))] = True
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
    base_us: float = 300.0,
    bytes_per_us: float = 1_000.0,
    write_cost: float = 1.3,
    load_exp: float = 2.0,
) -> np.ndarray:
    """Mean time an OST (or any disk-backed server) spends on one request, microseconds.

    A fixed cost plus the transfer, writes dearer than reads, stretched as the server gets
    busy (contention for the disks and the journal): `(base + size / rate) * mix * (1 +
    utilisation ** load_exp)`. Queueing before a thread takes the request is *not* in it:
    Lustre reports that separately (`req_waittime`).
    """
    size = np.asarray(rpc_bytes, float)
    mix = 1.0 + (write_cost - 1.0) * np.asarray(write_share, float)
    util = np.clip(np.asarray(utilisation, float), 0.0, None)
    return (base_us + size / bytes_per_us) * mix * (1.0 + util**load_exp)
