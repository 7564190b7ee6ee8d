"""Rank agreement between a standard suite and its larger-budget run (`leaderboards.agreement`), and the
larger-budget suites themselves (`benchmarks.standard.scaled`)."""

import dataclasses

import numpy as np
import pytest

from benchmarks.standard import STANDARD_SUITES
from benchmarks.tasks import create_task, get_task_class
from leaderboards.agreement import MIN_MODELS, Run, agreement_markdown, cell_agreement
from leaderboards.suite_board import _task_config, run_cell

GENERALIZATION = get_task_class("generalization")
ROWS = 200


def _runs(noise_base: dict[str, float], noise_larger: dict[str, float], seed: int = 0):
    """Runs whose predictions are the targets plus each model's noise: less noise, a better tau."""
    rng = np.random.default_rng(seed)
    targets = rng.uniform(0.1, 0.9, ROWS)
    runs = {}
    for which, noises in (("base", noise_base), ("larger", noise_larger)):
        for model, noise in noises.items():
            predictions = targets + rng.normal(0.0, noise, (3, ROWS))
            mean = float(np.mean([GENERALIZATION.score(targets, p)["kendall_tau"] for p in predictions]))
            runs[model, which] = Run(mean, predictions)
    return runs, targets


NOISES = {"a": 0.01, "b": 0.05, "c": 0.1, "d": 0.2, "e": 0.4}


def test_an_order_that_holds_agrees_and_a_reversed_one_disagrees():
    runs, targets = _runs(NOISES, {m: n / 2 for m, n in NOISES.items()})  # all better, same order
    held = cell_agreement("cell", GENERALIZATION, runs, targets, resamples=40)
    assert held.tau == pytest.approx(1.0) and held.interval[0] > 0.5
    assert [s.model for s in held.models] == ["a", "b", "c", "d", "e"]  # best at the larger budget first
    assert all(s.larger > s.base for s in held.models)

    reversed_noises = dict(zip(NOISES, reversed(list(NOISES.values()))))
    runs, targets = _runs(NOISES, reversed_noises)  # the negative control: the order turns over
    turned = cell_agreement("cell", GENERALIZATION, runs, targets, resamples=40)
    assert turned.tau == pytest.approx(-1.0) and turned.interval[1] < -0.5


def test_models_within_noise_give_a_wide_interval_and_the_same_numbers_each_time():
    alike = {m: 0.2 for m in NOISES}
    runs, targets = _runs(alike, alike)
    first = cell_agreement("cell", GENERALIZATION, runs, targets, resamples=40)
    again = cell_agreement("cell", GENERALIZATION, runs, targets, resamples=40)
    assert first == again  # a fixed generator: a page renders the same numbers
    low, high = first.interval
    assert high - low > 0.8  # the test rows and seeds could reorder these models


def test_too_few_models_are_not_measured():
    runs, targets = _runs({"a": 0.1, "b": 0.2}, {"a": 0.1, "b": 0.2})
    few = cell_agreement("cell", GENERALIZATION, runs, targets)
    assert MIN_MODELS == 3 and few.tau is None and few.interval is None and len(few.models) == 2
    text = agreement_markdown([few], "standard-v2", "standard-v2-4x")
    assert "fewer than 3: not measured" in text and "| a |" in text


def test_the_larger_suites_scale_only_the_epochs():
    base = STANDARD_SUITES.get("standard-v2")()
    for factor in (2, 4):
        larger = STANDARD_SUITES.get(f"standard-v2-{factor}x")()
        assert larger.name == f"standard-v2-{factor}x"
        for small, big in zip(base.cells, larger.cells, strict=True):
            assert big.task_overrides["epochs"] == factor * small.task_overrides["epochs"]
            assert {**big.task_overrides, "epochs": 0} == {**small.task_overrides, "epochs": 0}
            assert dataclasses.replace(big, task_overrides=small.task_overrides, label=small.label) == small
            assert f"{factor * small.task_overrides['epochs']} epochs ({factor}x standard-v2)" in big.label


def test_a_larger_budget_run_is_never_a_cell_of_the_suite(make_data):
    """The runs are entries of their own protocol: a 4x run matches the 4x cell, never standard-v2's."""
    from benchmarks.results import Results
    from leaderboards.entries import Entry, SubmissionInfo
    from zoo.validation.schema import from_data

    base, larger = STANDARD_SUITES.get("standard-v2")(), STANDARD_SUITES.get("standard-v2-4x")()
    relu = larger.cells[0]
    data = make_data(model="nqpool", dataset_hash=relu.zoo.dataset_hash, seeds=relu.seeds)
    data["task_config"] = _task_config(relu)
    submission = SubmissionInfo("nqpool-" + "0" * 32, "0" * 64, "2026-12-07T00:00:00Z", "r.json")
    entry = Entry(submission, from_data(Results, data, where="test"))
    assert run_cell(entry, larger.cells) == relu
    assert run_cell(entry, base.cells) is None
    assert create_task(relu.task, **relu.task_overrides).config.epochs == 40
