"""Our NP/HNP layers and pools compute the same function as the authors' `nfn==0.1.2`.

`nfn` (Zhou et al. 2023's own library, MIT) is a test-only oracle (the `nfn-reference`
extra): each of its parameters is copied into the matching term of ours by name, every one
of ours receives exactly one, and the outputs agree to float32 rounding on the SIREN
(2-32-32-1) and Small CNN (1-16-16-16-10, 3x3 kernels) weight spaces.
"""

from __future__ import annotations

import pytest
import torch

from nfn_models.features import NetworkDescription, WeightSpaceFeatures
from nfn_models.layers import HNPLinear, HNPPool, NPLinear, NPPool
from zoo.families import create_family

nfn_common = pytest.importorskip("nfn.common", reason="the nfn-reference extra is not installed")
nfn_layers = pytest.importorskip("nfn.layers")

SPACES = {"siren": ("inr", {}), "cnn": ("cnn", {})}
ATOL, RTOL = 1e-5, 1e-5  # float32; the two compute the same sums in different orders


def _description(space_name: str) -> NetworkDescription:
    family, architecture = SPACES[space_name]
    return NetworkDescription.from_weight_space(create_family(family).weight_space(architecture))


def _random_features(description: NetworkDescription, batch: int, channels: int, seed: int) -> WeightSpaceFeatures:
    generator = torch.Generator().manual_seed(seed)
    weights = tuple(torch.randn(batch, channels, layer.n_out, layer.n_in, *layer.kernel, generator=generator)
                    for layer in description.layers)
    biases = tuple(torch.randn(batch, channels, layer.n_out, generator=generator) for layer in description.layers)
    return WeightSpaceFeatures(description, weights, biases)


def _to_nfn(features: WeightSpaceFeatures):
    return nfn_common.WeightSpaceFeatures(list(features.weights), list(features.biases))


def _name_map(kind: str, num_layers: int) -> dict[str, tuple[int, str]]:
    """nfn module name -> (our layer index, our term name)."""
    mapping = {}
    for i in range(num_layers):
        mapping.update({f"layer_{i}": (i, "weight_self"), f"layer_{i}_rc": (i, "weight_global"),
                        f"layer_{i}_r": (i, "weight_by_in"), f"layer_{i}_c": (i, "weight_by_out"),
                        f"bias_{i}": (i, "bias_by_out"), f"bias_{i}_rc": (i, "bias_global")})
    if kind == "hnp":
        last = num_layers - 1
        for name in ("layer_0", "layer_0_rc", "layer_0_r", "layer_0_c", "bias_0", "bias_0_rc",
                     f"layer_{last}", f"layer_{last}_rc", f"layer_{last}_r", f"layer_{last}_c",
                     f"bias_{last}", f"bias_{last}_rc"):
            mapping.pop(name)
        mapping.update({"w0_rpt": (0, "weight_by_out"), "w0_rbdcst": (0, "weight_global"),
                        "bias_0": (0, "bias_by_out"), "bias_0_rc": (0, "bias_global"),
                        "wfin_cpt": (last, "weight_by_in"), "wfin_cbdcst": (last, "weight_global"),
                        "bias_fin_rc": (last, "bias_global")})
    return mapping


def _copy_parameters(theirs: torch.nn.Module, ours: torch.nn.Module, kind: str) -> None:
    """Copies every nfn parameter into ours; fails unless the two sets match one to one."""
    mapping = _name_map(kind, len(ours.terms))
    filled = set()
    with torch.no_grad():
        for name, module in theirs.named_children():
            if not list(module.parameters()):
                continue  # einops Rearrange modules
            index, term = mapping[name]
            target = ours.terms[index][term]
            assert target.weight.numel() == module.weight.numel(), name
            target.weight.copy_(module.weight.reshape(target.weight.shape))  # Conv1d/2d (o, i, 1[, 1]) -> (o, i)
            target.bias.copy_(module.bias)
            filled.add((index, term))
    expected = {(i, term) for i, terms in enumerate(ours.terms) for term in terms}
    assert filled == expected, f"ours without a reference parameter: {sorted(expected - filled)}"


def _num_params(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def _max_abs_diff(ours: WeightSpaceFeatures, theirs) -> float:
    diffs = [(a - b).abs().max() for a, b in zip((*ours.weights, *ours.biases), (*theirs.weights, *theirs.biases))]
    return float(torch.stack(diffs).max())


LAYERS = {"np": (NPLinear, "NPLinear"), "hnp": (HNPLinear, "HNPLinear")}


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("kind", sorted(LAYERS))
@pytest.mark.parametrize("in_channels, out_channels", [(1, 3), (2, 2)])
def test_layer_matches_the_reference(kind, space_name, in_channels, out_channels):
    description = _description(space_name)
    features = _random_features(description, batch=3, channels=in_channels, seed=0)
    ours_cls, their_name = LAYERS[kind]
    ours = ours_cls(description, in_channels, out_channels)
    theirs = getattr(nfn_layers, their_name)(nfn_common.network_spec_from_wsfeat(_to_nfn(features)),
                                             in_channels, out_channels)
    assert _num_params(ours) == _num_params(theirs)
    _copy_parameters(theirs, ours, kind)
    with torch.no_grad():
        out, reference = ours(features), theirs(_to_nfn(features))
    for a, b in zip((*out.weights, *out.biases), (*reference.weights, *reference.biases)):
        assert a.shape == b.shape
        torch.testing.assert_close(a, b, atol=ATOL, rtol=RTOL)
    assert _max_abs_diff(out, reference) < ATOL


POOLS = {"np": (NPPool, "NPPool"), "hnp": (HNPPool, "HNPPool")}


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("kind", sorted(POOLS))
def test_pool_matches_the_reference(kind, space_name):
    description = _description(space_name)
    features = _random_features(description, batch=3, channels=2, seed=1)
    ours_cls, their_name = POOLS[kind]
    spec = nfn_common.network_spec_from_wsfeat(_to_nfn(features))
    reference = getattr(nfn_layers, their_name)(spec)(_to_nfn(features)).flatten(1)
    pooled = ours_cls(description)(features)
    assert pooled.shape == (3, ours_cls.num_features(description, 2))
    assert ours_cls.num_features(description, 1) == getattr(nfn_layers, their_name).get_num_outs(spec)
    torch.testing.assert_close(pooled, reference, atol=ATOL, rtol=RTOL)


@pytest.mark.parametrize("kind", sorted(LAYERS))
def test_parameter_counts_at_the_preset_match(kind):
    """The [16, 16, 5] equivariant stack of the generalization preset on the Small CNN."""
    description = _description("cnn")
    spec = nfn_common.network_spec_from_wsfeat(_to_nfn(_random_features(description, 1, 1, seed=0)))
    ours_cls, their_name = LAYERS[kind]
    widths = [1, 16, 16, 5]
    ours = sum(_num_params(ours_cls(description, a, b)) for a, b in zip(widths, widths[1:]))
    theirs = sum(_num_params(getattr(nfn_layers, their_name)(spec, a, b)) for a, b in zip(widths, widths[1:]))
    assert ours == theirs
