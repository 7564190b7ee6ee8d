"""The continual-learning metrics against matrices computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.tracks.common.continual import (
    cumulative_average_accuracy, final_average_accuracy, final_forgetting, summary)

NAN = math.nan
# A[i, t]: task i after stage t; entries above the diagonal's past (t < i) are never read
A = [[0.9, 0.8, 0.6],
     [NAN, 0.7, 0.5],
     [NAN, NAN, 0.4]]


def test_the_three_metrics_by_hand():
    assert final_average_accuracy(A) == pytest.approx((0.6 + 0.5 + 0.4) / 3)
    assert cumulative_average_accuracy(A) == pytest.approx((0.9 + (0.8 + 0.7) / 2 + (0.6 + 0.5 + 0.4) / 3) / 3)
    # task 0 fell from its best 0.9 to 0.6, task 1 from 0.7 to 0.5; the last task cannot have forgotten
    assert final_forgetting(A) == pytest.approx(((0.9 - 0.6) + (0.7 - 0.5)) / 2)
    assert set(summary(A)) == {"final_average_accuracy", "cumulative_average_accuracy", "final_forgetting"}


def test_no_forgetting_and_one_task():
    steady = np.triu(np.full((4, 4), 0.75))
    assert final_forgetting(steady) == 0.0 and final_average_accuracy(steady) == pytest.approx(0.75)
    assert final_forgetting([[0.5]]) == 0.0 and cumulative_average_accuracy([[0.5]]) == 0.5


def test_a_later_gain_is_negative_forgetting():
    assert final_forgetting([[0.5, 0.7], [NAN, 0.9]]) == pytest.approx(-0.2)


@pytest.mark.parametrize("matrix, reason", [
    ([[0.5, 0.4]], "square"),
    ([[0.5, NAN], [NAN, 0.4]], "accuracies in \\[0, 1\\]"),
    ([[1.5]], "accuracies in \\[0, 1\\]"),
])
def test_malformed_matrices_are_refused(matrix, reason):
    with pytest.raises(ValueError, match=reason):
        final_average_accuracy(matrix)


def test_a_final_only_matrix_gives_its_faa_alone():
    final = [[NAN, NAN, 0.6], [NAN, NAN, 0.5], [NAN, NAN, 0.4]]  # evaluated after the last task only
    assert summary(final, final_only=True) == {"final_average_accuracy": pytest.approx(0.5)}
    with pytest.raises(ValueError, match="every \\(task i, stage t >= i\\)"):
        summary(final)  # CAA and forgetting need every stage
    with pytest.raises(ValueError, match="at every task i at the last stage"):
        summary([[NAN, NAN], [NAN, 0.4]], final_only=True)
