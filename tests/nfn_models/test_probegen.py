"""ProbeGen / vanilla probing: the probes go through each member's real function, so the output is
invariant to what preserves that function and moves with what does not.

The registry-wide checks (`test_exactness.py`) cover the claims at the default `member_activation`;
here the members are the families' own single-member modules (`Family.build`) with non-default
architecture fields, tanh CNNs included. Small probe sets and heads keep the file near a second.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from nfn_models import claimed_symmetries, create_model
from nfn_models.probegen import LinearImageGenerator
from zoo.families import create_family
from zoo.weightspace import WeightBatch

SMALL = {"num_probes": 6, "generator_width": 2, "latent_dim": 4, "hidden_sizes": (8,)}
CNN = {"stride": 2, "padding": "valid", "input_range": "signed"}  # the released Small CNN Zoo's
SIREN = {"first_omega_0": 30.0, "hidden_omega_0": 20.0, "coordinates": "column_row", "output_offset": 0.5}
TRAINING = {"optimizer": "adam", "learning_rate": 1e-3, "l2": 0.0, "init": "normal", "init_std": 0.1, "dropout": 0.0,
            "train_fraction": 1.0}  # a CNN run's other hyperparameters: they do not change its function
# name -> (family, architecture, hparams, model overrides)
MEMBERS = {"cnn-relu": ("cnn", CNN, {**TRAINING, "activation": "relu"}, {**CNN, "member_activation": "relu"}),
           "cnn-tanh": ("cnn", CNN, {**TRAINING, "activation": "tanh"}, {**CNN, "member_activation": "tanh"}),
           "siren": ("inr", SIREN, None, SIREN)}


def _setting(name: str, generator: str = "linear", seed: int = 0):
    family_name, architecture, hparams, overrides = MEMBERS[name]
    family = create_family(family_name)
    space = family.weight_space(architecture)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = create_model("probegen", space, generator=generator, **SMALL, **overrides).eval()
    # SIREN-like weight scales (a SIREN's hidden weights are ~1/omega_0): random but realistic functions
    scale = 0.2 if family_name == "inr" else 0.5
    draws = torch.Generator().manual_seed(seed + 1)
    weights = WeightBatch(space, tuple(scale * torch.randn(3, *t.shape, generator=draws) for t in space.tensors))
    return family, architecture, hparams, model, weights


@pytest.mark.parametrize("generator", ["linear", "none"])
@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_the_probes_pass_through_each_members_own_function(name, generator):
    family, architecture, hparams, model, weights = _setting(name, generator)
    with torch.no_grad():
        probes = model.current_probes()
        outputs = model.member_outputs(weights)  # (B, N, out)
        for member in range(len(weights)):
            single = family.build(architecture, hparams).eval()
            single.load_state_dict(weights.state_dict(member))
            # a SIREN reads the coordinates; a CNN [0, 1] pixels, the probe t in [-1, 1] as (t + 1) / 2
            expected = single(probes) if name == "siren" else single((probes + 1) / 2)
            torch.testing.assert_close(outputs[member], expected.to(outputs.dtype), rtol=1e-5, atol=1e-5)
    assert outputs.shape[1] == SMALL["num_probes"]


@pytest.mark.parametrize("name, group", [("cnn-relu", "scale"), ("cnn-tanh", "sign"), ("siren", "sign")])
def test_function_preserving_transforms_leave_the_output_unchanged(name, group):
    """Not equivariant by construction: invariant because the member's function is."""
    family, architecture, hparams, model, weights = _setting(name)
    assert set(claimed_symmetries(model)) == {"permutation", group}
    symmetry = dataclasses.replace(family.symmetry(architecture, hparams or {}), mode=group,
                                   max_log_scale=math.log(1e3))
    element = symmetry.sample(torch.Generator().manual_seed(5), batch_size=len(weights))
    moved = symmetry.act(element, weights)
    assert max((a - b).abs().max() for a, b in zip(moved.tensors, weights.tensors)) > 0.1  # the weights did move
    with torch.no_grad():
        output, moved_output = model(weights), model(moved)
    torch.testing.assert_close(moved_output, output, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("name", sorted(MEMBERS))
def test_a_weight_change_that_changes_the_function_changes_the_output(name):
    """The negative control: the same entries, hidden units permuted in one layer only (their
    outgoing weights left in place), compute another function."""
    _, _, _, model, weights = _setting(name)
    tensors = list(weights.tensors)
    permutation = torch.roll(torch.arange(tensors[0].shape[1]), 1)
    tensors[0], tensors[1] = tensors[0][:, permutation], tensors[1][:, permutation]
    with torch.no_grad():
        output, changed = model(weights), model(WeightBatch(weights.space, tuple(tensors)))
    assert (changed - output).abs().max() > 1e-3 * (1 + output.abs().max())


def test_the_generator_is_linear_until_the_bound():
    generator = LinearImageGenerator(num_probes=3, latent_dim=4, width=2, channels=1)
    z1, z2 = torch.randn(3, 4, 1, 1), torch.randn(3, 4, 1, 1)
    with torch.no_grad():
        mixed = generator.layers(0.3 * z1 + 0.7 * z2)
        torch.testing.assert_close(mixed, 0.3 * generator.layers(z1) + 0.7 * generator.layers(z2))
        assert generator().shape == (3, 1, 32, 32) and generator().abs().max() <= 1


def test_evaluation_reuses_the_probes_until_the_parameters_change():
    _, _, _, model, weights = _setting("cnn-relu")
    with torch.no_grad():
        first = model(weights)
        assert model.current_probes() is model.current_probes()  # computed once per parameter state
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    model(weights).sum().backward()
    optimizer.step()
    model.eval()
    with torch.no_grad():
        cached = model(weights)
    fresh = model(weights).detach()  # with autograd on: no cache
    assert not torch.equal(cached, first)
    torch.testing.assert_close(cached, fresh)


def test_a_space_it_cannot_run_is_a_clear_error():
    pooled = create_family("pooled_cnn").weight_space({})
    with pytest.raises(ValueError, match="knows the CNN .* and SIREN"):
        create_model("probegen", pooled)
