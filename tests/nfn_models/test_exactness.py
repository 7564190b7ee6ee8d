"""Every registered model's symmetry claims, checked over the registry, with negative controls.

For each model in `list_models()` and each weight space it reads (CNN-ReLU, CNN-tanh, SIREN;
a 2-block 2-head transformer without residuals and a 3-block 4-head one with them), the model
is built small (its Config's size fields shrunk; `group` set to the space's group where the
model has one; a transformer's `num_heads` and `residual` from the space's architecture; a
fitted model fitted on random rows), and for each group of the space the families' own random
elements (`zoo.symmetry`) act on random weights: a claimed group must leave the output
unchanged (float32, rtol = atol = 1e-5) over three seeds, also on members holding denormal
weights (power-of-two scales, 5e-3: the group action itself rounds there); an unclaimed group
must change it (> 1e-4), which shows the check can fail.

Feedforward groups: "permutation", "scale", "sign" (`zoo.symmetry.feedforward`, scales
log-uniform in [1e-3, 1e3]). Transformer groups (`zoo.symmetry.attention`): "attention", the
paper's group (heads, GL(d_k), GL(d_v), pi_O without residuals, pi_A; GL condition numbers up
to 16); and as negative controls for a model claiming it, the same with the MLP units'
positive scalings ("attention+scale", a symmetry of the members outside the paper's group),
with the block-output permutations P_B ("attention+block-output", likewise), and, on the
residual space, the model-dimension permutations that are no symmetry of a residual member
("attention+model-dimension"). A new model is covered by registering it.

Models with a weight-space output (`models_with_output("weights")`, INR editing's weight delta)
are checked the same way for equivariance: a claimed group g must give f(g . w) = g . f(w)
(relative to the output's size), an unclaimed one must not.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import pytest
import torch

from nfn_models import claimed_symmetries, create_model, list_models, model_config, models_with_output, trained_by
from nfn_models.registry import MODELS, SPACE_GROUPS, weight_space_kind
from zoo.families import create_family
from zoo.weightspace import WeightBatch

RTOL = 1e-5
DENORMAL_RTOL = 5e-3
SEEDS = (0, 1, 2)
SMALL_TRANSFORMER = {"input": "image_patches", "image_size": 8, "patch_size": 4, "d_model": 8, "num_blocks": 3,
                     "num_heads": 4, "head_dim": 2, "mlp_dim": 12, "num_classes": 3, "residual": True}
MNIST_TRANSFORMER = {"d_model": 32, "num_blocks": 2, "num_heads": 2, "head_dim": 16, "mlp_dim": 64}
SPACES = {"cnn-relu": ("cnn", {}, {"activation": "relu"}, "scale"),
          "cnn-tanh": ("cnn", {}, {"activation": "tanh"}, "sign"),
          "siren": ("inr", {}, {}, "sign"),
          "transformer-2x2": ("transformer", MNIST_TRANSFORMER, {}, None),
          "transformer-3x4-residual": ("transformer", SMALL_TRANSFORMER, {}, None)}
# the size fields a Config may have, shrunk (the same code paths as the presets)
SMALL = {"channels": (3, 2), "invariant_channels": 4, "hidden_sizes": (16,), "encoder_hidden": 6,
         "max_rounds": 5, "min_child_weight": 1.0, "min_data_in_leaf": 4, "min_gain_to_split": 0.0, "max_trees": 10,
         "trees_per_step": 5, "early_stopping_trees": 5, "min_samples_leaf": 4}
NEGATIVE_CONTROLS = {"attention+scale": {"mlp_scaling": True},
                     "attention+block-output": {"permute_block_outputs": True},
                     "attention+model-dimension": {"residual": False}}


def _groups(space_name: str) -> tuple[str, ...]:
    family, architecture, _, _ = SPACES[space_name]
    if family != "transformer":
        return SPACE_GROUPS["feedforward"]
    controls = ("attention+scale",) + (("attention+model-dimension",) if architecture.get("residual")
                                        else ("attention+block-output",))
    return SPACE_GROUPS["transformer"] + controls


def _symmetry(space_name: str, group: str):
    family, architecture, hparams, _ = SPACES[space_name]
    symmetry = create_family(family).symmetry(architecture, hparams)
    if family != "transformer":
        return dataclasses.replace(symmetry, max_log_scale=math.log(1e3), mode=group)
    paper = dataclasses.replace(symmetry, mlp_scaling=False, permute_block_outputs=False)
    return dataclasses.replace(paper, **NEGATIVE_CONTROLS.get(group, {}))


def _space(space_name: str):
    return _symmetry(space_name, _groups(space_name)[0]).space


def _weights(space, size: int, seed: int, denormal: bool = False) -> WeightBatch:
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for t in space.tensors:
        x = torch.randn(size, *t.shape, generator=generator)
        if denormal:  # 10% of the entries replaced by denormals of the same sign, as Adam members hold
            tiny = torch.exp(torch.empty(x.shape).uniform_(math.log(1e-45), math.log(1e-39), generator=generator))
            x = torch.where(torch.rand(x.shape, generator=generator) < 0.1, tiny * x.sign(), x)
        tensors.append(x)
    return WeightBatch(space, tuple(tensors))


@functools.lru_cache(maxsize=None)  # a model is not changed by its forward pass; fitting costs seconds
def _model(name: str, space_name: str, seed: int, output: str = "invariant"):
    _, architecture, _, group = SPACES[space_name]
    cls = MODELS.get(name)
    fields = {f.name for f in dataclasses.fields(model_config(name))}
    overrides = {k: v for k, v in SMALL.items() if k in fields}
    if "group" in fields and group is not None:
        overrides["group"] = group
    overrides.update({k: architecture[k] for k in getattr(cls, "ARCHITECTURE_FIELDS", ()) if k in architecture})
    if output != "invariant":
        overrides["output"] = output
    space = _space(space_name)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = create_model(name, space, **overrides).eval()
    if trained_by(model) == "fit":  # fitted on random rows, the targets a function of every weight
        rows = _weights(space, 64, seed + 100)
        projection = torch.randn(space.num_params, generator=torch.Generator().manual_seed(seed))
        targets = torch.sigmoid(rows.flatten() @ projection / space.num_params ** 0.5)
        model.fit(rows[:48], targets[:48], rows[48:], targets[48:], seed)
    return model


def _reads(name: str, space_name: str) -> bool:
    kind = weight_space_kind(_space(space_name))
    return kind in getattr(MODELS.get(name), "weight_spaces", tuple(SPACE_GROUPS))


CASES = [(name, space, group) for name in list_models() for space in sorted(SPACES) if _reads(name, space)
         for group in _groups(space)]


@pytest.mark.parametrize("name, space_name, group", CASES)
def test_claimed_groups_leave_the_output_unchanged_and_the_others_do_not(name, space_name, group):
    model = _model(name, space_name, seed=0)
    symmetry = _symmetry(space_name, group)
    claimed = group in claimed_symmetries(model)
    # a fitted model claims nothing: one fit (seconds on 18,506 features) shows each group moves it
    seeds = SEEDS if trained_by(model) == "gradient" else SEEDS[:1]
    with torch.no_grad():
        for seed in seeds:
            model = _model(name, space_name, seed)
            weights = _weights(symmetry.space, 4, seed)
            g = symmetry.sample(torch.Generator().manual_seed(seed + 20), batch_size=4)
            moved, output = model(symmetry.act(g, weights)), model(weights)
            if claimed:
                torch.testing.assert_close(moved, output, rtol=RTOL, atol=RTOL)
            else:
                assert (moved - output).abs().max() > 1e-4, f"{name} is invariant to {group} it does not claim"


@pytest.mark.parametrize("name, space_name", [(n, s) for n in list_models() for s in sorted(SPACES) if _reads(n, s)])
def test_claims_hold_on_members_with_denormal_weights(name, space_name):
    model = _model(name, space_name, seed=0)
    with torch.no_grad():
        for group in claimed_symmetries(model):
            symmetry = _symmetry(space_name, group)
            weights = _weights(symmetry.space, 4, seed=1, denormal=True)
            g = symmetry.sample(torch.Generator().manual_seed(2), batch_size=4)
            if hasattr(g, "scales"):  # power-of-two scalings act exactly
                g = dataclasses.replace(g, scales=tuple(s.sign() * torch.exp2(torch.round(torch.log2(s.abs())))
                                                        for s in g.scales))
            torch.testing.assert_close(model(symmetry.act(g, weights)), model(weights),
                                       rtol=DENORMAL_RTOL, atol=DENORMAL_RTOL)


def _has_kernels(space_name: str) -> bool:
    return any(len(t.shape) > 2 for t in _space(space_name).tensors)


# MAGEP-NFN's weight output lives on the dense description: SIRENs, not CNNs (refused, tested below)
EQUIVARIANT_CASES = [(name, space, group) for name in models_with_output("weights") for space in sorted(SPACES)
                     if _reads(name, space) and not (name == "magep_nfn" and _has_kernels(space))
                     for group in _groups(space)]


def _relative_gap(a: WeightBatch, b: WeightBatch) -> float:
    return max(((x - y).abs().max() / y.abs().max().clamp_min(1e-12)).item() for x, y in zip(a.tensors, b.tensors))


@pytest.mark.parametrize("name, space_name, group", EQUIVARIANT_CASES)
def test_weight_outputs_are_equivariant_to_the_claimed_groups_only(name, space_name, group):
    symmetry = _symmetry(space_name, group)
    claimed = group in claimed_symmetries(_model(name, space_name, 0, "weights"))
    with torch.no_grad():
        for seed in SEEDS:
            model = _model(name, space_name, seed, "weights")
            weights = _weights(symmetry.space, 4, seed)
            g = symmetry.sample(torch.Generator().manual_seed(seed + 20), batch_size=4)
            moved_output, output_of_moved = symmetry.act(g, model(weights)), model(symmetry.act(g, weights))
            assert isinstance(output_of_moved, WeightBatch) and output_of_moved.space == symmetry.space
            gap = _relative_gap(output_of_moved, moved_output)
            if claimed:
                assert gap < 1e-4, f"{name}'s weight output is not equivariant to {group}: relative gap {gap:.2e}"
            else:
                assert gap > 1e-3, f"{name}'s weight output is equivariant to {group}, which it does not claim"


def test_a_weight_output_is_refused_where_a_model_has_none():
    assert set(models_with_output("weights")) >= {"np", "hnp", "monomial_nfn", "magep_nfn", "mlp"}
    with pytest.raises(ValueError, match="model 'statnn' has no 'weights' output; the models with one are"):
        create_model("statnn", _space("siren"), output="weights")
    with pytest.raises(ValueError, match="dense description"):
        create_model("magep_nfn", _space("cnn-relu"), output="weights")


def test_every_registered_model_states_its_claims():
    for name in list_models():
        read = [space_name for space_name in SPACES if _reads(name, space_name)]
        assert read, f"{name} reads none of the test weight spaces"
        for space_name in read:
            claims = claimed_symmetries(_model(name, space_name, 0))
            assert set(claims) <= set(SPACE_GROUPS[weight_space_kind(_space(space_name))]), (name, space_name, claims)
            if {"scale", "sign"} & set(claims):
                assert "permutation" in claims, f"{name}: a monomial claim implies the permutation one"


def test_a_model_refuses_a_weight_space_kind_it_does_not_read():
    with pytest.raises(ValueError, match="reads feedforward weight spaces; these weights are a transformer"):
        create_model("np", _space("transformer-2x2"))
    with pytest.raises(ValueError, match="reads transformer weight spaces; these weights are a feedforward"):
        create_model("transformer_nfn", _space("cnn-relu"))


def test_an_unknown_claim_is_refused():
    class Odd(torch.nn.Module):
        symmetries = ("rotation",)

    with pytest.raises(ValueError, match="unknown symmetries.*rotation"):
        claimed_symmetries(Odd())
