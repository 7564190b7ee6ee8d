"""The tau-b ceiling under tied targets (benchmarks.ranking), on a hand-computed example."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from benchmarks.ranking import ranking_ceiling, tied_pairs


def test_the_hand_computed_example():
    # 4 targets, 6 pairs, 1 tied pair (the two 0.5s): ceiling sqrt(5/6)
    targets = np.array([0.5, 0.5, 0.7, 0.9])
    ranking = ranking_ceiling(targets)
    assert tied_pairs(targets) == 1
    assert ranking == pytest.approx({"kendall_tau_ceiling": math.sqrt(5 / 6), "distinct_targets": 3.0,
                                     "tied_pair_fraction": 1 / 6, "num_targets": 4.0})
    # a tie-free prediction in the targets' order: n_c = 5, n_d = 0, tau-b = 5 / sqrt(5 * 6)
    ordered = stats.kendalltau(targets, [1, 2, 3, 4]).statistic
    assert ordered == pytest.approx(5 / math.sqrt(30)) == pytest.approx(ranking["kendall_tau_ceiling"])
    # the targets themselves reproduce the tie, and tau-b normalizes it away: 1, above the ceiling
    assert stats.kendalltau(targets, targets).statistic == pytest.approx(1.0)


def test_no_tie_free_prediction_beats_the_ceiling():
    rng = np.random.default_rng(0)
    targets = rng.integers(0, 6, size=9) / 5  # accuracies on a 5-image test set: many ties
    ceiling = ranking_ceiling(targets)["kendall_tau_ceiling"]
    assert ceiling < 1
    best = max(stats.kendalltau(targets, rng.permutation(9)).statistic for _ in range(3000))
    tie_broken = stats.kendalltau(targets, np.argsort(np.argsort(targets + 1e-9 * rng.random(9)))).statistic
    assert best <= ceiling + 1e-12 and tie_broken == pytest.approx(ceiling)


def test_distinct_and_constant_targets():
    assert ranking_ceiling(np.array([0.1, 0.2, 0.3]))["kendall_tau_ceiling"] == 1.0
    constant = ranking_ceiling(np.array([0.4, 0.4, 0.4]))
    assert constant["kendall_tau_ceiling"] == 0.0 and constant["tied_pair_fraction"] == 1.0
    with pytest.raises(ValueError, match="at least 2"):
        ranking_ceiling(np.array([0.4]))
