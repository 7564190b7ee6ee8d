"""The NFN model registry: `@register_model(name)`, `list_models()`, `create_model(...)`.

A registered model is an `nn.Module` class constructed as `Model(weight_space, **hparams)`,
with a class attribute `Config`: the frozen dataclass of its hyperparameters. Overrides are
validated against that dataclass (via `zoo.schema`), so an unknown or mistyped
hyperparameter is an error naming the model, the key and what was expected.

A model may carry named `PRESETS` (preset name -> hyperparameter overrides, as data, each
citing its paper's setting); `model_config(name, preset=...)` starts from one.

A model says what its output is exactly invariant to in `symmetries` (a class attribute or
a property of the built model): a tuple among "permutation" (hidden units), "scale"
(permutations with positive scalings) and "sign" (permutations with sign flips), in the
sense of `zoo.symmetry.feedforward`. `tests/nfn_models/test_exactness.py` checks every
registered model's claims, and that every group it does not claim changes its output.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar

from torch import nn

from zoo.registry import Registry
from zoo.schema import SchemaError, from_data, to_data
from zoo.weightspace import WeightBatch, WeightSpace

ModelClass = TypeVar("ModelClass", bound=type)

MODELS: Registry[type[nn.Module]] = Registry("NFN model")


def register_model(name: str) -> Callable[[ModelClass], ModelClass]:
    """Class decorator registering an NFN model under `name` (a duplicate name is an error)."""

    def decorator(cls: ModelClass) -> ModelClass:
        config = getattr(cls, "Config", None)
        if config is None or not dataclasses.is_dataclass(config):
            raise TypeError(f"model {name!r}: {cls.__name__} needs a dataclass attribute `Config`")
        return MODELS.register(name)(cls)

    return decorator


SYMMETRY_GROUPS = ("permutation", "scale", "sign")


def claimed_symmetries(model: nn.Module) -> tuple[str, ...]:
    """The hidden-unit groups `model`'s output is exactly invariant to (see the module docstring)."""
    claims = tuple(getattr(model, "symmetries", ()))
    unknown = [c for c in claims if c not in SYMMETRY_GROUPS]
    if unknown:
        raise ValueError(f"{type(model).__name__} claims unknown symmetries {unknown}; expected {SYMMETRY_GROUPS}")
    return claims


def list_models() -> list[str]:
    """The registered model names, sorted."""
    return MODELS.names()


def list_presets(name: str) -> list[str]:
    """The named presets of model `name` (its class's `PRESETS`), sorted."""
    return sorted(getattr(MODELS.get(name), "PRESETS", {}))


def model_config(name: str, **overrides: Any) -> Any:
    """The validated hyperparameter dataclass of model `name` with `overrides` applied.

    `preset=NAME` (an override like the others, so `--set model.preset=NAME` works) starts
    from one of the class's named `PRESETS` (data: the hyperparameters of a paper's setting)
    instead of the defaults; the other overrides apply on top.
    """
    cls = MODELS.get(name)
    data = to_data(cls.Config())
    preset = overrides.pop("preset", None)
    if preset is not None:
        presets = getattr(cls, "PRESETS", {})
        if preset not in presets:
            raise SchemaError(f"model {name!r}", "preset",
                              f"expected one of {sorted(presets) or 'no presets'}, got {preset!r}")
        data.update(to_data(presets[preset]))
    data.update(overrides)
    return from_data(cls.Config, data, where=f"model {name!r}")


def create_model(name: str, weight_space: WeightSpace, **overrides: Any) -> nn.Module:
    """Builds model `name` for `weight_space`; `overrides` replace its default hyperparameters.

    Parameter initialisation draws from torch's default generator; callers that need
    isolation wrap this in `torch.random.fork_rng()` with a seed (the benchmark tasks do).
    """
    config = model_config(name, **overrides)
    return MODELS.get(name)(weight_space, **dataclasses.asdict(config))


def check_weight_space(expected: WeightSpace, weights: WeightBatch) -> None:
    """Raises a clear error when a model is fed checkpoints of another architecture."""
    if weights.space != expected:
        raise ValueError(
            "the weight batch's architecture differs from the model's weight space "
            f"(model: {[t.name for t in expected.tensors]} with {expected.num_params} params; "
            f"batch: {[t.name for t in weights.space.tensors]} with {weights.space.num_params} params); "
            "build the model with the weight space of the data it will see")
