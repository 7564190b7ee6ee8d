"""The Transformer family's symmetry group: function preservation on real MNIST images and AG News
articles, the group laws, and negative controls for every part that is NOT a symmetry."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from zoo.families import create_family
from zoo.planning.spec import load_spec
from zoo.symmetry.attention import AttentionSymmetry
from zoo.weightspace import WeightBatch

TOLERANCE = 1e-4  # max |logit change| in float32; logits are O(1-10), the observed error ~3e-6
BROKEN = 100 * TOLERANCE  # what a non-symmetry must change the logits by, at least
MEMBERS = 3


@pytest.fixture(scope="module")
def inputs() -> dict[str, tuple[dict, torch.Tensor]]:
    """Architecture and 64 real test inputs of each data set (AG News as padded WordPiece ids)."""
    family = create_family("transformer")
    found = {}
    for name in ("transformer-mnist", "transformer-agnews"):
        spec = load_spec(name, "tiny")
        found[name] = (spec.architecture, family.load_data(spec).test.x[:64])
    return found


def members(architecture: dict, seed: int) -> WeightBatch:
    """Random members (std 0.3: attention far from uniform, ReLUs half active)."""
    family = create_family("transformer")
    generator = torch.Generator().manual_seed(seed)
    space = family.weight_space(architecture)
    return WeightBatch(space, tuple(0.3 * torch.randn(MEMBERS, *t.shape, generator=generator) for t in space.tensors))


def outputs(architecture: dict, weights: WeightBatch, x: torch.Tensor) -> torch.Tensor:
    family = create_family("transformer")
    logits = []
    for i in range(len(weights)):
        model = family.build(architecture).eval()
        model.load_state_dict(weights.state_dict(i))
        with torch.no_grad():
            logits.append(model(x))
    return torch.stack(logits)  # (members, examples, classes)


def change(architecture: dict, before: WeightBatch, after: WeightBatch, x: torch.Tensor) -> float:
    return (outputs(architecture, after, x) - outputs(architecture, before, x)).abs().max().item()


def replace(weights: WeightBatch, **tensors: torch.Tensor) -> WeightBatch:
    index = {name: i for i, name in enumerate(weights.space.names)}
    values = list(weights.tensors)
    for name, tensor in tensors.items():
        values[index[name.replace("__", ".")]] = tensor
    return WeightBatch(weights.space, tuple(values))


@pytest.mark.parametrize("name, residual", [("transformer-mnist", False), ("transformer-mnist", True),
                                            ("transformer-agnews", False)])
def test_random_group_elements_preserve_the_function(inputs, name, residual):
    architecture, x = inputs[name]
    architecture = {**architecture, "residual": residual}
    symmetry = create_family("transformer").symmetry(architecture, {})
    weights = members(architecture, seed=1)
    element = symmetry.sample(torch.Generator().manual_seed(2), MEMBERS)
    moved = symmetry.act(element, weights)
    changed = {n for n, p, q in zip(weights.space.names, moved.tensors, weights.tensors) if not torch.allclose(p, q)}
    acted_on = {f"encoder.{b}.{n}" for b in range(2) for n in ("attention.queries.weight", "attention.keys.weight",
                "attention.values.weight", "attention.out_projection.weight", "fc1.weight", "fc1.bias", "fc2.weight")}
    assert acted_on <= changed and not changed & {"classifier.fc1.bias", "classifier.fc2.weight", "classifier.fc2.bias"}
    assert change(architecture, weights, moved, x) < TOLERANCE
    # with residuals the model dimension is never permuted; without, it is (after attention and MLP)
    identity = torch.arange(32)
    permuted = [not torch.equal(p[0], identity) for p in element.attention_features + element.block_features]
    assert not any(permuted) if residual else all(permuted)


def test_the_papers_subgroup_has_no_scaling_or_block_output_permutation(inputs):
    architecture, x = inputs["transformer-mnist"]
    space = create_family("transformer").weight_space(architecture)
    paper = AttentionSymmetry(space, num_heads=2, mlp_scaling=False, permute_block_outputs=False)
    element = paper.sample(torch.Generator().manual_seed(3), MEMBERS)
    assert all(torch.equal(s, torch.ones_like(s)) for s in element.hidden_scales)
    assert all(torch.equal(p, torch.arange(32).expand(MEMBERS, 32)) for p in element.block_features)
    weights = members(architecture, seed=4)
    assert change(architecture, weights, paper.act(element, weights), x) < TOLERANCE


def test_the_permutation_subgroup_relabels_neurons_and_keeps_the_function(inputs):
    architecture, x = inputs["transformer-mnist"]
    space = create_family("transformer").weight_space(architecture)
    relabel = AttentionSymmetry(space, num_heads=2, mlp_scaling=False, permute_block_outputs=False,
                                permutations_only=True)
    element = relabel.sample(torch.Generator().manual_seed(7), MEMBERS)
    for matrices in element.query_key + element.value_output:  # one 1 in every row and column
        assert torch.equal(matrices.sum(-1), torch.ones_like(matrices[..., 0]))
        assert set(matrices.unique().tolist()) == {0, 1}
        assert not torch.equal(matrices, torch.eye(16, dtype=torch.float64).expand_as(matrices))
    weights = members(architecture, seed=8)
    moved = relabel.act(element, weights)
    # a relabelling only reorders: every tensor holds the same multiset of values
    assert all(torch.equal(p.flatten(1).sort(1).values, q.flatten(1).sort(1).values)
               for p, q in zip(moved.tensors, weights.tensors))
    assert change(architecture, weights, moved, x) < TOLERANCE
    # negative control: the same element with the keys relabelled apart from the queries
    keys = "encoder.0.attention.keys.weight"
    index = weights.space.names.index(keys)
    shuffled = moved.tensors[index][:, torch.randperm(32, generator=torch.Generator().manual_seed(9))]
    assert change(architecture, weights, replace(moved, **{keys.replace(".", "__"): shuffled}), x) > BROKEN


def test_group_laws():
    architecture = dataclasses.asdict(create_family("transformer").Architecture())
    symmetry = create_family("transformer").symmetry(architecture, {})
    generator = torch.Generator().manual_seed(5)
    weights = members(architecture, seed=6).to(torch.float64)
    a, b = symmetry.sample(generator, MEMBERS), symmetry.sample(generator, MEMBERS)

    def distance(x: WeightBatch, y: WeightBatch) -> float:
        return max((p - q).abs().max().item() for p, q in zip(x.tensors, y.tensors))

    assert distance(symmetry.act(symmetry.compose(a, b), weights), symmetry.act(a, symmetry.act(b, weights))) < 1e-10
    assert distance(symmetry.act(symmetry.inverse(a), symmetry.act(a, weights)), weights) < 1e-10
    assert distance(symmetry.act(symmetry.compose(symmetry.inverse(a), a), weights), weights) < 1e-10
    assert distance(symmetry.act(symmetry.identity(MEMBERS), weights), weights) == 0
    assert distance(symmetry.act(symmetry.compose(a, b), weights), symmetry.act(symmetry.compose(b, a), weights)) > 1e-3
    # each member gets its own element, and the GL factors are well conditioned (<= 4)
    assert not torch.equal(a.query_key[0][0], a.query_key[0][1])
    assert torch.linalg.cond(torch.cat(a.query_key + a.value_output)).max() <= 4 + 1e-9


# --- negative controls: each broken variant must change the outputs -------------------------------

def test_query_transform_without_the_matching_key_inverse_changes_outputs(inputs):
    architecture, x = inputs["transformer-mnist"]
    symmetry = create_family("transformer").symmetry(architecture, {})
    weights = members(architecture, seed=7)
    element = symmetry.sample(torch.Generator().manual_seed(8), MEMBERS)
    moved = symmetry.act(element, weights)
    half = replace(weights, encoder__0__attention__queries__weight=moved.tensors[2])  # Q moved, K not
    assert change(architecture, weights, half, x) > BROKEN
    # the same with the heads left in place: only M, and K without M^{-T}
    fixed_heads = dataclasses.replace(symmetry.identity(MEMBERS), query_key=element.query_key)
    q_only = replace(weights, encoder__0__attention__queries__weight=symmetry.act(fixed_heads, weights).tensors[2])
    assert change(architecture, weights, q_only, x) > BROKEN


@pytest.mark.parametrize("part", ["attention_features", "block_features"])
def test_model_dimension_permutations_break_a_residual_model(inputs, part):
    architecture, x = inputs["transformer-mnist"]
    architecture = {**architecture, "residual": True}
    space = create_family("transformer").weight_space(architecture)
    without = AttentionSymmetry(space, num_heads=2, residual=False)  # the group of the residual-free model
    element = without.sample(torch.Generator().manual_seed(9), MEMBERS)
    only = dataclasses.replace(without.identity(MEMBERS), **{part: getattr(element, part)})
    weights = members(architecture, seed=10)
    assert change(architecture, weights, without.act(only, weights), x) > BROKEN
    assert change({**architecture, "residual": False}, weights, without.act(only, weights), x) < TOLERANCE


def test_scaling_a_model_dimension_feature_breaks_the_layer_norm(inputs):
    architecture, x = inputs["transformer-mnist"]
    weights = members(architecture, seed=11)
    scale = torch.exp(torch.linspace(-0.7, 0.7, 32))  # positive, as valid for the MLP units
    out = weights.tensors[weights.space.names.index("encoder.0.attention.out_projection.weight")]
    fc1 = weights.tensors[weights.space.names.index("encoder.0.fc1.weight")]
    scaled = replace(weights, encoder__0__attention__out_projection__weight=out * scale[:, None],
                     encoder__0__fc1__weight=fc1 / scale)
    assert change(architecture, weights, scaled, x) > BROKEN


def test_negative_scales_of_the_relu_units_change_outputs(inputs):
    architecture, x = inputs["transformer-mnist"]
    symmetry = create_family("transformer").symmetry(architecture, {})
    weights = members(architecture, seed=12)
    identity = symmetry.identity(MEMBERS)
    flipped = dataclasses.replace(identity, hidden_scales=tuple(-s for s in identity.hidden_scales))
    assert change(architecture, weights, symmetry.act(flipped, weights), x) > BROKEN


def test_permuting_the_embedding_features_fails_because_of_the_positional_encoding(inputs):
    architecture, x = inputs["transformer-mnist"]
    weights = members(architecture, seed=13)
    permutation = torch.randperm(32, generator=torch.Generator().manual_seed(14))
    names = weights.space.names
    moved = {"embedding__conv1__weight": weights.tensors[names.index("embedding.conv1.weight")][:, permutation],
             "embedding__conv1__bias": weights.tensors[names.index("embedding.conv1.bias")][:, permutation]}
    for m in ("queries", "keys", "values"):
        moved[f"encoder__0__attention__{m}__weight"] = weights.tensors[names.index(f"encoder.0.attention.{m}.weight")][
            :, :, permutation]
    assert change(architecture, weights, replace(weights, **moved), x) > BROKEN
    # the same permutation is a symmetry once the positional encoding is permuted with it
    model = create_family("transformer").build(architecture).eval()
    model.positional_encoding = model.positional_encoding[:, permutation]
    reference = outputs(architecture, weights, x)
    with torch.no_grad():
        model.load_state_dict(replace(weights, **moved).state_dict(0))
        assert (model(x) - reference[0]).abs().max() < TOLERANCE
