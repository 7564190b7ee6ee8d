"""The zoo family contract: the `Family` base class, its checkpoint result and the registry.

This module imports no family.
So the shared machinery (`zoo.training.population`) and the families (`zoo.families.*`) both import it.
They do not import each other.
The families register themselves when `zoo.families` is imported.
Use that package's `create_family` and `list_families`.

A family is a `Family` subclass registered with `@register_family(name)`.
It provides the following.

``Architecture`` and ``HParams`` are frozen dataclasses the spec is validated against.

``METRICS`` holds the typed per-checkpoint result columns (name -> float or int).
``HEADLINE`` is the one `nfnzoo info` summarizes, with its histogram range.

``build(architecture, hparams)`` returns the member model.
``weight_space(architecture)`` gives its ordered parameter tensors (`zoo.weightspace`).

``symmetry(architecture, hparams)`` is the group acting on its weights (`zoo.symmetry`).

``data_sources(architecture)`` names the data sets (`dataset.name`) it loads for that architecture.
They are checked when a spec loads.
``load_data(spec)`` returns the data its runs share.

``POPULATION_SIZES`` gives the members per population on each device type (`population_size_on`).

``population_key(run)`` says what runs must share to train in one population.
The driver packs runs with equal keys into the same trials.
The default, ``()``, lets any runs share.

``train_population(spec, runs, data, emit)`` trains runs.
It calls ``emit(run, result)`` at each checkpoint epoch of each run.
Once a run diverges, it calls it for the rest of that run's checkpoints.
When the spec keeps the best checkpoint, it calls it once more with ``best=True`` at the end.
The default trains runs one at a time with ``train_run(spec, run, data, emit_one)``.

``evaluate(spec, hparams, weights, data)`` recomputes the metrics that depend only on the weights.

``run_flops(spec, hparams)`` gives the FLOPs of one run, training and evaluation, for planning.
``FLOPS_HPARAMS`` names the hyperparameters it reads.
The dry run groups runs by them, so it never evaluates one run at a time (`zoo.planning.plan_size`).

``member_size(architecture)`` gives a member's parameter count, layer widths and layer count.
It computes them arithmetically from the architecture, never by building it.
They are checked against `zoo.validation.bounds` when a spec loads, and give the dry run's parameter count.

``IMPORT_ONLY`` is for a family without a training recipe.
It names the import format that writes its members, and `nfnzoo generate` refuses its specs, naming it.
It is None for the families that train.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import torch

from zoo.registry import Registry

# the built-in families, imported by name on the registry's first read (`zoo.registry`)
FAMILIES: Registry[type] = Registry("zoo family", modules=("zoo.families.cnn", "zoo.families.inr",
                                                           "zoo.families.transformer", "zoo.families.pooled_cnn"))


@dataclasses.dataclass(frozen=True)
class MemberSize:
    """What an architecture declares, computed without building it (`Family.member_size`)."""

    parameters: int  # trainable parameters: the weight space's length
    widths: dict[str, int]  # architecture field (or derived name) -> units, channels or tokens of a layer
    layers: int  # layers (or blocks) the model is built of


@dataclasses.dataclass(frozen=True)
class CheckpointResult:
    epoch: int  # the epoch whose weights these are (for the best checkpoint: the best epoch itself)
    weights: dict[str, torch.Tensor]  # ordered as the family's weight space, float32 on the CPU
    metrics: dict[str, float | int]  # every column of the family's METRICS (float ones NaN once diverged)
    status: str  # "ok" or "diverged"
    best: bool = False  # the run's planned best-validation checkpoint (training.keep_best)


class Family:
    """Defaults shared by the families; see the module docstring for the contract."""

    name: str
    Architecture: type
    HParams: type
    METRICS: dict[str, type]
    HEADLINE: tuple[str, float, float] = ("test_accuracy", 0.0, 1.0)  # metric, histogram low, high
    # runs trained together in one process, per device type (each family's measured choice,
    # docs/performance.md); a larger population bounds nothing but memory, a smaller one wastes
    # per-step overhead
    POPULATION_SIZES: dict[str, int] = {"cpu": 1, "cuda": 1}
    IMPORT_ONLY: str | None = None  # the `nfnzoo import` format of a family that cannot train
    FLOPS_HPARAMS: tuple[str, ...] = ()  # the hyperparameters `run_flops` reads

    def __init__(self, population_size: int | None = None):
        if population_size is not None and population_size < 1:
            raise ValueError(f"population size must be at least 1, got {population_size}")
        self.population_size = population_size  # overrides POPULATION_SIZES when set

    def population_size_on(self, device: torch.device | str) -> int:
        """Members per population on `device`: the override, else the family's measured choice."""
        return self.population_size or self.POPULATION_SIZES.get(torch.device(device).type, 1)

    def member_size(self, architecture: dict) -> MemberSize:
        """Parameters, layer widths and layers of `architecture`, by arithmetic; every family says."""
        raise NotImplementedError(f"family {self.name!r} does not compute its member's size")

    def data_sources(self, architecture: dict) -> list[str]:
        """The data sets (`dataset.name`) this family loads for `architecture`; every family says."""
        raise NotImplementedError(f"family {self.name!r} does not list its data sources")

    def train_run(self, spec, run, data, emit: Callable[[CheckpointResult], None]) -> None:
        raise NotImplementedError(f"family {self.name!r} trains populations only")

    def metric_matches(self, name: str, stored: float, recomputed: float, data) -> bool:
        """Whether a recomputed metric agrees with the stored one (`nfnzoo verify --recompute`).

        They must agree to float32 reduction order, which differs between thread counts and batch shapes.
        """
        return math.isclose(stored, recomputed, rel_tol=1e-4, abs_tol=1e-6)

    def population_key(self, run) -> tuple:
        return ()

    def train_population(self, spec, runs: Sequence, data, emit: Callable[[Any, CheckpointResult], None]) -> None:
        for run in runs:
            self.train_run(spec, run, data, lambda result, run=run: emit(run, result))


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
