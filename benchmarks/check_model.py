"""Checks a model's symmetry claims with random group elements: `nfnzoo bench check-model MODEL`.

Any model, built-in or plugin, can be checked (`nfn_models.registry`: a name, an import path or an
entry point). It is built small for each weight space it reads. Its Config's size fields are
shrunk, and `group` is set to the space's group where the model has one. A transformer model takes
`num_heads` and `residual` from the space's architecture. A fitted model is fitted on random rows.

The spaces are CNN-ReLU, CNN-tanh and SIREN members (feedforward). They also include a 2-block
2-head transformer without residuals, and a 3-block 4-head one with them. The model's parameters
there are first counted on the meta device (`benchmarks.tasks.limits.model_size_problem`), as
`bench run` counts them. One too large is refused in that line, and never allocated (`benchmarks.check_steps.sized`,
`Size`).

For each group of the space, the families' own random elements (`zoo.symmetry`) act on random
weights. The deviation max |f(g . w) - f(w)| / (1 + |f(w)|) is measured over seeds. It is taken
elementwise, so `RTOL` is `torch.testing.assert_close` with rtol = atol. Three things are checked.

1. The output itself comes first (`benchmarks.outputs`, the model contract). It must be a tensor
   (B, out_features), every value finite. One that is not is reported as such: "NOT FINITE",
   "WRONG SHAPE" or "WRONG DTYPE". The report names the space, the magnitude, the seed and which
   output. Nothing is measured on it, since a NaN is never a verdict on a claim. The model is
   handed a copy of the members. A call that changes it in place is reported as "MODIFIES ITS
   INPUT", naming the tensor. That too is never a verdict on a claim.
2. A claimed group must leave the output unchanged at every magnitude of the members
   (`benchmarks.check_members.MAGNITUDES`). The magnitudes are standard normal, and realistic, as
   trained (He-initialised) members hold them. Then come realistic with 2% outliers beyond 20,
   100x, and 1e-3 as epoch-0 members. Each magnitude has its tolerance: `RTOL` in float32, and
   `LARGE_RTOL` where entries reach 100. The claim must also hold on members holding denormal
   weights. Their scalings are powers of two, which act exactly. `DENORMAL_RTOL` applies there,
   since the action itself rounds. A model that clamps or branches on large weights breaks its
   claim only there.
3. An unclaimed group is expected to change the output, on the standard normal members. Its
   deviation must exceed `MOVES`, which shows the check can fail. An unclaimed group that leaves
   the output unchanged is a claim the model could make. It is reported, not an error.

Feedforward groups are `permutation`, `scale` and `sign` (`zoo.symmetry.feedforward`). Scales are
log-uniform in [1e-3, 1e3]. Transformer groups come from `zoo.symmetry.attention`. `attention` is
the paper's group, and `attention-permutation` its subgroup of neuron relabellings. Three negative
controls follow. `attention+scale` adds the MLP units' positive scalings to the paper's group.
`attention+block-output` adds the block-output permutations. `attention+model-dimension`, on the
residual space, adds the model-dimension permutations, which are no symmetry of a residual member.

A model with a weight-space output is checked for equivariance the same way. INR editing's weight
delta is one. The check is f(g . w) = g . f(w), relative to the output's size. A claim must stay
below 1e-4 on standard normal members, and below 1e-3 at the other magnitudes. An unclaimed group
must exceed 1e-3. The check runs in float32, unless the model class sets `EXACTNESS_DTYPE`. NG-GNN
sets float64. Its PNA standard deviation aggregator amplifies float32 rounding at the first hidden
layer's in-degree-2 neurons. The invariance checks use that dtype too. The denormal check does not,
since its point is float32's denormals.

A model class may also set `EXACTNESS_PARAMETER_NOISE` = s. Every parameter of the checked model is
then moved by N(0, s^2) off its initial value first (seeded), as training moves it. NG-GNN sets 0.5.
At initialisation its output hardly depends on its input. It varies by ~1e-4 across random members,
and by ~5e-6 under a transformer's GL factors. That is too little for a negative control.

`tests/nfn_models/test_exactness.py` runs these same functions over the registry."""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
import math
from typing import Any, Mapping, Sequence

import torch

# re-exported: the tests and `benchmarks.check_report` read the tolerances and magnitudes here too
from benchmarks.check_members import (  # noqa: F401 (re-exported)
    EQUIVARIANT_GAP, EQUIVARIANT_MOVES, LARGE_RTOL, MAGNITUDES, RTOL,
    called, contract, deviation, random_weights, relative_gap, weights_contract)
from nfn_models import claimed_symmetries, create_model, model_config, model_outputs, trained_by
from nfn_models.registry import MODELS, SPACE_GROUPS, weight_space_kind
from zoo.families import create_family
from zoo.weightspace import WeightBatch, WeightSpace

DENORMAL_RTOL = 5e-3
MOVES = 1e-4  # an unclaimed group moves the output by more than this
SEEDS = (0, 1, 2)
SMALL_TRANSFORMER = {"input": "image_patches", "image_size": 8, "patch_size": 4, "d_model": 8, "num_blocks": 3,
                     "num_heads": 4, "head_dim": 2, "mlp_dim": 12, "num_classes": 3, "residual": True}
MNIST_TRANSFORMER = {"d_model": 32, "num_blocks": 2, "num_heads": 2, "head_dim": 16, "mlp_dim": 64}
# weight space -> (family, architecture, hyperparameters, the group a model's group field is set to:
# `group`, or the field its class names in `GROUP_FIELD`, e.g. ScaleGMN's `mode`)
SPACES = {"cnn-relu": ("cnn", {}, {"activation": "relu"}, "scale"),
          "cnn-tanh": ("cnn", {}, {"activation": "tanh"}, "sign"),
          "siren": ("inr", {}, {}, "sign"),
          "transformer-2x2": ("transformer", MNIST_TRANSFORMER, {}, "permutation"),
          "transformer-3x4-residual": ("transformer", SMALL_TRANSFORMER, {}, "permutation")}
# the size fields a Config may have, shrunk (the same code paths as the presets)
SMALL = {"channels": (3, 2), "invariant_channels": 4, "hidden_sizes": (16,), "encoder_hidden": 6, "hidden_dim": 8,
         "max_rounds": 5, "min_child_weight": 1.0, "min_data_in_leaf": 4, "min_gain_to_split": 0.0, "max_trees": 10,
         "trees_per_step": 5, "early_stopping_trees": 5, "min_samples_leaf": 4}
# the transformer groups beyond the paper's: its permutation subgroup, then the negative controls
TRANSFORMER_GROUPS = {"attention-permutation": {"permutations_only": True},
                      "attention+scale": {"mlp_scaling": True},
                      "attention+block-output": {"permute_block_outputs": True},
                      "attention+model-dimension": {"residual": False}}


@dataclasses.dataclass(frozen=True)
class Check:
    """One measured claim: a model's output (or weight output) under a group on a weight space."""

    model: str
    space: str
    group: str
    test: str  # "invariance", "denormal" or "equivariance"
    claimed: bool
    deviation: float  # the largest over the seeds
    tolerance: float  # a claim holds at or below it; an unclaimed group should exceed `moves`
    moves: float
    magnitude: str = "unit"  # the members' weights (`MAGNITUDES`)
    # the output broke the contract, so nothing was measured: "not finite", "wrong shape", "wrong dtype" or
    # "modifies its input" (the call changed the members it was given), and what was seen
    broken: str | None = None
    detail: str = ""

    @property
    def false_claim(self) -> bool:
        return self.broken is None and self.claimed and not self.deviation <= self.tolerance

    @property
    def verdict(self) -> str:
        if self.broken is not None:
            return f"{self.broken.upper()}: {self.detail}"
        if self.test == "output":
            return f"ok: {self.detail}"
        if self.claimed:
            return "FALSE CLAIM" if self.false_claim else "holds"
        return "changes (not claimed)" if self.deviation > self.moves else "unchanged: could be claimed"


@dataclasses.dataclass(frozen=True)
class Size:
    """The size a model was checked at on a weight space: its parameters as built, and what was shrunk."""

    space: str
    output: str  # "invariant" or "weights"
    parameters: int
    shrunk: dict[str, Any]  # the `SMALL` size fields set (not those given); empty: the model's own size


def groups(space_name: str) -> tuple[str, ...]:
    """The groups checked on a weight space: its own, then the negative controls."""
    family, architecture, _, _ = SPACES[space_name]
    if family != "transformer":
        return SPACE_GROUPS["feedforward"]
    controls = ("attention+scale",) + (("attention+model-dimension",) if architecture.get("residual")
                                        else ("attention+block-output",))
    return SPACE_GROUPS["transformer"] + controls


def symmetry(space_name: str, group: str) -> Any:
    """The `zoo.symmetry` object whose random elements are `group` on the space."""
    family, architecture, hparams, _ = SPACES[space_name]
    found = create_family(family).symmetry(architecture, hparams)
    if family != "transformer":
        return dataclasses.replace(found, max_log_scale=math.log(1e3), mode=group)
    paper = dataclasses.replace(found, mlp_scaling=False, permute_block_outputs=False)
    return dataclasses.replace(paper, **TRANSFORMER_GROUPS.get(group, {}))


def space(space_name: str) -> WeightSpace:
    return symmetry(space_name, groups(space_name)[0]).space


def reads(name: str, space_name: str) -> bool:
    """Whether model `name` reads the weight space's kind (its `weight_spaces`)."""
    kind = weight_space_kind(space(space_name))
    return kind in getattr(MODELS.get(name), "weight_spaces", tuple(SPACE_GROUPS))


def build_model(name: str, space_name: str, seed: int, output: str = "invariant",
                overrides: Mapping[str, Any] | None = None) -> torch.nn.Module:
    """Model `name`, small, for the space (see the module docstring); `overrides` go on top."""
    return _built(MODELS.get(name), name, space_name, seed, output, json.dumps(dict(overrides or {}), sort_keys=True))


def small_settings(cls: type, name: str, space_name: str, output: str, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """The hyperparameters model `name` is built with on the space (see the module docstring)."""
    _, architecture, _, group = SPACES[space_name]
    fields = {f.name for f in dataclasses.fields(model_config(name))}
    chosen = {k: v for k, v in SMALL.items() if k in fields}
    group_field = getattr(cls, "GROUP_FIELD", "group")
    if group_field in fields and group is not None:
        chosen[group_field] = group
    chosen.update({k: architecture[k] for k in getattr(cls, "ARCHITECTURE_FIELDS", ()) if k in architecture})
    if output != "invariant":
        chosen["output"] = output
    return {**chosen, **overrides}


@functools.lru_cache(maxsize=None)  # a model is not changed by its forward pass; fitting costs seconds
def _built(cls: type, name: str, space_name: str, seed: int, output: str, overrides: str) -> torch.nn.Module:
    chosen = small_settings(cls, name, space_name, output, json.loads(overrides))  # `cls` keys the cache
    weight_space = space(space_name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = create_model(name, weight_space, **chosen).eval()
    noise = getattr(cls, "EXACTNESS_PARAMETER_NOISE", 0.0)
    if noise:
        generator = torch.Generator().manual_seed(seed + 1000)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(noise * torch.randn(parameter.shape, generator=generator).to(parameter.dtype))
    if trained_by(model) == "fit":  # fitted on random rows, the targets a function of every weight
        rows = random_weights(weight_space, 64, seed + 100)
        projection = torch.randn(weight_space.num_params, generator=torch.Generator().manual_seed(seed))
        targets = torch.sigmoid(rows.flatten() @ projection / weight_space.num_params ** 0.5)
        model.fit(rows[:48], targets[:48], rows[48:], targets[48:], seed)
    return model


def _in_dtype(name: str, model: torch.nn.Module, weights: WeightBatch) -> tuple[torch.nn.Module, WeightBatch]:
    """The model and members in the model class's `EXACTNESS_DTYPE` (a copy: the built model is cached)."""
    dtype = getattr(MODELS.get(name), "EXACTNESS_DTYPE", torch.float32)
    if dtype == torch.float32:
        return model, weights
    return copy.deepcopy(model).to(dtype), WeightBatch(weights.space, tuple(t.to(dtype) for t in weights.tensors))


def out_features(name: str, overrides: Mapping[str, Any] | None = None) -> int:
    """The width of the model's invariant output as its Config gives it (the contract: (B, out_features))."""
    return getattr(model_config(name, **dict(overrides or {})), "out_features", 1)


def _seeds_of(name: str, seeds: Sequence[int]) -> Sequence[int]:
    # a fitted model claims nothing: one fit (seconds on 18,506 features) shows each group moves it
    return seeds if trained_by(MODELS.get(name)) == "gradient" else seeds[:1]


def check_output(name: str, space_name: str, magnitude: str = "unit", seeds: Sequence[int] = SEEDS,
                 overrides: Mapping[str, Any] | None = None) -> Check:
    """The invariant output on members at `magnitude` against the contract: (B, out_features), finite."""
    width = out_features(name, overrides)
    for seed in _seeds_of(name, seeds):
        model, weights = _in_dtype(name, build_model(name, space_name, seed, overrides=overrides),
                                   random_weights(space(space_name), 4, seed, magnitude=magnitude))
        output, mutated = called(model, weights, "f(w)", seed)
        found = mutated or contract(output, len(weights), width, "f(w)", seed)
        if found is not None:
            return Check(name, space_name, "-", "output", False, math.nan, math.nan, math.nan, magnitude, *found)
    return Check(name, space_name, "-", "output", False, math.nan, math.nan, math.nan, magnitude,
                 detail=f"(B, {width}), finite")


def check_invariance(name: str, space_name: str, group: str, seeds: Sequence[int] = SEEDS,
                     overrides: Mapping[str, Any] | None = None, magnitude: str = "unit") -> Check:
    """f(g . w) against f(w) for random members at `magnitude` and group elements, over `seeds`."""
    claimed = group in claimed_symmetries(build_model(name, space_name, 0, overrides=overrides))
    acting = symmetry(space_name, group)
    width, worst = out_features(name, overrides), 0.0
    for seed in _seeds_of(name, seeds):
        model, weights = _in_dtype(name, build_model(name, space_name, seed, overrides=overrides),
                                   random_weights(acting.space, 4, seed, magnitude=magnitude))
        g = acting.sample(torch.Generator().manual_seed(seed + 20), batch_size=4)
        output, mutated = called(model, weights, "f(w)", seed)
        moved, mutated_moved = called(model, acting.act(g, weights), "f(g . w)", seed)
        found = mutated or mutated_moved or contract(output, len(weights), width, "f(w)", seed) or \
            contract(moved, len(weights), width, "f(g . w)", seed)
        if found is not None:  # no verdict on the claim: the output itself is wrong
            return Check(name, space_name, group, "invariance", claimed, math.nan, MAGNITUDES[magnitude].tolerance,
                         MOVES, magnitude, *found)
        worst = max(worst, deviation(moved, output, magnitude), key=_nan_first)
    return Check(name, space_name, group, "invariance", claimed, worst, MAGNITUDES[magnitude].tolerance, MOVES,
                 magnitude)


def check_denormal(name: str, space_name: str, group: str, overrides: Mapping[str, Any] | None = None) -> Check:
    """A claimed group on members holding denormal weights, its scalings rounded to powers of two."""
    model = build_model(name, space_name, 0, overrides=overrides)
    acting = symmetry(space_name, group)
    weights = random_weights(acting.space, 4, seed=1, denormal=True)
    g = acting.sample(torch.Generator().manual_seed(2), batch_size=4)
    if hasattr(g, "scales"):  # power-of-two scalings act exactly
        g = dataclasses.replace(g, scales=tuple(s.sign() * torch.exp2(torch.round(torch.log2(s.abs())))
                                                for s in g.scales))
    output, mutated = called(model, weights, "f(w)", 1)
    moved, mutated_moved = called(model, acting.act(g, weights), "f(g . w)", 1)
    claimed, width = group in claimed_symmetries(model), out_features(name, overrides)
    found = mutated or mutated_moved or contract(output, len(weights), width, "f(w)", 1) or \
        contract(moved, len(weights), width, "f(g . w)", 1)
    if found is not None:
        return Check(name, space_name, group, "denormal", claimed, math.nan, DENORMAL_RTOL, DENORMAL_RTOL,
                     "denormal", *found)
    return Check(name, space_name, group, "denormal", claimed, deviation(moved, output), DENORMAL_RTOL,
                 DENORMAL_RTOL, "denormal")


def check_equivariance(name: str, space_name: str, group: str, seeds: Sequence[int] = SEEDS,
                       overrides: Mapping[str, Any] | None = None, magnitude: str = "unit") -> Check:
    """A weight output: g . f(w) against f(g . w), relative to the output's size, on members at `magnitude`.

    It runs in the model's `EXACTNESS_DTYPE`: float32 unless it says otherwise (see the module
    docstring)."""
    acting = symmetry(space_name, group)
    claimed = group in claimed_symmetries(build_model(name, space_name, 0, "weights", overrides))
    worst = 0.0
    for seed in seeds:
        model, weights = _in_dtype(name, build_model(name, space_name, seed, "weights", overrides),
                                   random_weights(acting.space, 4, seed, magnitude=magnitude))
        g = acting.sample(torch.Generator().manual_seed(seed + 20), batch_size=4)
        output, mutated = called(model, weights, "f(w)", seed)
        output_of_moved, mutated_moved = called(model, acting.act(g, weights), "f(g . w)", seed)
        found = mutated or mutated_moved or weights_contract(output, weights, "f(w)", seed) or \
            weights_contract(output_of_moved, weights, "f(g . w)", seed)
        if found is not None:
            return Check(name, space_name, group, "equivariance", claimed, math.nan,
                         MAGNITUDES[magnitude].equivariant_tolerance, EQUIVARIANT_MOVES, magnitude, *found)
        worst = max(worst, relative_gap(output_of_moved, acting.act(g, output)), key=_nan_first)
    return Check(name, space_name, group, "equivariance", claimed, worst, MAGNITUDES[magnitude].equivariant_tolerance,
                 EQUIVARIANT_MOVES, magnitude)


def _nan_first(value: float) -> float:
    return math.inf if math.isnan(value) else value


def weight_output_spaces(name: str) -> list[str]:
    """The spaces whose weight output is checked: those read, less MAGEP-NFN's kernel CNNs.

    Those are refused, since its weight output lives on the dense description."""
    if "weights" not in model_outputs(name):
        return []
    return [s for s in sorted(SPACES) if reads(name, s)
            and not (MODELS.resolve(name) == "magep_nfn" and any(len(t.shape) > 2 for t in space(s).tensors))]
