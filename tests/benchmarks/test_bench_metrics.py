"""Metrics of predicted vs true scores."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchmarks.metrics import kendall_tau, r2_score, resampled_kendall_tau, rmse


def test_kendall_tau_matches_scipy():
    rng = np.random.default_rng(0)
    targets, predictions = rng.normal(size=50), rng.normal(size=50)
    assert kendall_tau(targets, predictions) == pytest.approx(stats.kendalltau(targets, predictions).statistic)
    assert kendall_tau(targets, targets * 2 + 1) == pytest.approx(1.0)
    assert kendall_tau(targets, -targets) == pytest.approx(-1.0)


def test_constant_predictions_have_zero_tau_not_nan():
    assert kendall_tau(np.array([0.1, 0.5, 0.9]), np.array([0.3, 0.3, 0.3])) == 0.0


def test_r2_and_rmse_on_known_values():
    targets = np.array([1.0, 2.0, 3.0, 4.0])
    predictions = np.array([1.0, 2.0, 3.0, 5.0])
    assert rmse(targets, predictions) == pytest.approx(0.5)
    assert r2_score(targets, predictions) == pytest.approx(1 - 1 / 5)
    assert r2_score(targets, targets) == 1.0
    with pytest.raises(ValueError, match="constant targets"):
        r2_score(np.ones(3), np.arange(3.0))


def test_resampled_kendall_tau_is_kendall_tau_of_each_resample():
    """Every resample at once from draw counts equals scipy's tau-b (through `kendall_tau`) of the
    rows drawn, with ties in either side, constant sides and NaN. The negative control: the same
    counts read as if each row were drawn once give other numbers, so the check can fail."""
    rng = np.random.default_rng(7)
    for trial in range(60):
        rows = int(rng.integers(2, 40)) if trial % 3 else 300
        targets = rng.integers(0, 4, rows).astype(float) if trial % 2 else rng.normal(size=rows)
        predictions = np.stack([rng.normal(size=rows), rng.integers(0, 3, rows).astype(float),
                                np.full(rows, 0.5), targets.copy()])
        if trial % 5 == 0:
            predictions[0, 0] = np.nan
        counts = np.stack([np.bincount(rng.integers(0, rows, rows), minlength=rows) for _ in range(4)])
        fast = resampled_kendall_tau(targets, predictions, counts)
        slow = np.array([[kendall_tau(np.repeat(targets, c), np.repeat(p, c)) for p in predictions] for c in counts])
        assert fast.shape == (4, 4) and np.array_equal(fast, slow), (trial, fast, slow)
    once = np.array([[kendall_tau(targets, p) for p in predictions]] * 4)
    assert not np.array_equal(fast, once)
