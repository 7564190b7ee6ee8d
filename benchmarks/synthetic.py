"""A synthetic zoo with a known accuracy function, for tests and smoke runs of NFN models.

Members live in the Small CNN Zoo's weight space (Unterthiner et al. 2020, Sec. 3). That is three
3x3 convolutions of 16 channels and a dense layer to 10 classes: 4,970 parameters. Each member draws
one scale per layer, and its weights are Gaussian with those scales. Its "test accuracy" is a smooth
function of the scales, plus a little noise.

Weight statistics, which STATNN reads, determine the scales. So a working predictor ranks these
members well. Nothing here trains a CNN, which keeps tests fast. The splits follow the loader's
`ZooSplit` contract, including diverged rows whose metrics are NaN."""

from __future__ import annotations

import math

import pandas
import torch

from zoo.weightspace import TensorSpec, WeightBatch, WeightSpace

METRIC_COLUMNS = ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "test_loss", "test_accuracy")


def small_cnn_space(in_channels: int = 1, channels: int = 16, num_classes: int = 10) -> WeightSpace:
    """The weight space of the Small CNN Zoo member: conv1..conv3 (3x3) and a dense layer."""
    tensors = []
    width = in_channels
    for layer in range(3):
        tensors += [TensorSpec(f"conv{layer + 1}.weight", (channels, width, 3, 3), "weight", layer),
                    TensorSpec(f"conv{layer + 1}.bias", (channels,), "bias", layer)]
        width = channels
    tensors += [TensorSpec("dense.weight", (num_classes, channels), "weight", 3),
                TensorSpec("dense.bias", (num_classes,), "bias", 3)]
    return WeightSpace(tuple(tensors))


def accuracy_of_scales(scales: torch.Tensor) -> torch.Tensor:
    """The known "test accuracy" of members with per-layer scales (N, L): a value in (0.1, 1)."""
    return 0.55 + 0.4 * torch.tanh(2.0 * (scales[:, 0] - scales[:, 2]) + (scales[:, 1] - 1.0))


def synthetic_split(num_members: int, seed: int, *, diverged_fraction: float = 0.0,
                    split: str = "train", space: WeightSpace | None = None):
    """One split of `num_members` synthetic checkpoints, reproducible from `seed`.

    Returns a `zoo.loader.ZooSplit`. A `diverged_fraction` of the rows get status "diverged"
    and NaN metrics, as a real zoo's diverged runs do.
    """
    from zoo.loader import ZooSplit  # the split container of the loader contract

    space = space or small_cnn_space()
    if space.num_layers < 3:
        raise ValueError(f"the synthetic accuracy reads 3 layer scales; the weight space has {space.num_layers} layers")
    generator = torch.Generator().manual_seed(seed)
    scales = 0.3 + 1.2 * torch.rand(num_members, space.num_layers, generator=generator)  # (N, L)
    tensors = tuple(scales[:, spec.layer].reshape(-1, *([1] * len(spec.shape)))
                    * torch.randn(num_members, *spec.shape, generator=generator) / math.sqrt(max(spec.numel, 1)) * 4
                    for spec in space.tensors)
    accuracy = accuracy_of_scales(scales) + 0.01 * torch.randn(num_members, generator=generator)
    diverged = torch.rand(num_members, generator=generator) < diverged_fraction
    metadata = pandas.DataFrame({
        "model_id": [f"{split}-{seed}-{i:05d}" for i in range(num_members)],
        "run_id": [f"{split}-{seed}-run{i // 2:05d}" for i in range(num_members)],
        "family": "cnn",
        "config": "synthetic",
        "architecture": "small-cnn",
        "epoch": [(i % 2 + 1) * 10 for i in range(num_members)],
        "seed": [i // 2 for i in range(num_members)],
        "learning_rate": (scales[:, 0] * 1e-3).tolist(),
    })
    for column in METRIC_COLUMNS:
        values = accuracy if column.endswith("accuracy") else 1.0 - accuracy
        metadata[column] = values.masked_fill(diverged, float("nan")).tolist()
    metadata["status"] = ["diverged" if d else "ok" for d in diverged.tolist()]
    return ZooSplit(WeightBatch(space, tensors), metadata)


def synthetic_splits(sizes: tuple[int, int, int] = (600, 200, 200), seed: int = 0,
                     diverged_fraction: float = 0.05, space: WeightSpace | None = None) -> dict:
    """Train, validation and test splits of a synthetic zoo, each drawn from its own seed.

    `space` defaults to the Small CNN Zoo's; it needs at least 3 layers.
    """
    names = ("train", "validation", "test")
    return {name: synthetic_split(size, seed * 3 + offset, diverged_fraction=diverged_fraction, split=name,
                                  space=space)
            for offset, (name, size) in enumerate(zip(names, sizes))}
