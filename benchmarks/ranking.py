"""How far a test split lets a ranking go: Kendall's tau-b's ceiling under tied targets.

Generalization prediction is scored by Kendall's tau-b. So do Unterthiner et al. 2020
(arXiv:2002.11448), Zhou et al. 2023, and Tran et al. NeurIPS 2024 ("Monomial-NFN"). So do
Kalogeropoulos et al. NeurIPS 2024 ("ScaleGMN") and Tran et al. ICLR 2025 ("Transformer-NFN"). Test
accuracies are multiples of 1 / (test-set size). So a zoo of many similar members has many tied
targets.

tau-b = (n_c - n_d) / sqrt((n_0 - n_1)(n_0 - n_2)), with n_0 = n(n-1)/2 pairs. Here n_1 counts the
pairs tied in the targets, and n_2 the pairs tied in the predictions. Ties in the targets alone do
not cap tau-b. A prediction that reproduces them exactly, such as the targets themselves, scores
n_c = n_0 - n_1, n_d = 0 and n_2 = n_1. Hence it scores exactly 1. So "the best tau-b of any
prediction" is 1 whenever the targets are not constant, and carries no information.

What ties do cap is a predictor that cannot reproduce them. An NFN's real-valued outputs are
almost surely all distinct (n_2 = 0). Then the numerator is at most n_0 - n_1, with every pair of
distinct targets concordant. The denominator is sqrt((n_0 - n_1) n_0), so

    ceiling = sqrt((n_0 - n_1) / n_0) = sqrt(1 - tied_pair_fraction).

Any tie-free prediction that orders the targets, and breaks their ties arbitrarily, reaches it.
This is the ceiling reported: the best tau-b a predictor with distinct predictions can reach.

A worked example is in tests/benchmarks/test_bench_ranking.py. Take targets (0.5, 0.5, 0.7, 0.9),
so n_0 = 6 and n_1 = 1. Predictions (1, 2, 3, 4) give n_c = 5 and n_d = 0. Then
tau-b = 5 / sqrt(5 * 6) = sqrt(5/6) ~ 0.9129, the ceiling. Predicting the targets themselves gives 1."""

from __future__ import annotations

import math

import numpy as np


def tied_pairs(values: np.ndarray) -> int:
    """The number of pairs i < j with values[i] == values[j]."""
    _, counts = np.unique(np.asarray(values), return_counts=True)
    return int(np.sum(counts * (counts - 1) // 2))


def ranking_ceiling(targets: np.ndarray) -> dict[str, float]:
    """The test targets' tie statistics, and the tau-b ceiling of tie-free predictions.

    `kendall_tau_ceiling` is sqrt((n_0 - n_1) / n_0); see the module docstring. `distinct_targets` is
    the number of distinct target values. `tied_pair_fraction` is n_1 / n_0, and `num_targets` is n."""
    targets = np.asarray(targets)
    n = len(targets)
    if n < 2:
        raise ValueError(f"a ranking needs at least 2 targets, got {n}")
    pairs = n * (n - 1) // 2
    tied = tied_pairs(targets)
    return {"kendall_tau_ceiling": math.sqrt((pairs - tied) / pairs),
            "distinct_targets": float(len(np.unique(targets))),
            "tied_pair_fraction": tied / pairs,
            "num_targets": float(n)}
