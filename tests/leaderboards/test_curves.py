"""Budget curves (`leaderboards.curves`): a larger run's learning curves read at the suite's budgets."""

from __future__ import annotations

import numpy as np
import pytest

from benchmarks.tasks import get_task_class
from leaderboards.curves import best_so_far, cell_curves, curves_markdown


def test_best_so_far_keeps_the_best_epoch_up_to_each_and_skips_nulls():
    assert best_so_far((0.1, 0.3, None, 0.2, 0.5), higher=True).tolist() == [0.1, 0.3, 0.3, 0.3, 0.5]
    assert best_so_far((0.4, 0.2, 0.3), higher=False).tolist() == [0.4, 0.2, 0.2]  # an MSE: lower is better
    assert np.isnan(best_so_far((None, 0.2), higher=True)[0])


class _Seed:
    def __init__(self, curve):
        self.curve = tuple(curve)
        self.selection = {"epoch": int(np.argmax(curve)) + 1, "validation_kendall_tau": max(curve)} if curve else {}


class _Entry:  # the two fields `cell_curves` reads of a larger suite's entry
    def __init__(self, *curves):
        self.results = type("R", (), {"per_seed": tuple(_Seed(c) for c in curves)})()


def test_an_order_that_changes_after_the_budget_shows_in_the_tau():
    task = get_task_class("generalization")
    runs = {"early": _Entry([0.5, 0.6, 0.6, 0.6], [0.5, 0.6, 0.6, 0.6]),  # flat after epoch 2
            "late": _Entry([0.1, 0.2, 0.5, 0.8], [0.1, 0.3, 0.5, 0.7]),  # overtakes both after epoch 2
            "middle": _Entry([0.3, 0.4, 0.5, 0.55], [0.3, 0.4, 0.5, 0.55])}
    curves = cell_curves("cell", task, 2, 4, runs)
    assert curves.budgets == (2, 4) and curves.score == "validation_kendall_tau"
    assert [model for model, _ in curves.models] == ["late", "early", "middle"]  # by the last budget
    assert dict(curves.models)["late"] == pytest.approx((0.25, 0.75))
    assert curves.taus[-1] == pytest.approx(1.0) and curves.taus[0] == pytest.approx(-1 / 3)
    table = curves_markdown([curves], "s", "s-2x")
    assert "| late | 0.2500 | 0.7500 |" in table and "| *Kendall tau with the last* | -0.33 | 1.00 |" in table


def test_runs_without_a_whole_curve_are_left_out():
    task = get_task_class("generalization")
    assert cell_curves("cell", task, 2, 4, {"old": _Entry([])}) is None  # results written before curves
    two = cell_curves("cell", task, 2, 4, {"a": _Entry([0.1, 0.2, 0.3, 0.4]), "b": _Entry([0.2, 0.1, 0.1, 0.1])})
    assert two.taus == (None, None)  # fewer than three models: no tau
