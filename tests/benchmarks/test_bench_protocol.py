"""The generalization task's protocol on synthetic splits: checkpoints, subsets, thresholds,
group augmentation, the BCE loss and the recorded ranking ceiling (benchmarks.protocol)."""

from __future__ import annotations

import numpy as np
import pandas
import pytest
import torch

from benchmarks import protocol
from benchmarks.tasks import create_task
from zoo.families.cnn import CNNArchitecture, SmallCNN
from zoo.loader import ZooSplit
from zoo.planning.plan import checkpoint_id
from zoo.validation.schema import SchemaError

FAST = {"epochs": 1, "batch_size": 32}
SMALL = {"hidden_sizes": [8]}
ARCHITECTURE = {"channels": 8}  # the synthetic splits' weight space is this CNN's (tests/benchmarks/conftest.py)
ARCHITECTURES = {"small-cnn": {"family": "cnn", "architecture": ARCHITECTURE}}


def labelled(split: ZooSplit) -> ZooSplit:
    """The split with an activation column (relu, tanh alternating by run) and its architectures."""
    metadata = split.metadata.copy()
    metadata["activation"] = ["relu" if seed % 2 else "tanh" for seed in metadata["seed"]]
    return protocol.with_architectures(ZooSplit(split.weights, metadata), ARCHITECTURES)


@pytest.fixture(scope="module")
def labelled_splits(splits) -> dict[str, ZooSplit]:
    return {name: labelled(split) for name, split in splits.items()}


def run(splits, **overrides):
    return create_task("generalization", **{**FAST, **overrides}).run(splits, "statnn", SMALL, seed=0)


def ok_rows(split: ZooSplit) -> pandas.DataFrame:
    return split.metadata[split.metadata["status"] == "ok"]


def test_final_checkpoints_are_each_runs_last_epoch(splits):
    final = run(splits, checkpoints="final")
    test = ok_rows(splits["test"])
    assert set(final.predictions["model_id"]) == set(test.loc[test["epoch"] == 20, "model_id"])
    everything = run(splits)  # the default keeps every epoch: the choice above did filter
    assert set(everything.predictions["model_id"]) == set(test["model_id"]) > set(final.predictions["model_id"])


def test_a_best_copy_of_the_final_epoch_is_not_a_final_checkpoint():
    metadata = pandas.DataFrame({"run_id": ["r", "r", "r", "s"], "epoch": [1, 2, 2, 1],
                                 "model_id": ["a", "b", checkpoint_id("r", "best"), "c"]})
    assert protocol.checkpoint_mask(metadata, "final", (), "here").tolist() == [False, True, False, True]


def test_listed_epochs(splits):
    result = run(splits, checkpoints="epochs", checkpoint_epochs=[10])
    test = ok_rows(splits["test"])
    assert set(result.predictions["model_id"]) == set(test.loc[test["epoch"] == 10, "model_id"])
    with pytest.raises(ValueError, match=r"no checkpoints at epochs \[5\].*holds the epochs \[10, 20\]"):
        run(splits, checkpoints="epochs", checkpoint_epochs=[5, 10])


def test_a_subset_keeps_only_its_rows(labelled_splits):
    relu = run(labelled_splits, subset={"activation": "relu"})
    test = ok_rows(labelled_splits["test"])
    assert set(relu.predictions["model_id"]) == set(test.loc[test["activation"] == "relu", "model_id"])
    assert 0 < len(relu.predictions) < len(test)  # the filter was applied, and it left rows
    both = run(labelled_splits, subset={"activation": ["relu", "tanh"]})
    assert len(both.predictions) == len(test)


def test_subset_errors_name_the_column_and_values(labelled_splits):
    with pytest.raises(ValueError, match=r"unknown metadata columns \['activaton'\]"):
        run(labelled_splits, subset={"activaton": "relu"})
    with pytest.raises(ValueError, match=r"train split: the subset \{'activation': 'gelu'\} leaves no checkpoints; "
                                         r"the kept rows hold \{'activation': \['relu', 'tanh'\]\}"):
        run(labelled_splits, subset={"activation": "gelu"})


def test_an_accuracy_threshold_drops_members_below_it(splits):
    threshold = float(ok_rows(splits["test"])["test_accuracy"].median())
    result = run(splits, min_accuracy=threshold)
    assert (result.predictions["target"] >= threshold).all()
    assert len(result.predictions) < len(ok_rows(splits["test"]))
    with pytest.raises(ValueError, match="no checkpoints left after dropping test_accuracy below min_accuracy 1.0"):
        run(splits, min_accuracy=1.0)


def test_each_row_gets_its_activations_group(labelled_splits):
    split = labelled_splits["train"]
    groups = protocol.symmetry_groups(split.metadata, split.weights, "train split")
    modes = {group.label.split("activation=")[1]: group.symmetry.mode for group in groups}
    assert modes == {"relu": "scale", "tanh": "sign"}
    rows = torch.sort(torch.cat([group.rows for group in groups])).values
    assert torch.equal(rows, torch.arange(len(split)))  # every row in exactly one group


def function_of(weights, row: int, activation: str, inputs: torch.Tensor) -> torch.Tensor:
    model = SmallCNN(CNNArchitecture(**ARCHITECTURE), activation)
    model.load_state_dict(weights.state_dict(row))
    return model.eval()(inputs)


def test_augmentation_preserves_each_networks_function(labelled_splits):
    split = labelled_splits["train"]
    groups = protocol.symmetry_groups(split.metadata, split.weights, "train split")
    augmented, source, number = protocol.augment(split.weights, groups, 2, torch.Generator().manual_seed(0))
    count = len(split)
    assert len(augmented) == 3 * count and source.tolist() == list(range(count)) * 3
    assert number.tolist() == [0] * count + [1] * count + [2] * count
    assert all(torch.equal(a[:count], w) for a, w in zip(augmented.tensors, split.weights.tensors))
    for spec, a, w in zip(split.weights.space.tensors, augmented.tensors, split.weights.tensors):
        if spec.name == "dense.bias":  # the output units are not permuted: the one tensor the group fixes
            assert torch.equal(a[count:], w.repeat(2, 1))
        else:  # the copies are different weights, and different from each other
            assert not torch.allclose(a[count:2 * count], w) and not torch.allclose(a[2 * count:], a[count:2 * count])
    inputs = torch.randn(4, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    activations = split.metadata["activation"].tolist()
    for row in (0, 1, 2, 3):  # two runs: one tanh, one relu
        original = function_of(split.weights, row, activations[row], inputs)
        moved = function_of(augmented, count + row, activations[row], inputs)
        torch.testing.assert_close(moved, original, rtol=1e-4, atol=1e-5)
    # negative control: ReLU's positive scalings do not preserve a tanh network
    tanh = next(row for row, name in enumerate(activations) if name == "tanh")
    relu_group = next(group.symmetry for group in groups if group.symmetry.mode == "scale")
    one = split.weights[torch.tensor([tanh])]
    wrong, _, _ = protocol.augment(one, [protocol.RowGroup(torch.tensor([0]), relu_group, "wrong")], 1,
                                   torch.Generator().manual_seed(0))
    assert not torch.allclose(function_of(wrong, 1, "tanh", inputs), function_of(one, 0, "tanh", inputs),
                              rtol=1e-3, atol=1e-4)


def test_augmentation_is_seeded(labelled_splits):
    split = labelled_splits["validation"]
    groups = protocol.symmetry_groups(split.metadata, split.weights, "validation split")
    first, second, other = (protocol.augment(split.weights, groups, 1, torch.Generator().manual_seed(seed))[0]
                            for seed in (3, 3, 4))
    assert all(torch.equal(a, b) for a, b in zip(first.tensors, second.tensors))
    assert not all(torch.equal(a, b) for a, b in zip(first.tensors, other.tensors))


def test_scale_range_draws_relu_scalings_from_it(labelled_splits):
    split = labelled_splits["train"]
    groups = {group.symmetry.mode: group for group in protocol.symmetry_groups(split.metadata, split.weights, "t")}
    generator = torch.Generator().manual_seed(0)
    scales = protocol.sample_element(groups["scale"].symmetry, generator, 50, (1.0, 1000.0)).scales
    values = torch.cat([s.flatten() for s in scales])
    assert values.min() >= 1 and values.max() <= 1000 and values.max() > 100  # U[1, 1000], not the default [1/4, 4]
    signs = protocol.sample_element(groups["sign"].symmetry, torch.Generator().manual_seed(0), 50, (1.0, 1000.0)).scales
    assert set(torch.cat([s.flatten() for s in signs]).tolist()) == {-1.0, 1.0}  # tanh keeps its sign flips


def test_test_augmentation_copies_rows_and_keeps_their_targets(labelled_splits):
    plain = run(labelled_splits)
    result = run(labelled_splits, augment_copies=2, augment_splits=["train", "test"], augment_scale_range=[1, 1000])
    table, original = result.predictions, plain.predictions
    assert len(table) == 3 * len(original)
    for number in (1, 2):  # each copy keeps its original's target: test accuracy is invariant
        copies = table[table["model_id"].str.endswith(f"~{number}")]
        np.testing.assert_array_equal(copies["target"], original["target"])
        assert copies["model_id"].str.removesuffix(f"~{number}").tolist() == original["model_id"].tolist()
    only = run(labelled_splits, augment_copies=1, augment_splits=["test"], augment_keep_original=False)
    assert only.predictions["model_id"].str.endswith("~1").all() and len(only.predictions) == len(original)
    # a model that is not invariant sees different weights: its predictions change
    assert not np.allclose(only.predictions["prediction"], original["prediction"])


def test_augmentation_needs_the_architectures(splits):
    with pytest.raises(ValueError, match="group augmentation needs each row's architecture"):
        run(splits, augment_copies=1)


def test_bce_predicts_accuracies_in_the_unit_interval(splits):
    bce, mse = run(splits, loss="bce", epochs=2), run(splits, epochs=2)
    assert ((bce.predictions["prediction"] > 0) & (bce.predictions["prediction"] < 1)).all()
    assert not np.allclose(bce.predictions["prediction"], mse.predictions["prediction"])


def test_the_ranking_ceiling_is_reported(splits):
    result = run(splits)
    targets = result.predictions["target"].to_numpy()
    assert result.ranking["num_targets"] == len(targets)
    assert result.ranking["distinct_targets"] == len(np.unique(targets))
    assert 0 < result.ranking["kendall_tau_ceiling"] <= 1
    assert result.metrics["kendall_tau"] <= result.ranking["kendall_tau_ceiling"] + 1e-12


@pytest.mark.parametrize("overrides, message", [
    ({"checkpoints": "epochs"}, "checkpoint_epochs: expected a non-empty list exactly when"),
    ({"checkpoint_epochs": [3]}, "checkpoint_epochs: expected a non-empty list exactly when"),
    ({"checkpoints": "last"}, "checkpoints: expected one of"),
    ({"subset": {"activation": {"a": 1}}}, "subset.activation: expected a value or a non-empty list"),
    ({"subset": {"activation": []}}, "subset.activation: expected a value or a non-empty list"),
    ({"min_accuracy": 2.0}, r"min_accuracy: expected an accuracy in \[0, 1\]"),
    ({"augment_copies": -1}, "augment_copies: expected a non-negative integer"),
    ({"augment_splits": ["train", "train"]}, "augment_splits: expected distinct split names"),
    ({"augment_splits": ["holdout"]}, "augment_splits"),
    ({"augment_keep_original": False}, "augment_keep_original: false needs augment_copies >= 1"),
    ({"augment_copies": 1, "augment_scale_range": [0, 10]}, "augment_scale_range: expected"),
    ({"augment_scale_range": [1, 10]}, "augment_scale_range: has no effect"),
    ({"loss": "l1"}, "loss: expected one of"),
])
def test_bad_protocol_settings_are_schema_errors(overrides, message):
    with pytest.raises(SchemaError, match=message):
        create_task("generalization", **overrides)


def test_the_protocol_is_described_and_old_configs_mean_the_defaults():
    task = create_task("generalization").__class__
    old = {"epochs": 30, "batch_size": 64, "lr": 0.001, "weight_decay": 0.0001, "eval_batch_size": 1024}
    assert task.evaluation_protocol(old) == {"checkpoints": "all", "subset": None, "min_accuracy": None}
    assert task.describe_protocol(old) == ("checkpoints: all stored epochs; subset: all rows; augmentation: none; "
                                           "loss: MSE (standardized)")
    paper = {**old, "checkpoints": "final", "subset": {"activation": "relu"}, "min_accuracy": 0.1, "loss": "bce",
             "augment_copies": 2, "augment_splits": ["train", "test"], "augment_scale_range": [1, 1000]}
    assert task.describe_protocol(paper) == (
        "checkpoints: each run's final epoch; subset: activation ∈ ['relu']; test_accuracy ≥ 0.1; "
        "augmentation: 2 group element(s) per row of train/test, scalings U[1, 1000]; loss: sigmoid + BCE")
    assert task.evaluation_protocol(paper)["test_augmentation"] == {"copies": 2, "keep_original": True,
                                                                    "scale_range": [1.0, 1000.0]}
