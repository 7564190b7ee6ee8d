"""Regression and ranking metrics for predicted-vs-true scores (numpy in, float out).

Kendall's tau is the headline metric of generalization prediction (Unterthiner et al. 2020,
arXiv:2002.11448; Zhou et al. 2023, "Permutation Equivariant Neural Functionals"). It scores how
well a predictor ranks checkpoints, which is what model selection needs."""

from __future__ import annotations

import math

import numpy as np


def kendall_tau(targets: np.ndarray, predictions: np.ndarray) -> float:
    """Kendall's tau-b between targets and predictions.

    scipy returns NaN when either side is constant. Constant predictions carry no ranking information.
    So we report 0 (no rank agreement), and keep metrics finite for JSON files."""
    from scipy import stats  # imported when a tau is computed, not by every CLI start

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


def resampled_kendall_tau(targets: np.ndarray, predictions: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """`kendall_tau` of many bootstrap resamples at once: (resamples, vectors) for `predictions` of
    shape (vectors, rows), one resample per row of `counts`.

    `counts[d, i]` is how often resample `d` draws row `i`. A resample's pairs are pairs of drawn
    copies, and two copies of one row tie in both targets and predictions. So the concordance and
    the tie counts are quadratic forms in the counts: matrix products, no sort. Every partial sum is
    an integer below 2^24, so float32 holds it exactly: the result is scipy's tau-b of the resampled rows.
    """
    x = np.asarray(targets, dtype=np.float64)
    ys = np.atleast_2d(np.asarray(predictions, dtype=np.float64))
    w = np.asarray(counts, dtype=np.float32)
    if float(w.sum(axis=1).max(initial=0)) ** 2 >= 2**24:
        raise ValueError(f"resampled_kendall_tau: at most {2**12 - 1:,} rows a resample (float32 sums stay exact)")
    drawn = w.sum(axis=1, dtype=np.float64)

    def form(matrix: np.ndarray) -> np.ndarray:  # w_d^T M w_d for every resample d
        return np.einsum("dn,dn->d", w @ matrix.astype(np.float32), w, dtype=np.float64)

    pairs = drawn * (drawn - 1) / 2
    x_sign = np.sign(x[:, None] - x[None, :])
    x_ties = (form(x[:, None] == x[None, :]) - drawn) / 2
    taus = np.zeros((len(w), len(ys)))
    for k, y in enumerate(ys):
        if np.isnan(x).any() or np.isnan(y).any():  # scipy's NaN only where a drawn row holds one: row by row
            taus[:, k] = [kendall_tau(np.repeat(x, c), np.repeat(y, c)) for c in counts]
            continue
        concordance = form(x_sign * np.sign(y[:, None] - y[None, :])) / 2
        y_ties = (form(y[:, None] == y[None, :]) - drawn) / 2
        defined = (pairs - x_ties > 0) & (pairs - y_ties > 0)
        with np.errstate(divide="ignore", invalid="ignore"):
            tau = concordance / np.sqrt(pairs - x_ties) / np.sqrt(pairs - y_ties)
        taus[:, k] = np.where(defined, np.clip(tau, -1.0, 1.0), 0.0)
    return taus
