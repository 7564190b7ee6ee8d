"""Exact symmetry checks for the NP/HNP layers, pools and models, with negative controls.

Group elements come from the zoo's own symmetry functions (`family.symmetry(...)`, sample /
act with a seeded generator) on CNN-ReLU, CNN-tanh and SIREN weight spaces. The permutation
subgroup (mode "permutation") must commute with every layer, leave every pool and model
unchanged; the family's full group (positive scalings for ReLU, sign flips for tanh/sine)
and an uncoupled permutation (a hidden layer's rows permuted without the next layer's
columns) must not, which shows the checks can fail. Tolerance: float32, atol = rtol = 1e-5
(a permutation only reorders the terms of each mean).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from nfn_models import create_model
from nfn_models.features import NetworkDescription, WeightSpaceFeatures, act_on_features, stack_channels
from nfn_models.layers import HNPLinear, HNPPool, NPLinear, NPPool
from zoo.families import create_family
from zoo.weightspace import WeightBatch

ATOL, RTOL = 1e-5, 1e-5
SEEDS = (0, 1, 2)
# (family, architecture, hyperparameters): the weight spaces and the groups acting on them.
SPACES = {
    "cnn-relu": ("cnn", {}, {"activation": "relu"}),
    "cnn-tanh": ("cnn", {}, {"activation": "tanh"}),
    "siren": ("inr", {}, {}),
}


def _symmetry(space_name: str, mode: str | None = None):
    family_name, architecture, hparams = SPACES[space_name]
    symmetry = create_family(family_name).symmetry(architecture, hparams)
    return symmetry if mode is None else dataclasses.replace(symmetry, mode=mode)


def _random_batch(symmetry, size: int, seed: int) -> WeightBatch:
    generator = torch.Generator().manual_seed(seed)
    return WeightBatch(symmetry.space, tuple(torch.randn(size, *t.shape, generator=generator)
                                             for t in symmetry.space.tensors))


def _random_features(symmetry, size: int, channels: int, seed: int) -> WeightSpaceFeatures:
    """Multi-channel features: `channels` independent weight batches stacked on dim 1."""
    description = NetworkDescription.from_weight_space(symmetry.space)
    per_channel = [WeightSpaceFeatures.from_weight_batch(_random_batch(symmetry, size, seed * 100 + c), description)
                   for c in range(channels)]
    return stack_channels(per_channel)


def _uncouple(features: WeightSpaceFeatures, generator: torch.Generator) -> WeightSpaceFeatures:
    """Permutes layer 0's output rows and bias, but not layer 1's input columns: not a symmetry."""
    order = torch.randperm(features.description.layers[0].n_out, generator=generator)
    weights = (features.weights[0][:, :, order], *features.weights[1:])
    biases = (features.biases[0][:, :, order], *features.biases[1:])
    return WeightSpaceFeatures(features.description, weights, biases)


def _close(a: WeightSpaceFeatures, b: WeightSpaceFeatures) -> None:
    for x, y in zip((*a.weights, *a.biases), (*b.weights, *b.biases)):
        torch.testing.assert_close(x, y, atol=ATOL, rtol=RTOL)


def _max_diff(a: WeightSpaceFeatures, b: WeightSpaceFeatures) -> float:
    return max(float((x - y).abs().max()) for x, y in zip((*a.weights, *a.biases), (*b.weights, *b.biases)))


LAYERS = {"np": NPLinear, "hnp": HNPLinear}
POOLS = {"np": NPPool, "hnp": HNPPool}


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("seed", SEEDS)
def test_layer_commutes_with_hidden_permutations(kind, space_name, seed):
    symmetry = _symmetry(space_name, "permutation")
    torch.manual_seed(seed)  # the layer's initialization; nothing else reads the global RNG
    x = _random_features(symmetry, size=2, channels=2, seed=seed)
    layer = LAYERS[kind](x.description, 2, 3)
    g = symmetry.sample(torch.Generator().manual_seed(seed + 10), batch_size=2)
    with torch.no_grad():
        _close(layer(act_on_features(symmetry, g, x)), act_on_features(symmetry, g, layer(x)))


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_layer_negative_controls(kind, space_name):
    """Scaling/sign flips and an uncoupled permutation break the same check."""
    symmetry = _symmetry(space_name)  # the family's full group: scale (ReLU) or sign (tanh, sine)
    x = _random_features(symmetry, size=2, channels=2, seed=0)
    torch.manual_seed(0)
    layer = LAYERS[kind](x.description, 2, 3)
    g = symmetry.sample(torch.Generator().manual_seed(5), batch_size=2)
    with torch.no_grad():
        assert _max_diff(layer(act_on_features(symmetry, g, x)), act_on_features(symmetry, g, layer(x))) > 1e-2
        # The uncoupled permutation T, applied to input and output alike: layer(T x) != T layer(x).
        uncoupled_input = _uncouple(x, torch.Generator().manual_seed(3))
        uncoupled_output = _uncouple(layer(x), torch.Generator().manual_seed(3))
        assert _max_diff(layer(uncoupled_input), uncoupled_output) > 1e-2


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("kind", sorted(POOLS))
def test_pool_is_invariant_and_can_fail(kind, space_name):
    symmetry = _symmetry(space_name, "permutation")
    x = _random_features(symmetry, size=3, channels=2, seed=4)
    pool = POOLS[kind](x.description)
    g = symmetry.sample(torch.Generator().manual_seed(4), batch_size=3)
    torch.testing.assert_close(pool(act_on_features(symmetry, g, x)), pool(x), atol=ATOL, rtol=RTOL)
    full = _symmetry(space_name)
    scaled = act_on_features(full, full.sample(torch.Generator().manual_seed(4), 3), x)
    assert (pool(scaled) - pool(x)).abs().max() > 1e-2


SMALL = {"channels": (4, 3), "hidden_sizes": (16,)}  # small enough for a fast test; same code path as the preset


def _model(kind: str, symmetry, seed: int):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return create_model(kind, symmetry.space, **SMALL).eval()


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("seed", SEEDS)
def test_model_is_invariant_to_hidden_permutations(kind, space_name, seed):
    symmetry = _symmetry(space_name, "permutation")
    model = _model(kind, symmetry, seed)
    weights = _random_batch(symmetry, 4, seed)
    g = symmetry.sample(torch.Generator().manual_seed(seed + 20), batch_size=4)
    with torch.no_grad():
        torch.testing.assert_close(model(symmetry.act(g, weights)), model(weights), atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_model_negative_controls(kind, space_name):
    """Not invariant to scalings/sign flips, nor to an uncoupled permutation."""
    symmetry = _symmetry(space_name)
    model = _model(kind, symmetry, 0)
    weights = _random_batch(symmetry, 4, 0)
    g = symmetry.sample(torch.Generator().manual_seed(7), batch_size=4)
    features = WeightSpaceFeatures.from_weight_batch(weights)
    uncoupled = _uncouple(features, torch.Generator().manual_seed(7)).to_weight_batch(symmetry.space)
    with torch.no_grad():
        reference = model(weights)
        assert (model(symmetry.act(g, weights)) - reference).abs().max() > 1e-4
        assert (model(uncoupled) - reference).abs().max() > 1e-4
