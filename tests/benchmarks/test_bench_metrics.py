"""Metrics of predicted vs true scores."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from benchmarks.metrics import kendall_tau, r2_score, rmse


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
