"""The classification training loop shared by the image-classifier families.

One run trains on a seeded subset of the training pool, its train fraction.
Shuffles and dropout masks come from the run's draws (`zoo.training.draws`), never a global RNG.
The spec's `training.rng` picks the scheme.
The loss is cross-entropy plus an L2 penalty.
At every checkpoint epoch the run is evaluated on three sets.
They are the train subset, the validation hold-out and the test set.
A non-finite loss stops the run and marks the remaining checkpoints ``diverged``.
They are recorded, not lost.
"""

from __future__ import annotations

import math
from typing import Callable, Iterator

import torch
import torch.nn.functional as F
from torch import nn

from zoo.data.images import ImageData, TaskData
from zoo.planning.spec import DatasetSpec, TrainingSpec, content_hash

CLASSIFICATION_METRICS = ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "test_loss", "test_accuracy")

OPTIMIZERS: dict[str, Callable[..., torch.optim.Optimizer]] = {
    "adam": lambda params, lr: torch.optim.Adam(params, lr=lr),
    "rmsprop": lambda params, lr: torch.optim.RMSprop(params, lr=lr),
    "sgd": lambda params, lr: torch.optim.SGD(params, lr=lr),
    "sgd_momentum": lambda params, lr: torch.optim.SGD(params, lr=lr, momentum=0.9),
}


def seeded_generator(seed: int, stream: str) -> torch.Generator:
    """An independent generator per (seed, purpose), so streams never share draws."""
    return torch.Generator().manual_seed(int(content_hash({"seed": seed, "stream": stream}, 15), 16))


def train_subset_index(pool_size: int, fraction: float, seed: int) -> torch.Tensor:
    """Sorted indices of the run's own seeded share of a training pool."""
    if not 0 < fraction <= 1:
        raise ValueError(f"train_fraction must be in (0, 1], got {fraction}")
    count = max(1, math.ceil(fraction * pool_size))
    return torch.randperm(pool_size, generator=seeded_generator(seed, "train_subset"))[:count].sort().values


def batch_starts(size: int, training: TrainingSpec) -> range:
    """The first index of each training batch of an epoch over `size` examples.

    With `training.drop_last`, only full batches count (PyTorch's ``DataLoader(drop_last=True)``).
    """
    if not training.drop_last:
        return range(0, size, training.batch_size)
    if size < training.batch_size:
        raise ValueError(f"training.drop_last: the run's {size} training examples are fewer than one batch of "
                         f"{training.batch_size}; it would never take a step (lower training.batch_size)")
    return range(0, size - training.batch_size + 1, training.batch_size)


def steps_per_epoch(size: int, training: TrainingSpec) -> int:
    return len(batch_starts(size, training))


def run_train_subset(train: ImageData, fraction: float, seed: int) -> ImageData:
    """The run's own seeded share of the training pool."""
    return train.subset(train_subset_index(len(train), fraction, seed))


@torch.no_grad()
def evaluate(model: nn.Module, data: ImageData, batch_size: int) -> tuple[float, float]:
    """Mean cross-entropy and accuracy of `model` on `data`, in eval mode, without dropout.

    They are NaN for no examples: a set a source never held, e.g. an imported zoo's validation set.
    """
    if len(data) == 0:
        return math.nan, math.nan
    was_training = model.training
    model.eval()
    loss_sum, correct = 0.0, 0
    for start in range(0, len(data), batch_size):
        x, y = data.x[start:start + batch_size], data.y[start:start + batch_size]
        logits = model(x)
        loss_sum += F.cross_entropy(logits, y, reduction="sum").item()
        correct += (logits.argmax(dim=1) == y).sum().item()
    model.train(was_training)
    return loss_sum / len(data), correct / len(data)


def evaluate_sets(model: nn.Module, sets: dict[str, ImageData], batch_size: int) -> dict[str, float]:
    """`{prefix}_loss` and `{prefix}_accuracy` for every named example set."""
    metrics = {}
    for prefix, examples in sets.items():
        metrics[f"{prefix}_loss"], metrics[f"{prefix}_accuracy"] = evaluate(model, examples, batch_size)
    return metrics


def train_classifier(model: nn.Module, optimizer: torch.optim.Optimizer, l2: float, train: ImageData,
                     data: TaskData, dataset: DatasetSpec, training: TrainingSpec,
                     draws) -> Iterator[tuple[int, dict[str, float], str]]:
    """Trains `model` in place; yields (epoch, metrics, status) at every checkpoint epoch.

    `draws` is the run's solo draws (`zoo.training.draws.solo_draws`); `model(x, masks=m)` must
    apply its dropout with the 0/1 masks `m(layer, shape)` in training mode.
    """
    checkpoints = set(training.checkpoint_epochs)
    step = 0
    weights = [p for name, p in model.named_parameters() if name.endswith("weight")]
    eval_sets = {"train": train.subset(torch.arange(min(len(train), dataset.eval_train_size))),
                 "val": data.validation, "test": data.test}
    if 0 in checkpoints:
        yield 0, evaluate_sets(model, eval_sets, training.eval_batch_size), "ok"
    for epoch in range(1, training.epochs + 1):
        model.train()
        order = draws.order(epoch, len(train))
        for start in batch_starts(len(train), training):
            index = order[start:start + training.batch_size]
            step += 1
            loss = F.cross_entropy(model(train.x[index], masks=draws.masks(step)), train.y[index])
            if l2 > 0:
                loss = loss + l2 * sum((w * w).sum() for w in weights)
            if not torch.isfinite(loss):
                nan_metrics = dict.fromkeys(CLASSIFICATION_METRICS, math.nan)
                for later in sorted(e for e in checkpoints if e >= epoch):
                    yield later, nan_metrics, "diverged"
                return
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        if epoch in checkpoints:
            metrics = evaluate_sets(model, eval_sets, training.eval_batch_size)
            finite = all(math.isfinite(v) for v in metrics.values())
            yield epoch, metrics, "ok" if finite else "diverged"
            if not finite:
                nan_metrics = dict.fromkeys(CLASSIFICATION_METRICS, math.nan)
                for later in sorted(e for e in checkpoints if e > epoch):
                    yield later, nan_metrics, "diverged"
                return
