"""Zoo families: one module per family (the model, its weight space, its training recipe).

A family is a class registered with `@register_family(name)` that provides:
- ``Architecture`` and ``HParams``: frozen dataclasses the spec is validated against;
- ``weight_space(architecture)``: the ordered parameter tensors (`zoo.weightspace`);
- ``load_data(spec)``: the data every run of a config shares;
- ``train_run(spec, run, data, emit)``: trains one run, calling ``emit(CheckpointResult)``
  at each checkpoint epoch (and for the rest once it diverges);
- ``evaluate(spec, hparams, weights, data)``: the stored metrics of a checkpoint, recomputed.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from zoo.registry import Registry

FAMILIES: Registry[type] = Registry("zoo family")
METRIC_NAMES = ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "test_loss", "test_accuracy")


@dataclasses.dataclass(frozen=True)
class CheckpointResult:
    epoch: int
    weights: dict[str, torch.Tensor]  # ordered as the family's weight space, float32 on the CPU
    metrics: dict[str, float]  # every name in METRIC_NAMES (NaN once diverged)
    status: str  # "ok" or "diverged"


def register_family(name: str):
    def decorator(cls: type) -> type:
        cls.name = name
        return FAMILIES.register(name)(cls)

    return decorator


def list_families() -> list[str]:
    return FAMILIES.names()


def create_family(name: str, **overrides: Any):
    return FAMILIES.create(name, **overrides)


get_family = create_family

# Families register themselves on import.
from zoo.families import cnn  # noqa: E402,F401
