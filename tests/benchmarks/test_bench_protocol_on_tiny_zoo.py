"""The protocol on the real packed `tiny_zoo` (tests/conftest.py): the manifest's architectures
reach the task through `load_splits`, each row's group comes from its family and activation,
and augmentation preserves every real checkpoint's function."""

from __future__ import annotations

import numpy as np
import torch

from benchmarks import protocol
from benchmarks.harness import load_splits, run_on_splits
from benchmarks.results import load_results
from zoo.families import create_family
from benchmarks.run_options import RunOptions


def test_groups_follow_each_rows_activation_and_preserve_function(tiny_zoo):
    splits, dataset = load_splits(tiny_zoo, None)
    family = create_family(dataset["family"])
    split = splits["train"]
    metadata = split.metadata.reset_index(drop=True)
    groups = protocol.symmetry_groups(metadata, split.weights, "train split")
    expected = {"relu": "scale", "tanh": "sign"}
    for group in groups:
        activations = set(metadata.loc[group.rows.numpy(), "activation"])
        assert len(activations) == 1 and group.symmetry.mode == expected[activations.pop()]
    augmented, _, _ = protocol.augment(split.weights, groups, 1, torch.Generator().manual_seed(0))
    count = len(split)
    architecture = next(iter(split.metadata.attrs[protocol.ARCHITECTURES_ATTR].values()))["architecture"]
    hparam_names = [name for name in family.HParams.__dataclass_fields__ if name in metadata.columns]
    inputs = torch.randn(3, 1, 28, 28, generator=torch.Generator().manual_seed(1))
    for row in range(count):
        hparams = {name: metadata.loc[row, name] for name in hparam_names}
        hparams = {k: v.item() if isinstance(v, np.generic) else v for k, v in hparams.items()}
        model = family.build(architecture, hparams).eval()
        model.load_state_dict(split.weights.state_dict(row))
        original = model(inputs)
        model.load_state_dict(augmented.state_dict(count + row))
        torch.testing.assert_close(model(inputs), original, rtol=1e-4, atol=1e-5)
        # the copy's weights differ (a group element that does nothing would pass the check above)
        assert not torch.allclose(augmented.flatten()[count + row], split.weights.flatten()[row])


def test_a_protocol_run_on_the_real_zoo_is_recorded(tiny_zoo, tmp_path):
    splits, dataset = load_splits(tiny_zoo, None)
    # epochs 0 and 2: the tiny zoo's one test-split run stays at chance from epoch 1 to 2 (the
    # released CNN recipe on 1,000 images), so epochs 1 and 2 alone would leave nothing to rank
    task = {"epochs": 1, "batch_size": 4, "subset": {"epoch": [0, 2]}, "augment_copies": 1,
            "augment_splits": ["train", "test"], "loss": "bce"}
    out = tmp_path / "statnn.json"
    results = run_on_splits("generalization", "statnn", splits, dataset,
                            RunOptions([0], model_overrides={"hidden_sizes": [8]}, task_overrides=task, progress=False),
                            out)
    assert results["task_config"]["subset"] == {"epoch": [0, 2]} and results["task_config"]["loss"] == "bce"
    test = splits["test"].metadata
    kept = test[(test["status"] == "ok") & test["epoch"].isin([0, 2])]["model_id"].tolist()
    assert (test["epoch"] == 1).any()  # the subset has rows to drop
    predictions = (tmp_path / "statnn.predictions.csv").read_text().splitlines()[1:]
    ids = [line.split(",")[1] for line in predictions]
    assert ids == kept + [f"{model_id}~1" for model_id in kept]  # the subset held, and the test split doubled
    ranking = load_results(out).per_seed[0].ranking
    assert ranking["num_targets"] == 2 * len(kept) and ranking["distinct_targets"] <= len(kept)
