"""The NFN model registry: `@register_model(name)`, `list_models()`, `create_model(...)`.

A registered model is an `nn.Module` class constructed as `Model(weight_space, **hparams)`. Its class
attribute `Config` is the frozen dataclass of its hyperparameters. Overrides are validated against that
dataclass (via `zoo.validation.schema`). So an unknown or mistyped hyperparameter is an error naming the
model, the key and what was expected.

A model may carry named `PRESETS`, as data, each citing its paper's setting. A preset name is a safe name:
letters, digits, `._+-`. It maps to config overrides, from fields of its `Config` to values the `Config`
accepts. For example: `PRESETS = {"generalization": {}, "inr-classification-budget": {"channels": (32, 32,
32), "out_features": 10}}`. `model_config(name, preset=...)` (`--set model.preset=NAME`) starts from one. A
standard suite's cell runs a model at the first of the cell's presets it has, else at its defaults.

A model says what its output is exactly invariant to in `symmetries`. That is a class attribute or a
property of the built model. On feedforward weight spaces it is a tuple among "permutation" (hidden units),
"scale" (permutations with positive scalings) and "sign" (permutations with sign flips). These are in the
sense of `zoo.symmetry.feedforward`. On transformer weight spaces it is "attention" or
"attention-permutation". "attention" is Transformer-NFN's group: `zoo.symmetry.attention` without the MLP
scalings and the block-output permutations. "attention-permutation" is its subgroup of neuron relabellings
(`permutations_only`), which a claim of "attention" implies. It relabels heads, a head's query/key rows
jointly, its value rows, the attention's output features and the MLP units.

`benchmarks.check_model` (`nfnzoo bench check-model`) checks a model's claims. It also checks that every
group the model does not claim changes its output. `tests/nfn_models/test_exactness.py` runs it on every
registered model.

A model reads the weight-space kinds in `weight_spaces`: "feedforward" (CNNs and SIRENs) and "transformer"
(`zoo.families.transformer` members), both by default. `create_model` refuses the others with a clear
message. Some hyperparameters describe the members rather than the model (`ARCHITECTURE_FIELDS`). An example
is a transformer's `num_heads`, which its tensors' shapes do not show. The benchmark harness fills them in
from the zoo's architecture. It fills `HPARAM_FIELDS` from the rows the task reads. That maps a config field
to a hyperparameter column of the rows, e.g. ProbeGen's `member_activation` <- `activation`.

A model's output is "invariant", a vector per checkpoint, unless its `outputs` include "weights" and its
config's `output` says so. Then it returns a `WeightBatch` of the input's space (INR editing's weight
delta). That output is equivariant to the groups it claims. `model_outputs(name)` says which a model offers.
`create_model` refuses an `output` the model does not offer.

Most models are trained by gradient steps on their parameters (`trained_by = "gradient"`, the default). A
model with `trained_by = "fit"` (the tree ensembles) is fitted instead. `model.fit(train, targets,
validation, validation_targets, seed)` returns a dict saying how it was selected. Its forward pass predicts
the target itself. `count_parameters` uses a model's `num_parameters()` when it has one (a tree ensemble's
nodes), else its trainable parameters.

Models may live in other packages (`zoo.registry`'s plugins). One is named by an import path, `--model
mypkg.models:MyNFN`. Or another package declares the name as an entry point of the group `nfnzoo.models`:
`[project.entry-points."nfnzoo.models"] my_nfn = "mypkg.models:MyNFN"`. It is imported only when the name is
asked for. `check_model_contract` states what such a class must have: the contract above.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, TypeVar

from torch import nn

from zoo.registry import PluginError, Registry
from zoo.validation.inputs import name_problem
from zoo.validation.schema import SchemaError, from_data, to_data
from zoo.weightspace import WeightBatch, WeightSpace

ModelClass = TypeVar("ModelClass", bound=type)

def check_model_contract(name: str, cls: Any) -> None:
    """Raises `PluginError` (one line) unless `cls` is a model class this registry can build.

    That is an `nn.Module` subclass built as `cls(weight_space, **hparams)`. Its dataclass `Config` has
    defaults for all fields. Its `PRESETS`, if any, are ones its `Config` accepts. Its `weight_spaces`,
    `outputs`, `trained_by` and (when a class attribute) `symmetries` are known values.
    """
    where = f"NFN model {name!r} ({getattr(cls, '__qualname__', type(cls).__name__)})"
    if not (isinstance(cls, type) and issubclass(cls, nn.Module)):
        raise PluginError(f"{where}: expected a torch.nn.Module subclass built as Model(weight_space, **hparams), "
                          f"got {type(cls).__name__} {cls!r:.80}")
    config = getattr(cls, "Config", None)
    if config is None or not dataclasses.is_dataclass(config):
        raise PluginError(f"{where}: expected a dataclass attribute `Config` (its hyperparameters), "
                          f"got {type(config).__name__}")
    try:
        config()
    except TypeError as error:
        raise PluginError(f"{where}: every field of its Config needs a default ({error})") from None
    check_presets(where, config, getattr(cls, "PRESETS", {}))
    checks = (("weight_spaces", tuple(SPACE_GROUPS), tuple(SPACE_GROUPS)), ("outputs", OUTPUTS, ("invariant",)))
    for attribute, allowed, default in checks:
        value = getattr(cls, attribute, default)
        if isinstance(value, str) or not isinstance(value, (tuple, list)) or not value or set(value) - set(allowed):
            raise PluginError(f"{where}: `{attribute}` must be a tuple of some of {allowed}, got {value!r:.80}")
    if getattr(cls, "trained_by", "gradient") not in TRAINED_BY:
        raise PluginError(f"{where}: `trained_by` must be one of {TRAINED_BY}, got {cls.trained_by!r:.80}")
    claims = cls.__dict__.get("symmetries", getattr(cls, "symmetries", ()))
    if not isinstance(claims, property):  # a property is read from the built model (`claimed_symmetries`)
        if isinstance(claims, str) or not isinstance(claims, (tuple, list)) or set(claims) - set(SYMMETRY_GROUPS):
            raise PluginError(f"{where}: `symmetries` must be a tuple of some of {SYMMETRY_GROUPS}, "
                              f"got {claims!r:.80}")


def check_presets(where: str, config: type, presets: Any) -> None:
    """Raises `PluginError` (one line naming `where`, the preset and the key) unless `presets` is valid. It
    must map safe names to mappings of `config`'s fields to values it accepts (as `model_config` applies
    them)."""
    shape = "a mapping of preset names to config overrides, e.g. {'budget': {'hidden': 16}}"
    if not isinstance(presets, Mapping):
        raise PluginError(f"{where}: `PRESETS` must be {shape}, got {type(presets).__name__} {presets!r:.80}")
    fields = {field.name for field in dataclasses.fields(config) if field.init}
    defaults = to_data(config())
    for preset, overrides in presets.items():
        problem = name_problem(preset)
        if problem is not None:
            raise PluginError(f"{where}: `PRESETS`: a preset's name: {problem}")
        if not isinstance(overrides, Mapping):
            raise PluginError(f"{where}: preset {preset!r}: expected a mapping of {config.__name__} fields to values, "
                              f"got {type(overrides).__name__} {overrides!r:.80}")
        unknown = [key for key in overrides if key not in fields]
        if unknown:
            raise PluginError(f"{where}: preset {preset!r}: key {ascii(str(unknown[0])[:60])} is no field of "
                              f"{config.__name__}; expected some of {sorted(fields)}")
        try:
            from_data(config, {**defaults, **to_data(dict(overrides))}, where=f"preset {preset!r}")
        except SchemaError as error:
            raise PluginError(f"{where}: preset {preset!r}: key {error.key!r}: {error.reason}") from None
        except (TypeError, ValueError) as error:  # the Config's own checks (__post_init__), which name no key
            raise PluginError(f"{where}: preset {preset!r}: {config.__name__} refuses it: {error}") from None


MODELS: Registry[type[nn.Module]] = Registry("NFN model", entry_points="nfnzoo.models", check=check_model_contract)


def register_model(name: str) -> Callable[[ModelClass], ModelClass]:
    """Class decorator registering an NFN model under `name` (a duplicate name is an error)."""

    def decorator(cls: ModelClass) -> ModelClass:
        config = getattr(cls, "Config", None)
        if config is None or not dataclasses.is_dataclass(config):
            raise TypeError(f"model {name!r}: {cls.__name__} needs a dataclass attribute `Config`")
        return MODELS.register(name)(cls)

    return decorator


SPACE_GROUPS = {"feedforward": ("permutation", "scale", "sign"), "transformer": ("attention", "attention-permutation")}
SYMMETRY_GROUPS = tuple(group for groups in SPACE_GROUPS.values() for group in groups)
TRAINED_BY = ("gradient", "fit")
OUTPUTS = ("invariant", "weights")


def weight_space_kind(space: WeightSpace) -> str:
    """"transformer" for transformer-family members, else "feedforward" (CNNs, SIRENs)."""
    from nfn_models.attention_space import is_attention_space

    return "transformer" if is_attention_space(space) else "feedforward"


def trained_by(model: nn.Module | type) -> str:
    """How a model learns: "gradient" (its parameters, by the task's optimizer) or "fit"."""
    kind = getattr(model, "trained_by", "gradient")
    if kind not in TRAINED_BY:
        raise ValueError(f"{getattr(model, '__name__', type(model).__name__)} has trained_by={kind!r}; "
                         f"expected one of {TRAINED_BY}")
    return kind


def model_outputs(name: str | type) -> tuple[str, ...]:
    """What model `name` (or a model class) can output: "invariant" (a vector) and, for some, "weights"."""
    outputs = tuple(getattr(MODELS.get(name) if isinstance(name, str) else name, "outputs", ("invariant",)))
    unknown = [o for o in outputs if o not in OUTPUTS]
    if unknown:
        raise ValueError(f"model {name!r} offers unknown outputs {unknown}; expected some of {OUTPUTS}")
    return outputs


def models_with_output(output: str) -> list[str]:
    """The models registered or loaded so far that can give `output`, sorted (no plugin is imported)."""
    return [name for name, cls in MODELS.loaded().items() if output in model_outputs(cls)]


def count_parameters(model: nn.Module) -> int:
    """The model's size: `num_parameters()` where it defines one, else its trainable parameters."""
    counter = getattr(model, "num_parameters", None)
    if callable(counter):
        return int(counter())
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def claimed_symmetries(model: nn.Module) -> tuple[str, ...]:
    """The hidden-unit groups `model`'s output is exactly invariant to (see the module docstring)."""
    claims = tuple(getattr(model, "symmetries", ()))
    unknown = [c for c in claims if c not in SYMMETRY_GROUPS]
    if unknown:
        raise ValueError(f"{type(model).__name__} claims unknown symmetries {unknown}; expected {SYMMETRY_GROUPS}")
    return claims


def list_models() -> list[str]:
    """The registered model names and the `nfnzoo.models` entry points' (not imported), sorted."""
    return MODELS.names()


def list_presets(name: str) -> list[str]:
    """The named presets of model `name` (its class's `PRESETS`), sorted."""
    return sorted(getattr(MODELS.get(name), "PRESETS", {}))


def model_config(name: str, **overrides: Any) -> Any:
    """The validated hyperparameter dataclass of model `name` with `overrides` applied.

    `preset=NAME` starts from one of the class's named `PRESETS` instead of the defaults. A preset is data:
    the hyperparameters of a paper's setting. It is an override like the others, so `--set
    model.preset=NAME` works. The other overrides apply on top.
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

    Parameter initialisation draws from torch's default generator. Callers that need isolation wrap this in
    `torch.random.fork_rng()` with a seed, as the benchmark tasks do.
    """
    output = overrides.get("output", "invariant")
    if output in OUTPUTS and output not in model_outputs(name):  # before the schema's "unknown key"
        raise ValueError(f"model {name!r} has no {output!r} output; the models with one are "
                         f"{models_with_output(output)}")
    config = model_config(name, **overrides)
    cls = MODELS.get(name)
    kinds, kind = getattr(cls, "weight_spaces", tuple(SPACE_GROUPS)), weight_space_kind(weight_space)
    if kind not in kinds:
        raise ValueError(f"model {name!r} reads {' and '.join(kinds)} weight spaces; these weights are a "
                         f"{kind} member's ({weight_space.num_params} parameters in "
                         f"{len(weight_space.tensors)} tensors)")
    return cls(weight_space, **dataclasses.asdict(config))


def check_weight_space(expected: WeightSpace, weights: WeightBatch) -> None:
    """Raises a clear error when a model is fed checkpoints of another architecture."""
    if weights.space != expected:
        raise ValueError(
            "the weight batch's architecture differs from the model's weight space "
            f"(model: {[t.name for t in expected.tensors]} with {expected.num_params} params; "
            f"batch: {[t.name for t in weights.space.tensors]} with {weights.space.num_params} params); "
            "build the model with the weight space of the data it will see")
