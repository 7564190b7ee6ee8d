"""The neural graph of transformer members (`nfn_models.transformer_graph`): where each weight sits,
that the neuron relabellings of `zoo.symmetry.attention` are exactly relabellings of its nodes, and
that a graph model reads it (NG-GNN's claims on it are checked over the registry in test_exactness)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from nfn_models import create_model
from nfn_models.transformer_graph import TransformerGraphLayout, graph_layout
from zoo.families import create_family
from zoo.weightspace import WeightBatch

MNIST = {"d_model": 32, "num_blocks": 2, "num_heads": 2, "head_dim": 16, "mlp_dim": 64}
RESIDUAL = {"image_size": 8, "patch_size": 4, "d_model": 8, "num_blocks": 3, "num_heads": 4, "head_dim": 2,
            "mlp_dim": 12, "num_classes": 3, "residual": True}


def members(architecture: dict, size: int, seed: int) -> WeightBatch:
    space = create_family("transformer").weight_space(architecture)
    generator = torch.Generator().manual_seed(seed)
    return WeightBatch(space, tuple(torch.randn(size, *t.shape, generator=generator) for t in space.tensors))


def layout_of(architecture: dict, reverse_edges: bool = False) -> TransformerGraphLayout:
    space = create_family("transformer").weight_space(architecture)
    return TransformerGraphLayout(space, architecture["num_heads"], architecture.get("residual", False), reverse_edges)


def adjacency(layout: TransformerGraphLayout, weights: WeightBatch) -> tuple[torch.Tensor, torch.Tensor]:
    nodes, edges = layout.features(weights)
    source, target = layout.edge_index
    dense = edges.new_zeros(len(weights), layout.num_nodes, layout.num_nodes, edges.shape[-1])
    dense[:, source, target] = edges
    return nodes, dense


def test_each_weight_sits_on_its_edge_and_the_attention_product_on_fixed_ones():
    layout, weights = layout_of(MNIST), members(MNIST, 2, seed=0)
    tensors = dict(zip(weights.space.names, weights.tensors))
    nodes, dense = adjacency(layout, weights)
    # inputs 1, stream 32, per block q/k/v 32 each, attention outputs 32, MLP 64, outputs 32; classifier 32 + 10
    assert layout.num_nodes == 1 + 32 + 2 * (3 * 32 + 32 + 64 + 32) + 32 + 10 and layout.num_outputs == 10
    stream, queries = 1, 33
    keys, values, attended = queries + 32, queries + 64, queries + 96
    centre = 5  # a dense weight sits where a 1 x 1 kernel is padded into the 4 x 4 patch kernel
    assert torch.equal(dense[:, 0, stream + 3], tensors["embedding.conv1.weight"][:, 3, 0].flatten(1))
    assert torch.equal(nodes[:, stream + 3, 0], tensors["embedding.conv1.bias"][:, 3])
    assert torch.equal(dense[:, stream + 7, keys + 20, centre], tensors["encoder.0.attention.keys.weight"][:, 20, 7])
    assert torch.equal(dense[:, values + 9, attended + 4, centre],
                       tensors["encoder.0.attention.out_projection.weight"][:, 4, 9])
    assert not dense[:, :, :, [i for i in range(16) if i != centre]][:, 1:].any()  # only the conv has kernels
    # the score pairs query i with key i; head 0's keys reach head 0's values only
    assert dense[:, queries + 17, keys + 17, centre].eq(1).all() and not dense[:, queries + 17, keys + 18].any()
    assert dense[:, keys + 3, values + 15, centre].eq(1).all() and not dense[:, keys + 3, values + 16].any()
    assert dense[:, keys + 20, values + 16:values + 32, centre].eq(1).all()
    assert not dense[:, stream:stream + 32, attended:attended + 32].any()  # no residual edges without residuals
    with_residual = layout_of(RESIDUAL)
    _, residual = adjacency(with_residual, members(RESIDUAL, 1, seed=1))
    # nodes: the input, the stream (8), queries, keys and values (8 each), then the attention's outputs
    assert residual[0, 1 + 2, 1 + 8 + 24 + 2, 5] == 1  # stream neuron 2 -> the same neuron after attention
    assert not residual[0, 1 + 2, 1 + 8 + 24 + 3].any()


def test_positions_are_shared_exactly_where_relabellings_act():
    layout = layout_of(MNIST)
    position = layout.node_position
    groups = [1, 32, 32, 32, 32, 32, 64, 32, 32, 32, 32, 32, 64, 32, 32, 10]
    shared = [False, False, True, True, True, True, True, False, True, True, True, True, True, False, True, False]
    start = 0
    for size, is_shared in zip(groups, shared):
        assert len(set(position[start:start + size].tolist())) == (1 if is_shared else size)
        start += size
    assert layout.num_positions == len(set(position.tolist()))
    residual = layout_of(RESIDUAL)  # with residuals the attention outputs are fixed: one position each
    assert len(set(residual.node_position[1 + 8 + 24:1 + 8 + 32].tolist())) == 8


def relabelling(element, layout: TransformerGraphLayout, member: int) -> torch.Tensor:
    """old[new node]: the graph node each node of the moved member comes from (`permutations_only`)."""
    old = torch.arange(layout.num_nodes)
    by_weight = {c.weight_name: c for c in layout.connections}
    for b in range(layout.num_blocks):
        queries = by_weight[f"encoder.{b}.attention.queries.weight"]
        keys = by_weight[f"encoder.{b}.attention.keys.weight"]
        values = by_weight[f"encoder.{b}.attention.values.weight"]
        heads, d_k = element.query_key[b].shape[1], element.query_key[b].shape[2]
        d_v = element.value_output[b].shape[2]
        tau = element.heads[b][member]
        for h in range(heads):
            rows = element.query_key[b][member, h].argmax(1)  # new row r of head h = old row rows[r] of tau(h)
            for first in (queries.target, keys.target):
                old[first + h * d_k:first + (h + 1) * d_k] = first + tau[h] * d_k + rows
            columns = element.value_output[b][member, h].argmax(0)  # N^T: new row r = old row argmax_s N[s, r]
            old[values.target + h * d_v:values.target + (h + 1) * d_v] = values.target + tau[h] * d_v + columns
        out = by_weight[f"encoder.{b}.attention.out_projection.weight"]
        old[out.target:out.target + out.n_out] = out.target + element.attention_features[b][member]
        fc1 = by_weight[f"encoder.{b}.fc1.weight"]
        old[fc1.target:fc1.target + fc1.n_out] = fc1.target + element.hidden_units[b][member]
    return old


@pytest.mark.parametrize("architecture", [MNIST, RESIDUAL], ids=["mnist", "residual"])
def test_a_neuron_relabelling_of_the_member_relabels_the_graphs_nodes(architecture):
    family = create_family("transformer")
    symmetry = dataclasses.replace(family.symmetry(architecture, {}), mlp_scaling=False,
                                   permute_block_outputs=False, permutations_only=True)
    weights = members(architecture, 2, seed=2)
    element = symmetry.sample(torch.Generator().manual_seed(3), 2)
    layout = layout_of(architecture, reverse_edges=True)
    nodes, dense = adjacency(layout, weights)
    moved_nodes, moved_dense = adjacency(layout, symmetry.act(element, weights))
    for member in range(2):
        old = relabelling(element, layout, member)
        assert torch.equal(layout.node_position[old], layout.node_position)  # moves stay within a group
        assert torch.equal(moved_nodes[member], nodes[member, old])
        assert torch.equal(moved_dense[member], dense[member][old][:, old])
        assert not torch.equal(moved_dense[member], dense[member])
    # the control: the paper's group with invertible (not permutation) M_i is no relabelling
    general = dataclasses.replace(symmetry, permutations_only=False).sample(torch.Generator().manual_seed(3), 2)
    _, general_dense = adjacency(layout, symmetry.act(general, weights))
    values = lambda d: d[0].flatten().abs().sort().values  # noqa: E731  (a relabelling keeps the multiset)
    assert torch.equal(values(moved_dense), values(dense)) and not torch.equal(values(general_dense), values(dense))


def test_to_weights_reads_back_what_the_graph_holds():
    layout, weights = layout_of(RESIDUAL), members(RESIDUAL, 3, seed=4)
    nodes, edges = layout.features(weights)
    back = layout.to_weights(weights.space, nodes.squeeze(-1), edges)
    assert all(torch.equal(a, b) for a, b in zip(back.tensors, weights.tensors))
    shifted = layout.to_weights(weights.space, nodes.squeeze(-1), edges.roll(1, dims=1))
    assert not all(torch.equal(a, b) for a, b in zip(shifted.tensors, weights.tensors))


def test_a_head_count_that_does_not_fit_the_members_is_refused():
    space = create_family("transformer").weight_space(MNIST)
    with pytest.raises(ValueError, match="num_heads 3 does not divide the members' query width 32"):
        TransformerGraphLayout(space, num_heads=3)
    assert isinstance(graph_layout(space, num_heads=2), TransformerGraphLayout)


def test_ng_gnn_reads_transformer_members_through_the_graph_and_pools_every_node():
    weights = members(MNIST, 3, seed=5)
    model = create_model("ng_gnn", weights.space, hidden_dim=8, num_heads=2)
    assert model.symmetries == ("attention-permutation",) and model.pool_nodes
    assert model(weights).shape == (3, 1)
    edited = create_model("ng_gnn", weights.space, hidden_dim=8, num_heads=2, output="weights")(weights)
    assert edited.space == weights.space and all(a.shape == b.shape for a, b in zip(edited.tensors, weights.tensors))


def test_gmn_reads_transformer_members_and_scalegmns_feedforward_modes_are_refused_there():
    weights = members(MNIST, 2, seed=6)
    gmn = create_model("scalegmn", weights.space, preset="transformer-generalization-budget", num_heads=2)
    assert gmn.symmetries == ("attention-permutation",) and gmn.pool_nodes and gmn(weights).shape == (2, 1)
    for mode in ("scale", "sign"):
        with pytest.raises(ValueError,
                           match=f"in mode 'permutation' \\(GMN\\) without edge positions; got mode '{mode}'"):
            create_model("scalegmn", weights.space, mode=mode, hidden_dim=8)
