"""Regression and ranking metrics for predicted-vs-true scores (numpy in, float out).

Kendall's tau is the headline metric of generalization prediction (Unterthiner et al. 2020,
arXiv:2002.11448; Zhou et al. 2023, "Permutation Equivariant Neural Functionals"). It scores how
well a predictor ranks checkpoints, which is what model selection needs."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def kendall_tau(targets: np.ndarray, predictions: np.ndarray) -> float:
    """Kendall's tau-b between targets and predictions.

    scipy returns NaN when either side is constant. Constant predictions carry no ranking information.
    So we report 0 (no rank agreement), and keep metrics finite for JSON files."""
    tau = stats.kendalltau(targets, predictions).statistic
    return 0.0 if math.isnan(tau) else float(tau)


def r2_score(targets: np.ndarray, predictions: np.ndarray) -> float:
    """Coefficient of determination 1 - SS_res / SS_tot (needs non-constant targets)."""
    total = float(np.sum((targets - targets.mean()) ** 2))
    if total == 0.0:
        raise ValueError("R^2 is undefined for constant targets")
    return 1.0 - float(np.sum((targets - predictions) ** 2)) / total


def rmse(targets: np.ndarray, predictions: np.ndarray) -> float:
    """Root mean squared error."""
    return float(np.sqrt(np.mean((targets - predictions) ** 2)))
