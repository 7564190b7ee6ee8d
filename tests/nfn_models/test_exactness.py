"""Every registered model's symmetry claims, checked over the registry, with negative controls.

For each model in `list_models()` and each weight space (CNN-ReLU, CNN-tanh, SIREN), the
model is built small (its Config's size fields shrunk; `group` set to the space's group
where the model has one), and for each group in "permutation", "scale", "sign" the families'
own random elements (`zoo.symmetry`, scales log-uniform in [1e-3, 1e3]) act on random
weights: a claimed group must leave the output unchanged (float32, rtol = atol = 1e-5) over
three seeds, also on members holding denormal weights (power-of-two scales, 5e-3: the group
action itself rounds there); an unclaimed group must change it (> 1e-4), which shows the
check can fail. A new model is covered by registering it.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from nfn_models import claimed_symmetries, create_model, list_models, model_config
from nfn_models.registry import SYMMETRY_GROUPS
from zoo.families import create_family
from zoo.weightspace import WeightBatch

RTOL = 1e-5
DENORMAL_RTOL = 5e-3
SEEDS = (0, 1, 2)
SPACES = {"cnn-relu": ("cnn", {"activation": "relu"}, "scale"),
          "cnn-tanh": ("cnn", {"activation": "tanh"}, "sign"),
          "siren": ("inr", {}, "sign")}
# the size fields a Config may have, shrunk (the same code paths as the presets)
SMALL = {"channels": (3, 2), "invariant_channels": 4, "hidden_sizes": (16,)}


def _symmetry(space_name: str, mode: str):
    family, hparams, _ = SPACES[space_name]
    symmetry = create_family(family).symmetry({}, hparams)
    return dataclasses.replace(symmetry, max_log_scale=math.log(1e3), mode=mode)


def _model(name: str, space_name: str, seed: int):
    fields = {f.name for f in dataclasses.fields(model_config(name))}
    overrides = {k: v for k, v in SMALL.items() if k in fields}
    if "group" in fields:
        overrides["group"] = SPACES[space_name][2]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return create_model(name, _symmetry(space_name, "permutation").space, **overrides).eval()


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


CASES = [(name, space, group) for name in list_models() for space in sorted(SPACES) for group in SYMMETRY_GROUPS]


@pytest.mark.parametrize("name, space_name, group", CASES)
def test_claimed_groups_leave_the_output_unchanged_and_the_others_do_not(name, space_name, group):
    model = _model(name, space_name, seed=0)
    symmetry = _symmetry(space_name, group)
    claimed = group in claimed_symmetries(model)
    with torch.no_grad():
        for seed in SEEDS:
            model = _model(name, space_name, seed)
            weights = _weights(symmetry.space, 4, seed)
            g = symmetry.sample(torch.Generator().manual_seed(seed + 20), batch_size=4)
            moved, output = model(symmetry.act(g, weights)), model(weights)
            if claimed:
                torch.testing.assert_close(moved, output, rtol=RTOL, atol=RTOL)
            else:
                assert (moved - output).abs().max() > 1e-4, f"{name} is invariant to {group} it does not claim"


@pytest.mark.parametrize("name, space_name", [(n, s) for n in list_models() for s in sorted(SPACES)])
def test_claims_hold_on_members_with_denormal_weights(name, space_name):
    model = _model(name, space_name, seed=0)
    with torch.no_grad():
        for group in claimed_symmetries(model):
            symmetry = _symmetry(space_name, group)
            weights = _weights(symmetry.space, 4, seed=1, denormal=True)
            g = symmetry.sample(torch.Generator().manual_seed(2), batch_size=4)
            g = dataclasses.replace(g, scales=tuple(s.sign() * torch.exp2(torch.round(torch.log2(s.abs())))
                                                    for s in g.scales))
            torch.testing.assert_close(model(symmetry.act(g, weights)), model(weights),
                                       rtol=DENORMAL_RTOL, atol=DENORMAL_RTOL)


def test_every_registered_model_states_its_claims():
    for name in list_models():
        for space_name in SPACES:
            claims = claimed_symmetries(_model(name, space_name, 0))
            assert set(claims) <= set(SYMMETRY_GROUPS)
            if {"scale", "sign"} & set(claims):
                assert "permutation" in claims, f"{name}: a monomial claim implies the permutation one"


def test_an_unknown_claim_is_refused():
    class Odd(torch.nn.Module):
        symmetries = ("rotation",)

    with pytest.raises(ValueError, match="unknown symmetries.*rotation"):
        claimed_symmetries(Odd())
