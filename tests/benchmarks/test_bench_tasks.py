"""The task registry and the generalization-prediction task on a synthetic zoo."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from benchmarks.synthetic import small_cnn_space, synthetic_split, synthetic_splits
from benchmarks.tasks import Task, create_task, list_tasks, register_task
from zoo.registry import UnknownNameError
from zoo.loader import ZooSplit
from zoo.validation.schema import SchemaError

FAST = {"epochs": 4, "batch_size": 32}


def test_generalization_is_registered_with_its_metrics():
    assert "generalization" in list_tasks()
    task = create_task("generalization", epochs=3)
    assert task.config.epochs == 3
    assert task.main_metric == "kendall_tau"
    assert task.metrics == {"kendall_tau": True, "r2": True, "rmse": False}


def test_unknown_task_lists_the_valid_ones():
    with pytest.raises(UnknownNameError, match="valid names: .*generalization"):
        create_task("nope")


@pytest.mark.parametrize("overrides, message", [
    ({"epoch": 3}, "unknown key"),
    ({"epochs": 0}, "positive"),
    ({"batch_size": 1}, "at least 2"),
    ({"lr": "fast"}, "expected a number"),
    ({"weight_decay": -1.0}, "non-negative"),
])
def test_bad_task_overrides_are_schema_errors(overrides, message):
    with pytest.raises(SchemaError, match=message):
        create_task("generalization", **overrides)


def test_task_registration_checks():
    @dataclasses.dataclass(frozen=True)
    class EmptyConfig:
        pass

    class BadMetric(Task):
        Config = EmptyConfig
        metrics = {"a": True}
        main_metric = "b"

        def run(self, splits, model, model_overrides, seed, device="cpu", report=None):
            raise NotImplementedError

    with pytest.raises(TypeError, match="main metric"):
        register_task("bad-metric")(BadMetric)
    with pytest.raises(TypeError, match="expected a subclass of benchmarks.tasks.Task"):
        register_task("not-a-task")(object)
    BadMetric.main_metric = "a"
    with pytest.raises(ValueError, match="already registered"):
        register_task("generalization")(BadMetric)
    assert list_tasks().count("generalization") == 1 and "bad-metric" not in list_tasks()


def test_statnn_learns_the_synthetic_zoo():
    splits = synthetic_splits((300, 100, 100), seed=3, space=small_cnn_space(channels=8))
    result = create_task("generalization", epochs=6, batch_size=32).run(splits, "statnn", {}, seed=0)
    assert result.metrics["kendall_tau"] > 0.6
    assert result.metrics["r2"] > 0.5
    assert 1 <= result.selection["epoch"] <= 6


def test_a_run_is_reproducible_and_leaves_global_rng_alone(splits):
    # the MLP has dropout, so this also covers randomness drawn during training
    task = create_task("generalization", epochs=2, batch_size=32)
    small = {"hidden_sizes": [32], "dropout": 0.2}
    before = torch.get_rng_state()
    first = task.run(splits, "mlp", small, seed=5)
    assert torch.equal(torch.get_rng_state(), before)
    second = task.run(splits, "mlp", small, seed=5)
    other = task.run(splits, "mlp", small, seed=6)
    assert first.metrics == second.metrics
    np.testing.assert_array_equal(first.predictions["prediction"], second.predictions["prediction"])
    assert not np.allclose(first.predictions["prediction"], other.predictions["prediction"])


def test_diverged_checkpoints_are_dropped(splits):
    result = create_task("generalization", **FAST).run(splits, "mlp", {"hidden_sizes": [16]}, seed=0)
    test = splits["test"].metadata
    ok_ids = test.loc[test["status"] == "ok", "model_id"].tolist()
    assert (test["status"] == "diverged").any()  # the fixture does contain diverged rows
    assert result.predictions["model_id"].tolist() == ok_ids
    assert np.isfinite(result.predictions["target"]).all()
    np.testing.assert_allclose(result.predictions["target"], test.loc[test["status"] == "ok", "test_accuracy"])


def test_model_selection_never_looks_at_the_test_split(splits):
    task = create_task("generalization", **FAST)
    test = splits["test"]
    shuffled = test.metadata.copy()
    ok = shuffled["status"] == "ok"
    accuracies = shuffled.loc[ok, "test_accuracy"].to_numpy()
    shuffled.loc[ok, "test_accuracy"] = np.random.default_rng(0).permutation(accuracies)
    altered = {**splits, "test": ZooSplit(test.weights, shuffled)}
    small = {"hidden_sizes": [16]}
    original, changed = task.run(splits, "mlp", small, seed=0), task.run(altered, "mlp", small, seed=0)
    assert original.selection == changed.selection
    np.testing.assert_array_equal(original.predictions["prediction"], changed.predictions["prediction"])
    assert original.metrics != changed.metrics


def test_num_params_counts_the_trainable_parameters(splits):
    result = create_task("generalization", epochs=1).run(splits, "statnn", {"hidden_sizes": [8]}, seed=0)
    features = 7 * 8  # 7 statistics x 8 tensors of the small CNN
    assert result.num_params == (features * 8 + 8) + (8 + 1)


def test_input_errors_are_clear(splits):
    task = create_task("generalization", epochs=1)
    with pytest.raises(ValueError, match="missing \\['test'\\]"):
        task.run({"train": splits["train"], "validation": splits["validation"]}, "statnn", {}, seed=0)
    with pytest.raises(ValueError, match="out_features must be 1"):
        task.run(splits, "statnn", {"out_features": 2}, seed=0)
    constant = splits["validation"].metadata.assign(test_accuracy=0.5)
    with pytest.raises(ValueError, match="validation split: test_accuracy is the same"):
        task.run({**splits, "validation": ZooSplit(splits["validation"].weights, constant)}, "statnn", {}, seed=0)
    all_diverged = synthetic_split(10, seed=1, diverged_fraction=1.0)
    with pytest.raises(ValueError, match="train split: 0 checkpoints with status 'ok'"):
        task.run({**splits, "train": all_diverged}, "statnn", {}, seed=0)
    no_target = splits["test"].metadata.drop(columns=["test_accuracy"])
    with pytest.raises(ValueError, match="lacks the columns \\['test_accuracy'\\]"):
        task.run({**splits, "test": ZooSplit(splits["test"].weights, no_target)}, "statnn", {}, seed=0)
