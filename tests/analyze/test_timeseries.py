from __future__ import annotations

import numpy as np

from iolens.analyze.timeseries import spread


def test_spread_by_hand():
    out = spread(
        np.array([0.5, 2.0, 3.2]),
        np.array([2.5, 2.0, 3.7]),
        np.array([100.0, 7.0, 10.0]),
        origin=0.0,
        width=1.0,
        nbins=5,
    )
    assert np.allclose(out, [25, 50, 32, 10, 0])


def test_spread_matches_brute_force_and_conserves():
    rng = np.random.default_rng(0)
    t0 = rng.uniform(0, 100, 300)
    t1 = t0 + rng.uniform(0, 20, 300)
    amount = rng.uniform(0, 1e6, 300)
    out = spread(t0, t1, amount, 0.0, 1.0, 130)
    assert np.isclose(out.sum(), amount.sum())
    brute = np.zeros(130)
    for a, b, m in zip(t0, t1, amount, strict=True):
        for k in range(int(a), int(np.ceil(b))):
            brute[k] += m * (min(b, k + 1) - max(a, k)) / (b - a)
    assert np.allclose(out, brute, rtol=1e-9, atol=1e-3)


def test_spread_empty():
    assert spread(np.array([]), np.array([]), np.array([]), 0.0, 1.0, 3).tolist() == [0, 0, 0]
