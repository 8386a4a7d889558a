"""The simulator's noise: its defaults are the calibration's, and each sampler produces the
statistics its parameters claim (issue 17, item 2; docs/simulator.md, "Noise and
disturbances (fitted)").

The estimators of bench/calibrate_noise.py are checked too, on synthetic data with known
parameters, so a wrong fit cannot hide behind a right-looking number.
"""

from __future__ import annotations

import inspect
from dataclasses import asdict, replace

import numpy as np
import pytest
from bench import calibrate_noise as cal

from iolens.simulate.realism import Realism, aggregate_ar1, service_time_us
from tests.conftest import SHARED_DATA

needs_shared = pytest.mark.skipif(
    not (SHARED_DATA / cal.LMT_DAY).is_file(), reason="../shared/data is not present"
)


@pytest.fixture(scope="module")
def calibration() -> cal.Calibration:
    return cal.calibrate(SHARED_DATA)


# -- the defaults are the fit ------------------------------------------------------------


@needs_shared
def test_realism_defaults_are_what_the_calibration_computes(calibration):
    assert asdict(Realism()) == calibration.realism()


@needs_shared
def test_service_time_defaults_are_what_the_calibration_computes(calibration):
    params = inspect.signature(service_time_us).parameters
    defaults = {name: params[name].default for name in calibration.service_defaults()}
    assert defaults == calibration.service_defaults()


@needs_shared
def test_calibration_reads_what_the_docs_say(calibration):
    """The data behind the fit, as docs/simulator.md describes it."""
    assert calibration.rate.step_s == 5.0 and calibration.rate.osts == 24
    assert calibration.rate.runs >= 5  # the steady single-stream transfers
    assert calibration.missing.windows == 500 and calibration.missing.day_file_missing == 0
    assert calibration.missing.reset_missing_rounds > 0  # the outage in lmtdb-reset
    assert calibration.diurnal.days >= 30
    assert calibration.service.points == 6  # one per system and op
    assert {c["capture"] for c in calibration.resets.captures} == {
        name for name, _ in cal.EPOCH_CAPTURES
    }


# -- quiet is exactly quiet ----------------------------------------------------------------


def test_quiet_is_exactly_noise_free():
    q = Realism.quiet()
    rng = np.random.default_rng(0)
    assert (q.service_noise(rng, 7, 50) == 1.0).all()
    assert (q.request_noise(rng, np.array([0, 1, 5, 10_000])) == 1.0).all()
    assert (q.diurnal(np.linspace(0, 24, 49)) == 1.0).all()
    hosts = [f"oss{i}" for i in range(20)]
    resets = q.resets(rng, hosts, 30 * 86400)
    assert resets == {h: [] for h in hosts}
    masks = q.missing(rng, hosts, 10_000, resets={h: [5_000.0] for h in hosts})
    assert not any(m.any() for m in masks.values())
    assert q.skew(rng, hosts) == {h: 0.0 for h in hosts}
    assert q.for_interval(60.0).service_sigma == 0.0


# -- each sampler produces its parameters ----------------------------------------------------


@pytest.mark.parametrize(
    ("sigma", "phi"), [(Realism().service_sigma, Realism().service_ar1), (0.3, 0.7)]
)
def test_service_noise_has_its_sigma_and_ar1(sigma, phi):
    r = replace(Realism(), service_sigma=sigma, service_ar1=phi)
    x = np.log(r.service_noise(np.random.default_rng(1), 200, 400))  # [sample, component]
    assert x.std() == pytest.approx(sigma, rel=0.03)
    assert abs(np.median(x)) < 0.02 * sigma + 0.002  # median factor 1
    lag1 = (x[1:] * x[:-1]).mean() / (x * x).mean()
    assert lag1 == pytest.approx(phi, abs=0.02)
    # the first sample is already stationary: no warm-up a detector could learn
    assert x[0].std() == pytest.approx(sigma, rel=0.15)


def test_request_noise_is_the_scatter_of_a_mean_of_n_requests():
    r = Realism()
    rng = np.random.default_rng(2)
    for n in (1, 10, 1000):
        f = r.request_noise(rng, np.full(100_000, n))
        assert f.mean() == pytest.approx(1.0, abs=0.01)  # unbiased mean service time
        assert f.std() == pytest.approx(r.request_cv / np.sqrt(n), rel=0.05)
    assert (r.request_noise(rng, np.zeros(5)) == 1.0).all()


def test_diurnal_has_its_amplitude_and_peak_and_mean_one():
    r = Realism()
    hours = np.linspace(0, 24, 24 * 60, endpoint=False)
    f = r.diurnal(hours)
    assert f.mean() == pytest.approx(1.0, abs=1e-9)
    assert hours[f.argmax()] == pytest.approx(r.diurnal_peak_hour, abs=1 / 60)
    assert f.max() == pytest.approx(1 + r.diurnal_amplitude, abs=1e-6)
    assert f.min() == pytest.approx(1 - r.diurnal_amplitude, abs=1e-6)


def test_resets_come_at_their_rate():
    r = replace(Realism(), resets_per_day=0.5)
    hosts = [f"oss{i}" for i in range(400)]
    got = r.resets(np.random.default_rng(3), hosts, 10 * 86400)
    n = sum(len(v) for v in got.values())
    assert n == pytest.approx(0.5 * 10 * 400, rel=0.08)  # 2,000 expected, sd 45
    assert all(0 <= t <= 10 * 86400 for v in got.values() for t in v)


def test_missing_samples_have_their_share_and_run_length():
    r = Realism()
    mask = r.missing(np.random.default_rng(4), ["oss0"], 3_000_000)["oss0"]
    assert mask.mean() == pytest.approx(r.missing_share, rel=0.1)
    edges = np.diff(np.concatenate([[0], mask.astype(int), [0]]))
    runs = np.flatnonzero(edges == -1) - np.flatnonzero(edges == 1)
    assert runs.mean() == pytest.approx(r.missing_run, rel=0.1)


def test_a_reset_brings_its_outage_as_missing_samples():
    r = replace(Realism(), missing_share=0.0)  # only the outage
    mask = r.missing(np.random.default_rng(5), ["oss0"], 200, resets={"oss0": [1000.0]})["oss0"]
    lost = np.flatnonzero(mask)
    # samples of [730, 1000) s: the 270 s before the restart, nothing else
    assert lost.tolist() == list(range(73, 100))
    assert len(lost) * r.sample_s == r.reset_outage_s


def test_skew_has_its_sd():
    r = Realism()
    got = np.array(
        list(r.skew(np.random.default_rng(6), [f"h{i}" for i in range(20_000)]).values())
    )
    assert got.std() == pytest.approx(r.clock_skew_s, rel=0.03)


# -- aggregation across intervals -------------------------------------------------------------


def test_aggregate_ar1_matches_block_means_of_a_simulated_ar1():
    sigma, phi, k = 0.2, 0.6, 3
    x = np.log(
        replace(Realism(), service_sigma=sigma, service_ar1=phi).service_noise(
            np.random.default_rng(7), 50, 30_000
        )
    )
    blocks = x.reshape(-1, k, x.shape[1]).mean(axis=1)
    want_sigma, want_phi = aggregate_ar1(sigma, phi, k)
    assert blocks.std() == pytest.approx(want_sigma, rel=0.02)
    lag1 = (blocks[1:] * blocks[:-1]).mean() / (blocks * blocks).mean()
    assert lag1 == pytest.approx(want_phi, abs=0.02)
    assert aggregate_ar1(sigma, phi, 1) == pytest.approx((sigma, phi))
    assert aggregate_ar1(sigma, 0.0, 4) == pytest.approx((sigma / 2, 0.0))


def test_for_interval_takes_whole_multiples_only():
    r = Realism()
    assert r.for_interval(10.0) == r
    minute = r.for_interval(60.0)
    assert minute.sample_s == 60.0
    assert minute.service_sigma < r.service_sigma
    with pytest.raises(ValueError, match="multiple"):
        r.for_interval(15.0)


def test_service_time_grows_with_size_and_load_and_prices_writes():
    base = service_time_us(0, 0.0, 0.0)
    assert base == pytest.approx(2900.0)
    mib = service_time_us(2**20, 0.0, 0.0)
    assert mib > base
    assert service_time_us(2**20, 1.0, 0.0) == pytest.approx(mib * 0.65)
    assert service_time_us(2**20, 0.0, 1.0) == pytest.approx(2 * mib)  # 1 + u^2 at u = 1
    sizes = np.array([4096, 2**20, 16 * 2**20])
    assert (np.diff(service_time_us(sizes, 0.5, 0.3)) > 0).all()


# -- the estimators recover known parameters ----------------------------------------------------


def test_rate_noise_recovers_sigma_and_ar1_of_synthetic_streams():
    """Steady 300 MB/s streams with partial first and last intervals, among idle OSTs."""
    rng = np.random.default_rng(8)
    sigma, phi, step = 0.05, 0.4, 5.0
    runs, length, osts = 120, 12, 6
    rate = np.zeros((runs * (length + 3), osts))
    noise = replace(Realism(), service_sigma=sigma, service_ar1=phi)
    for i in range(runs):
        j, start = i % osts, i * (length + 3)
        level = 300e6 * np.exp(rng.normal(0, 0.02))
        x = np.log(noise.service_noise(rng, 1, length)[:, 0])
        rate[start : start + length, j] = level * np.exp(x)
        rate[start, j] *= 0.5  # a stream starts mid-interval
        rate[start + length - 1, j] *= 0.4
        rate[start + length + 1, (j + 1) % osts] = 20e6  # background, below the floor
    got = cal.rate_noise(rate, step, bootstrap=0)
    assert got.runs == runs
    assert got.sigma_5s == pytest.approx(sigma, rel=0.08)
    assert got.phi_5s == pytest.approx(phi, abs=0.08)
    assert got.offset_sigma == pytest.approx(0.02, abs=0.01)


def test_gap_process_recovers_start_probability_and_run_length():
    rng = np.random.default_rng(9)
    q, run = 0.002, 2.5
    cells = rng.integers(200, 2000, 3000).astype(float)
    starts = rng.poisson(cells * q)
    missing = np.array([rng.geometric(1 / run, s).sum() for s in starts], float)
    got_q, got_run = cal.gap_process(cells, missing)
    assert got_q == pytest.approx(q, rel=0.08)
    assert got_run == pytest.approx(run, rel=0.08)


def test_harmonic_recovers_amplitude_and_peak():
    rng = np.random.default_rng(10)
    hours = rng.uniform(0, 24, 3000)
    fs = rng.choice(np.array(["a", "b", "c"]), 3000)
    level = {"a": 5.0, "b": 6.0, "c": 3.0}
    r = 0.5  # log-amplitude: as 1 + A cos, A = tanh(0.5) = 0.46
    y = (
        np.array([level[f] for f in fs])
        + r * np.cos(2 * np.pi * (hours - 15.0) / 24)
        + rng.normal(0, 1.0, 3000)
    )
    amp, peak, resid = cal.harmonic(hours, fs, y)
    assert amp == pytest.approx(np.tanh(r), abs=0.05)
    assert peak == pytest.approx(15.0, abs=0.5)
    assert resid == pytest.approx(1.0, rel=0.05)


def test_window_cells_finds_the_round_count_that_makes_the_share_whole():
    # 24 OSTs x 17 rounds, one cell missing: pytokio stores 1 / 408
    assert cal._window_cells(1 / 408, 24, 82.0) == (17, 1)
    assert cal._window_cells(0.0, 36, 60.0)[1] == 0
