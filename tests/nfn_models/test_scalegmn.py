"""ScaleGMN beyond the registry-wide checks: the scale canonicalisation, each mode's claims and
negative controls (the registry's `test_exactness.py` checks the default mode, "scale"), and the
edge positions. Small widths (`benchmarks.check_model`'s: hidden_dim 8), one seed each."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from benchmarks.check_model import (EQUIVARIANT_MOVES, MOVES, RTOL, build_model, check_denormal, check_equivariance,
                                    check_invariance, random_weights, symmetry)
from nfn_models import create_model
from nfn_models.features import NetworkDescription
from nfn_models.scalegmn import FLOOR, canonical_scale, edge_positions
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightBatch

INR_SETTINGS = {"io_mlp": False, "skip_connections": True, "edge_positions": True}  # the inr-classification preset's


def _relu_network(weights: WeightBatch, inputs: torch.Tensor) -> torch.Tensor:
    """A dense member's function (B, n_0) -> (B, n_L) with ReLU between layers, member by member."""
    description = NetworkDescription.from_weight_space(weights.space)
    tensors = dict(zip(weights.space.names, weights.tensors))
    hidden = inputs.expand(len(weights), *inputs.shape).clone()  # (B, P, n_0)
    for i, layer in enumerate(description.layers):
        hidden = hidden @ tensors[layer.weight_name].transpose(1, 2) + tensors[layer.bias_name].unsqueeze(1)
        if i < len(description.layers) - 1:
            hidden = hidden.relu()
    return hidden


def test_the_canonical_scale_keeps_a_relu_members_function_and_forgets_its_scalings():
    acting = symmetry("siren", "scale")  # a dense 2-32-32-1 member, positive scalings in [1e-3, 1e3]
    description = NetworkDescription.from_weight_space(acting.space)
    weights = random_weights(acting.space, 3, seed=0)
    canonical = canonical_scale(weights, description)
    inputs = torch.randn(5, 2, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(_relu_network(canonical, inputs), _relu_network(weights, inputs), rtol=1e-5, atol=1e-5)
    tensors = dict(zip(canonical.space.names, canonical.tensors))
    for layer in description.layers[:-1]:  # every hidden neuron: incoming weights and bias of norm 1
        incoming = torch.cat([tensors[layer.weight_name], tensors[layer.bias_name].unsqueeze(-1)], dim=-1)
        torch.testing.assert_close(incoming.norm(dim=-1), torch.ones(3, layer.n_out))
    g = acting.sample(torch.Generator().manual_seed(1), batch_size=3)
    moved = canonical_scale(acting.act(g, weights), description)
    unscaled = dataclasses.replace(g, scales=tuple(torch.ones_like(s) for s in g.scales))
    for a, b in zip(moved.tensors, acting.act(unscaled, canonical).tensors):  # only the permutation is left
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


def test_the_canonical_scale_zeroes_entries_below_the_floor_and_keeps_dead_neurons_at_zero():
    acting = symmetry("siren", "scale")
    description = NetworkDescription.from_weight_space(acting.space)
    weights = random_weights(acting.space, 2, seed=1, denormal=True)
    tensors = list(weights.tensors)
    tensors[0][0, 3], tensors[1][0, 3] = 0.0, 0.0  # member 0, first-layer neuron 3: no input, no bias
    canonical = canonical_scale(WeightBatch(weights.space, tuple(tensors)), description)
    for tensor in canonical.tensors:
        assert torch.isfinite(tensor).all()
        assert not ((tensor != 0) & (tensor.abs() < FLOOR)).any()
    assert (canonical.tensors[0][0, 3] == 0).all() and canonical.tensors[1][0, 3] == 0


def test_without_the_canonical_scale_denormal_members_break_the_scale_claim():
    """The negative control of the canonicalisation: the edge update's x / ||x|| of a neuron whose
    only feature is a denormal bias is a step function of it, and the scaling itself rounds it."""
    model = build_model("scalegmn", "cnn-relu", 0)
    acting = symmetry("cnn-relu", "scale")
    weights = random_weights(acting.space, 4, seed=1, denormal=True)
    g = acting.sample(torch.Generator().manual_seed(2), batch_size=4)
    g = dataclasses.replace(g, scales=tuple(torch.exp2(torch.round(torch.log2(s))) for s in g.scales))
    moved = acting.act(g, weights)
    with torch.no_grad():
        raw = model.forward_graphs(model.layout.batch(moved)) - model.forward_graphs(model.layout.batch(weights))
        canonical = model(moved) - model(weights)
    assert raw.abs().max() > MOVES  # 1e-3 here: far outside the claim's RTOL (1e-5)
    assert canonical.abs().max() < RTOL


def test_the_scale_modes_weight_output_is_equivariant_once_put_back_at_the_members_scale(monkeypatch):
    """In mode "scale" the layers read canonicalised members, whose delta is invariant to scalings;
    `from_canonical_scale` moves it back to each member's scale, which makes it equivariant. Without
    that step the weight output ignores the scaling (the control)."""
    for space_name in ("cnn-relu", "siren"):
        check = check_equivariance("scalegmn", space_name, "scale", seeds=(0,), overrides={"mode": "scale"})
        assert check.claimed and check.verdict == "holds", check
    monkeypatch.setattr("nfn_models.scalegmn.from_canonical_scale", lambda delta, description, norms: delta)
    broken = check_equivariance("scalegmn", "cnn-relu", "scale", seeds=(0,), overrides={"mode": "scale"})
    assert broken.deviation > EQUIVARIANT_MOVES and broken.verdict != "holds", broken


@pytest.mark.parametrize("space_name", ["siren", "cnn-tanh"])
def test_sign_mode_is_exactly_sign_invariant_and_not_scale_invariant(space_name):
    overrides = {"mode": "sign", **INR_SETTINGS}
    for group, claimed in (("permutation", True), ("sign", True), ("scale", False)):
        check = check_invariance("scalegmn", space_name, group, seeds=(0,), overrides=overrides)
        assert check.claimed == claimed and check.verdict == ("holds" if claimed else "changes (not claimed)"), check
    denormal = check_denormal("scalegmn", space_name, "sign", overrides=overrides)
    assert denormal.claimed and not denormal.false_claim, denormal


def test_permutation_mode_is_gmn_invariant_to_permutations_only():
    for group, claimed in (("permutation", True), ("sign", False), ("scale", False)):
        check = check_invariance("scalegmn", "siren", group, seeds=(0,), overrides={"mode": "permutation"})
        assert check.claimed == claimed and check.verdict == ("holds" if claimed else "changes (not claimed)"), check


def test_edge_positions_follow_the_authors_edge_types():
    """First-layer edges by their input neuron, middle layers one per layer, last-layer edges by
    their output neuron (edges in `NeuralGraphLayout.edge_index` order: W[o, j] at o * n_in + j)."""
    description = NetworkDescription.from_weight_space(symmetry("cnn-relu", "scale").space)
    sizes = description.unit_sizes  # (1, 16, 16, 16, 10): conv1 from one input channel
    positions = edge_positions(description)
    counts = [layer.n_out * layer.n_in for layer in description.layers]
    first, second, third, last = torch.split(positions, counts)
    assert torch.equal(first, torch.zeros(counts[0], dtype=torch.long))
    assert set(second.tolist()) == {1} and set(third.tolist()) == {2}
    assert torch.equal(last, torch.arange(sizes[-1]).repeat_interleave(sizes[-2]) + 3)


def test_an_unknown_mode_is_a_clear_error():
    space = symmetry("siren", "scale").space
    with pytest.raises(SchemaError, match="mode"):
        create_model("scalegmn", space, mode="scaling")
