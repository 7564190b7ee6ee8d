"""Exact symmetry checks for the MAGEP-NFN layers and model, with negative controls.

The polynomial layers are equivariant to hidden permutations with *any* invertible scaling,
so they are checked under both the scaling and the sign-flip elements of `zoo.symmetry`
(scales log-uniform in [1e-3, 1e3]) on dense descriptions: SIREN's, and the Small CNN's
with its kernels dropped (where the model's first layer writes). Tolerances (float32): layer
outputs 1e-4 relative to each tensor's largest entry (products of three scaled layers spread
entries over many decades), model outputs rtol = atol = 1e-5.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from nfn_models import create_model
from nfn_models.features import NetworkDescription, WeightSpaceFeatures, act_on_features, stack_channels
from nfn_models.layers import MonomialLinear, PolynomialLinear, PolynomialPool
from zoo.families import create_family
from zoo.symmetry.feedforward import FeedforwardSymmetry
from zoo.weightspace import WeightBatch, WeightSpace

RTOL = 1e-5
LAYER_RTOL = 1e-4
SEEDS = (0, 1, 2)
# (family, hyperparameters, the group of its nets)
SPACES = {"cnn-relu": ("cnn", {"activation": "relu"}, "scale"),
          "cnn-tanh": ("cnn", {"activation": "tanh"}, "sign"),
          "siren": ("inr", {}, "sign")}
SMALL = {"channels": (3, 4, 2), "invariant_channels": 5, "hidden_sizes": (16,)}


def _symmetry(space_name: str, mode: str | None = None) -> FeedforwardSymmetry:
    family, hparams, group = SPACES[space_name]
    symmetry = create_family(family).symmetry({}, hparams)
    return dataclasses.replace(symmetry, max_log_scale=math.log(1e3), mode=mode or group)


def _dense_symmetry(space_name: str, mode: str) -> FeedforwardSymmetry:
    """The symmetry of the space with every kernel dropped: the polynomial layers' domain."""
    symmetry = _symmetry(space_name, mode)
    description = NetworkDescription.from_weight_space(symmetry.space).without_kernels()
    shapes = {}
    for layer in description.layers:
        shapes[layer.weight_name] = torch.zeros(layer.n_out, layer.n_in)
        shapes[layer.bias_name] = torch.zeros(layer.n_out)
    return dataclasses.replace(symmetry, space=WeightSpace.from_state_dict(shapes))


def _batch(space: WeightSpace, size: int, seed: int) -> WeightBatch:
    generator = torch.Generator().manual_seed(seed)
    return WeightBatch(space, tuple(torch.randn(size, *t.shape, generator=generator) for t in space.tensors))


def _features(symmetry: FeedforwardSymmetry, size: int, channels: int, seed: int) -> WeightSpaceFeatures:
    description = NetworkDescription.from_weight_space(symmetry.space)
    return stack_channels([WeightSpaceFeatures.from_weight_batch(_batch(symmetry.space, size, seed * 100 + c),
                                                                 description) for c in range(channels)])


def _relative_diff(a: WeightSpaceFeatures, b: WeightSpaceFeatures) -> float:
    return max(float((x - y).abs().max() / y.abs().max())
               for x, y in zip((*a.weights, *a.biases), (*b.weights, *b.biases)))


def _uncouple(f: WeightSpaceFeatures, layer: int, order: torch.Tensor) -> WeightSpaceFeatures:
    """Permutes layer `layer`'s output rows and bias but not the next layer's columns: not a symmetry."""
    weights, biases = list(f.weights), list(f.biases)
    weights[layer], biases[layer] = weights[layer][:, :, order], biases[layer][:, :, order]
    return WeightSpaceFeatures(f.description, tuple(weights), tuple(biases))


def _model(space_name: str, seed: int, group: str | None = None, **overrides):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return create_model("magep_nfn", _symmetry(space_name).space, group=group or SPACES[space_name][2],
                            **{**SMALL, **overrides}).eval()


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("mode", ["scale", "sign"])
@pytest.mark.parametrize("seed", SEEDS)
def test_polynomial_layer_commutes_with_any_scaling(space_name, mode, seed):
    symmetry = _dense_symmetry(space_name, mode)
    x = _features(symmetry, size=2, channels=2, seed=seed)
    torch.manual_seed(seed)
    layer = PolynomialLinear(x.description, 2, 3)
    g = symmetry.sample(torch.Generator().manual_seed(seed + 10), batch_size=2)
    with torch.no_grad():
        assert _relative_diff(layer(act_on_features(symmetry, g, x)),
                              act_on_features(symmetry, g, layer(x))) < LAYER_RTOL


@pytest.mark.parametrize("space_name", sorted(SPACES))
def test_polynomial_layer_negative_controls(space_name):
    """A permutation of one layer's rows without the next layer's columns breaks the products;
    scaling the input but not the output is detected."""
    symmetry = _dense_symmetry(space_name, "scale")
    x = _features(symmetry, size=2, channels=2, seed=0)
    torch.manual_seed(0)
    layer = PolynomialLinear(x.description, 2, 3)
    L = x.description.num_layers
    hidden = torch.randperm(x.description.layers[0].n_out, generator=torch.Generator().manual_seed(3))
    g = symmetry.sample(torch.Generator().manual_seed(5), batch_size=2)
    with torch.no_grad():
        assert _relative_diff(layer(_uncouple(x, 0, hidden)), _uncouple(layer(x), 0, hidden)) > 1e-2
        assert _relative_diff(layer(act_on_features(symmetry, g, x)), layer(x)) > 1e-2
        assert L >= 2


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("mode", ["scale", "sign"])
@pytest.mark.parametrize("seed", SEEDS)
def test_polynomial_pool_is_invariant_and_can_fail(space_name, mode, seed):
    symmetry = _dense_symmetry(space_name, mode)
    x = _features(symmetry, size=3, channels=2, seed=seed)
    torch.manual_seed(seed)
    pool = PolynomialPool(x.description, 2, 4)
    g = symmetry.sample(torch.Generator().manual_seed(seed + 4), batch_size=3)
    hidden = torch.randperm(x.description.layers[0].n_out, generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        torch.testing.assert_close(pool(act_on_features(symmetry, g, x)), pool(x), rtol=RTOL, atol=RTOL)
        assert (pool(_uncouple(x, 0, hidden)) - pool(x)).abs().max() > 1e-4


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("seed", SEEDS)
def test_first_layer_folds_kernels_away_equivariantly(space_name, seed):
    """MonomialLinear onto the dense description: g acts on the input space and on the output's."""
    group = SPACES[space_name][2]
    symmetry, dense = _symmetry(space_name), _dense_symmetry(space_name, group)
    x = _features(symmetry, size=2, channels=1, seed=seed)
    torch.manual_seed(seed)
    layer = MonomialLinear(x.description, 1, 3, group, out_description=x.description.without_kernels())
    g = symmetry.sample(torch.Generator().manual_seed(seed + 10), batch_size=2)
    with torch.no_grad():
        out = layer(x)
        assert out.description == x.description.without_kernels()
        assert _relative_diff(layer(act_on_features(symmetry, g, x)), act_on_features(dense, g, out)) < LAYER_RTOL


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("magnitude", [1.0, 1e-3])
def test_model_is_invariant(space_name, seed, magnitude):
    symmetry = _symmetry(space_name)
    model = _model(space_name, seed)
    weights = _batch(symmetry.space, 4, seed)
    weights = WeightBatch(weights.space, tuple(magnitude * t for t in weights.tensors))
    g = symmetry.sample(torch.Generator().manual_seed(seed + 20), batch_size=4)
    with torch.no_grad():
        torch.testing.assert_close(model(symmetry.act(g, weights)), model(weights), rtol=RTOL, atol=RTOL)


@pytest.mark.parametrize("space_name", sorted(SPACES))
def test_model_negative_controls(space_name):
    """ReLU is not odd (the scale model fails under sign flips), tanh is not homogeneous (the
    sign model fails under scalings), and an uncoupled permutation fails both."""
    weights = _batch(_symmetry(space_name).space, 4, 0)
    with torch.no_grad():
        for group, wrong in (("scale", "sign"), ("sign", "scale")):
            model = _model(space_name, 0, group=group)
            other = _symmetry(space_name, wrong)
            g = other.sample(torch.Generator().manual_seed(7), batch_size=4)
            assert (model(other.act(g, weights)) - model(weights)).abs().max() > 1e-4
            features = WeightSpaceFeatures.from_weight_batch(weights)
            hidden = torch.randperm(features.description.layers[0].n_out, generator=torch.Generator().manual_seed(7))
            uncoupled = _uncouple(features, 0, hidden).to_weight_batch(weights.space)
            assert (model(uncoupled) - model(weights)).abs().max() > 1e-4


def test_polynomial_layers_refuse_kernels(cnn_space):
    description = NetworkDescription.from_weight_space(cnn_space)
    with pytest.raises(ValueError, match="conv1.weight.*have kernels.*without_kernels"):
        PolynomialLinear(description, 1, 2)
    with pytest.raises(ValueError, match="have kernels"):
        PolynomialPool(description, 1, 2)


def test_preset_on_the_small_cnn(cnn_space):
    """The preset: a 1 -> 20 Monomial layer, two polynomial layers of 20, a pool of 20, head 500."""
    model = create_model("magep_nfn", cnn_space)
    config = model.config
    assert (config.channels, config.invariant_channels, config.hidden_sizes) == ((20, 20, 20), 20, (500, 500))
    polynomial = [m for m in model.equivariant if isinstance(m, PolynomialLinear)]
    assert [(m.in_channels, m.out_channels) for m in polynomial] == [(20, 20), (20, 20)]
    assert sum(p.numel() for p in model.parameters()) == 998_121
    assert not any(name.startswith("equivariant.") and "psi" in name.lower() for name, _ in model.named_parameters())
    assert any("Psi" in name for name, _ in model.named_buffers())  # the layers' fixed psi/Psi travel in the state dict


def test_magep_trains_on_cnn_weights(cnn_space, random_batch):
    """A few Adam steps lower the loss; every trainable parameter gets a finite gradient."""
    torch.manual_seed(0)
    model = create_model("magep_nfn", cnn_space, **SMALL)
    weights = random_batch(cnn_space, 16, seed=3)
    target = torch.rand(16, 1, generator=torch.Generator().manual_seed(0))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    losses = []
    for _ in range(30):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(weights), target)
        loss.backward()
        assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in model.parameters())
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
