"""Exact symmetry checks for the Monomial-NFN layer, pool and model, with negative controls.

Group elements come from the families' own `family.symmetry(architecture, hparams)`: positive
scalings for CNN-ReLU, sign flips for CNN-tanh and SIREN, scale factors drawn log-uniformly
in [1e-3, 1e3]. Tolerances (float32): layer outputs rtol = 1e-4 relative to each tensor's
largest entry (a scale of up to 1e3 per axis spreads entries over 1e6, so the absolute error
of the small ones follows the large ones); model outputs rtol = atol = 1e-5. Members with
denormal entries (~1e-45..1e-39, a few significant bits) lose precision inside the layers'
arithmetic and, for scalings, in the group action itself (1e-45 * 1e-3 underflows to 0), so
they are checked at 5e-3 with power-of-two scales (the action is then exact wherever it does
not underflow); the invariant layer itself is exact on them (`test_unit_normalize_...`).
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
import torch.nn.functional as F

from nfn_models import create_model
from nfn_models.features import NetworkDescription, WeightSpaceFeatures, act_on_features, stack_channels
from nfn_models.layers import MonomialLinear, MonomialPool
from nfn_models.layers.monomial import unit_normalize
from zoo.families import create_family
from zoo.weightspace import WeightBatch

RTOL = 1e-5
LAYER_RTOL = 1e-4
DENORMAL_RTOL = 5e-3
SEEDS = (0, 1, 2)
# (family, architecture, hyperparameters, the Monomial-NFN group for it)
SPACES = {
    "cnn-relu": ("cnn", {}, {"activation": "relu"}, "scale"),
    "cnn-tanh": ("cnn", {}, {"activation": "tanh"}, "sign"),
    "siren": ("inr", {}, {}, "sign"),
}
SMALL = {"channels": (4, 3), "hidden_sizes": (16,)}  # fast; the same code path as the preset


def _symmetry(space_name: str, mode: str | None = None):
    family_name, architecture, hparams, _ = SPACES[space_name]
    symmetry = create_family(family_name).symmetry(architecture, hparams)
    symmetry = dataclasses.replace(symmetry, max_log_scale=math.log(1e3))  # scales in [1e-3, 1e3]
    return symmetry if mode is None else dataclasses.replace(symmetry, mode=mode)


def _group(space_name: str) -> str:
    return SPACES[space_name][3]


def _random_batch(symmetry, size: int, seed: int, magnitude: float = 1.0) -> WeightBatch:
    generator = torch.Generator().manual_seed(seed)
    return WeightBatch(symmetry.space, tuple(magnitude * torch.randn(size, *t.shape, generator=generator)
                                             for t in symmetry.space.tensors))


def _denormal_batch(symmetry, size: int, seed: int) -> WeightBatch:
    """Standard normal weights with 10% of the entries replaced by denormals of the same sign."""
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for t in symmetry.space.tensors:
        x = torch.randn(size, *t.shape, generator=generator)
        tiny = torch.exp(torch.empty(x.shape).uniform_(math.log(1e-45), math.log(1e-39), generator=generator))
        tensors.append(torch.where(torch.rand(x.shape, generator=generator) < 0.1, tiny * x.sign(), x))
    return WeightBatch(symmetry.space, tuple(tensors))


def _random_features(symmetry, size: int, channels: int, seed: int) -> WeightSpaceFeatures:
    description = NetworkDescription.from_weight_space(symmetry.space)
    return stack_channels([WeightSpaceFeatures.from_weight_batch(_random_batch(symmetry, size, seed * 100 + c),
                                                                 description) for c in range(channels)])


def _relative_diff(a: WeightSpaceFeatures, b: WeightSpaceFeatures) -> float:
    """The largest error of any tensor relative to that tensor's largest entry."""
    return max(float((x - y).abs().max() / y.abs().max())
               for x, y in zip((*a.weights, *a.biases), (*b.weights, *b.biases)))


def _model(space_name: str, seed: int, group: str | None = None, **overrides):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return create_model("monomial_nfn", _symmetry(space_name).space, group=group or _group(space_name),
                            **{**SMALL, **overrides}).eval()


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("seed", SEEDS)
def test_layer_commutes_with_the_group(space_name, seed):
    symmetry = _symmetry(space_name)
    x = _random_features(symmetry, size=2, channels=2, seed=seed)
    torch.manual_seed(seed)  # the layer's initialization
    layer = MonomialLinear(x.description, 2, 3, _group(space_name))
    g = symmetry.sample(torch.Generator().manual_seed(seed + 10), batch_size=2)
    with torch.no_grad():
        moved_first, moved_after = layer(act_on_features(symmetry, g, x)), act_on_features(symmetry, g, layer(x))
        assert _relative_diff(moved_first, moved_after) < LAYER_RTOL


def _uncouple(f: WeightSpaceFeatures, layer: int, order: torch.Tensor) -> WeightSpaceFeatures:
    """Permutes layer `layer`'s output rows and bias but not the next layer's columns: not a symmetry."""
    weights, biases = list(f.weights), list(f.biases)
    weights[layer], biases[layer] = weights[layer][:, :, order], biases[layer][:, :, order]
    return WeightSpaceFeatures(f.description, tuple(weights), tuple(biases))


def _permute_outputs(f: WeightSpaceFeatures, order: torch.Tensor) -> WeightSpaceFeatures:
    """Permutes the network's (fixed) output units: not a symmetry."""
    weights, biases = list(f.weights), list(f.biases)
    weights[-1], biases[-1] = weights[-1][:, :, order], biases[-1][:, :, order]
    return WeightSpaceFeatures(f.description, tuple(weights), tuple(biases))


@pytest.mark.parametrize("space_name", sorted(SPACES))
def test_layer_negative_controls(space_name):
    """The sign layer under scalings, and a permutation of the fixed output axis, fail.

    An uncoupled permutation is no control for the scaling layer: its terms never couple two
    layers (the paper's layer has no inter-layer term), so it commutes with one, and the test
    says so; the sign layer's W_L <-> b_{L-1} terms do couple, so it fails there.
    """
    x = _random_features(_symmetry(space_name), size=2, channels=2, seed=0)
    scale = _symmetry(space_name, "scale")
    g = scale.sample(torch.Generator().manual_seed(5), batch_size=2)
    torch.manual_seed(0)
    sign_layer = MonomialLinear(x.description, 2, 3, "sign")
    scale_layer = MonomialLinear(x.description, 2, 3, "scale")
    L = x.description.num_layers
    hidden = torch.randperm(x.description.layers[L - 2].n_out, generator=torch.Generator().manual_seed(3))
    outputs = torch.arange(x.description.layers[-1].n_out).flip(0)
    with torch.no_grad():
        def scale_error(layer: MonomialLinear) -> float:
            return _relative_diff(layer(act_on_features(scale, g, x)), act_on_features(scale, g, layer(x)))

        assert scale_error(sign_layer) > 1e-2
        assert scale_error(scale_layer) < LAYER_RTOL
        def uncoupled_error(layer: MonomialLinear) -> float:
            return _relative_diff(layer(_uncouple(x, L - 2, hidden)), _uncouple(layer(x), L - 2, hidden))

        assert uncoupled_error(sign_layer) > 1e-2  # its W_L <-> b_{L-1} terms couple two layers
        assert uncoupled_error(scale_layer) < LAYER_RTOL  # no term couples two layers
        if len(outputs) > 1:
            for layer in (sign_layer, scale_layer):
                assert _relative_diff(layer(_permute_outputs(x, outputs)), _permute_outputs(layer(x), outputs)) > 1e-2


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("seed", SEEDS)
def test_pool_is_invariant(space_name, seed):
    symmetry = _symmetry(space_name, "scale")  # the pool is scale invariant; the model makes features sign-free
    x = _random_features(symmetry, size=3, channels=2, seed=seed).map(torch.abs)
    pool = MonomialPool(x.description, 2)
    g = symmetry.sample(torch.Generator().manual_seed(seed + 4), batch_size=3)
    torch.testing.assert_close(pool(act_on_features(symmetry, g, x)), pool(x), rtol=RTOL, atol=RTOL)


def test_unit_normalize_is_exactly_degree_zero_down_to_denormals():
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(64, 8, generator=generator)
    for magnitude in (1.0, 1e-12, 1e-30, 2.0 ** -140):  # 2^-140 ~ 7e-43: denormal, ~9 significant bits
        tiny = x * magnitude
        for power in (0, 5, 20, 100):  # c = 2^power >= 1 keeps c * tiny exact: the only error is ours
            torch.testing.assert_close(unit_normalize(tiny * 2.0 ** power, dim=1), unit_normalize(tiny, dim=1),
                                       rtol=1e-6, atol=1e-7)
    smallest = torch.tensor([[1e-45, -1e-45, 0.0]])  # one ulp: still a unit vector
    torch.testing.assert_close(unit_normalize(smallest, dim=1), torch.tensor([[2 ** -0.5, -2 ** -0.5, 0.0]]))
    assert torch.equal(unit_normalize(torch.zeros(2, 3), dim=1), torch.zeros(2, 3))
    # The negative control: an absolute floor (F.normalize's eps = 1e-12) is not scale invariant.
    assert (F.normalize(x * 1e-13, dim=1) - F.normalize(x * 1e-10, dim=1)).abs().max() > 0.5


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("magnitude", [1.0, 1e-12, 1e-30])
def test_model_is_invariant(space_name, seed, magnitude):
    symmetry = _symmetry(space_name)
    model = _model(space_name, seed)
    weights = _random_batch(symmetry, 4, seed, magnitude)
    g = symmetry.sample(torch.Generator().manual_seed(seed + 20), batch_size=4)
    with torch.no_grad():
        torch.testing.assert_close(model(symmetry.act(g, weights)), model(weights), rtol=RTOL, atol=RTOL)


@pytest.mark.parametrize("space_name", sorted(SPACES))
def test_model_is_invariant_on_members_with_denormal_weights(space_name):
    symmetry = _symmetry(space_name)
    model = _model(space_name, 0, channels=(16, 16, 5))
    weights = _denormal_batch(symmetry, 4, seed=0)
    g = symmetry.sample(torch.Generator().manual_seed(1), batch_size=4)
    g = dataclasses.replace(g, scales=tuple(s.sign() * torch.exp2(torch.round(torch.log2(s.abs())))
                                            for s in g.scales))  # wide, powers of two
    with torch.no_grad():
        torch.testing.assert_close(model(symmetry.act(g, weights)), model(weights),
                                   rtol=DENORMAL_RTOL, atol=DENORMAL_RTOL)


@pytest.mark.parametrize("space_name", sorted(SPACES))
def test_model_negative_controls(space_name):
    """Sign variant and NP under scalings change; so does the model when the last bias changes."""
    scale = _symmetry(space_name, "scale")
    weights = _random_batch(scale, 4, 0)
    g = scale.sample(torch.Generator().manual_seed(7), batch_size=4)
    features = WeightSpaceFeatures.from_weight_batch(weights)
    L = features.description.num_layers
    hidden = torch.randperm(features.description.layers[L - 2].n_out, generator=torch.Generator().manual_seed(7))
    uncoupled = _uncouple(features, L - 2, hidden).to_weight_batch(scale.space)
    # b_L is read whole (it is invariant): moving it must move the output.
    shifted = WeightSpaceFeatures(features.description, features.weights,
                                  (*features.biases[:-1], features.biases[-1] + 1.0)).to_weight_batch(scale.space)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        np_model = create_model("np", scale.space, channels=(4, 3), hidden_sizes=(16,)).eval()
    with torch.no_grad():
        for model in (_model(space_name, 0, group="sign"), np_model):
            assert (model(scale.act(g, weights)) - model(weights)).abs().max() > 1e-4
        sign_model = _model(space_name, 0, group="sign")
        assert (sign_model(uncoupled) - sign_model(weights)).abs().max() > 1e-4
        model = _model(space_name, 0)
        assert (model(shifted) - model(weights)).abs().max() > 1e-4


def test_preset_parameter_count_on_the_small_cnn(cnn_space):
    assert cnn_space.num_params == 4970
    model = create_model("monomial_nfn", cnn_space)
    assert model.config.channels == (16, 16, 5) and model.config.hidden_sizes == (200, 200)
    assert sum(p.numel() for p in model.parameters()) == 254_609
    assert sum(p.numel() for p in model.equivariant.parameters()) < sum(
        p.numel() for p in create_model("hnp", cnn_space).equivariant.parameters())


def test_unit_normalize_has_the_true_gradient_and_stays_finite_for_tiny_inputs():
    from nfn_models.layers.monomial import unit_normalize

    x = torch.randn(3, 5, 4, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda t: unit_normalize(t, dim=1), (x,))
    tiny = (torch.randn(2, 5, 3) * 1e-40).requires_grad_()  # denormal-sized features
    (unit_normalize(tiny, dim=1) * torch.randn(2, 5, 3)).sum().backward()
    assert torch.isfinite(tiny.grad).all()
    zero = torch.zeros(1, 5, 2, requires_grad=True)
    unit_normalize(zero, dim=1).sum().backward()
    assert torch.equal(zero.grad, torch.zeros_like(zero))


def test_monomial_nfn_trains_on_members_with_denormal_weights():
    """Autograd's own chain through x / peak gave NaN gradients for such members (found on the demo zoo)."""
    from zoo.families import create_family
    from zoo.weightspace import WeightBatch

    from nfn_models import create_model

    space = create_family("cnn").weight_space({"in_channels": 1, "channels": 16, "num_conv_layers": 3,
                                               "kernel_size": 3, "stride": 2, "num_classes": 10})
    generator = torch.Generator().manual_seed(0)
    tensors = []
    for spec in space.tensors:
        values = torch.randn(8, *spec.shape, generator=generator)
        tiny = torch.rand(values.shape, generator=generator) < 0.3
        tensors.append(torch.where(tiny, values * 1e-42, values))
    batch = WeightBatch(space, tuple(tensors))
    for group in ("scale", "sign"):
        torch.manual_seed(0)
        model = create_model("monomial_nfn", space, group=group, channels=(4, 4))
        model(batch).square().mean().backward()
        assert all(torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None), group


@pytest.mark.parametrize("seed", SEEDS)
def test_sign_model_with_one_final_channel_tells_members_apart(seed):
    """The INR classifier's stack ends in one channel: its pooled features must still vary.

    The sign group has no positive factor to normalize away, so its pool is HNP's; the negative
    control is the scaling group's `MonomialPool` on the same |.| features, which maps every
    1-channel entry to 1 and so gives every member the same features (the model then predicts
    one class whatever the SIREN: the bug this guards).
    """
    symmetry = _symmetry("siren")
    model = create_model("monomial_nfn", symmetry.space, group="sign", channels=(4, 1), hidden_sizes=(16,),
                         out_features=3)
    batch = _random_batch(symmetry, size=6, seed=seed)
    with torch.no_grad():
        features = model.equivariant(WeightSpaceFeatures.from_weight_batch(batch, model.description))
        pooled = model.pool(features)
        scale_pooled = MonomialPool(model.description, 1)(features)
    # members differ beyond b_L (the last feature, kept whole by both pools)
    assert pooled[:, :-1].std(dim=0).min() > 1e-4
    # the negative control: normalized 1-vectors are all 1 (the pool's affine then is the same map)
    torch.testing.assert_close(scale_pooled[:, :-1], scale_pooled[:1, :-1].expand_as(scale_pooled[:, :-1]))
