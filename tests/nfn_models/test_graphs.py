"""The neural graph of a checkpoint (`nfn_models.graphs`) and NG-GNN on it (`nfn_models.ng_gnn`).

NG-GNN's claims (hidden-neuron permutations exact, scalings and sign flips not) are checked with
every other model's in `test_exactness.py`; here: the graph holds the right numbers in the right
places, a hidden-neuron permutation of the weights is a relabelling of the graph's nodes, and the
model does not depend on the graph's edge order.
"""

from __future__ import annotations

import pytest
import torch

from nfn_models import create_model, model_config
from nfn_models.features import NetworkDescription
from nfn_models.graphs import NeuralGraphLayout, neural_graphs
from zoo.symmetry.feedforward import FeedforwardSymmetry
from zoo.weightspace import WeightSpace

SIREN_SHAPES = {"sine1.weight": (5, 2), "sine1.bias": (5,), "sine2.weight": (4, 5), "sine2.bias": (4,),
                "output.weight": (1, 4), "output.bias": (1,)}


@pytest.fixture(scope="module")
def siren_space() -> WeightSpace:
    return WeightSpace.from_state_dict({name: torch.zeros(shape) for name, shape in SIREN_SHAPES.items()})


def dense_graphs(graphs, layout: NeuralGraphLayout) -> tuple[torch.Tensor, torch.Tensor]:
    """Per member: node features (B, N, 1) and the adjacency of edge features (B, N, N, f)."""
    members, n = graphs.num_graphs, layout.num_nodes
    member = graphs.batch[graphs.edge_index[0]]
    source, target = graphs.edge_index - member * n
    adjacency = torch.zeros(members, n, n, graphs.edge_attr.shape[-1])
    adjacency[member, source, target] = graphs.edge_attr
    return graphs.x.view(members, n, -1), adjacency


def test_a_cnn_graph_holds_biases_on_nodes_and_kernels_on_edges(cnn_space, random_batch):
    weights = random_batch(cnn_space, 3, seed=0)
    tensors = dict(zip(cnn_space.names, weights.tensors))
    layout = NeuralGraphLayout(NetworkDescription.from_weight_space(cnn_space))
    graphs = layout.batch(weights)
    nodes, adjacency = dense_graphs(graphs, layout)
    assert layout.num_nodes == 1 + 16 + 16 + 16 + 10 and graphs.num_graphs == 3
    assert graphs.edge_index.shape == (2, 3 * (16 + 256 + 256 + 160)) and graphs.edge_attr.shape[-1] == 9
    first, second, third, outputs = 1, 17, 33, 49  # the node offsets of the unit axes
    assert torch.equal(nodes[:, 0, 0], torch.zeros(3))  # the input neuron has no bias
    assert torch.equal(nodes[:, second + 4, 0], tensors["conv2.bias"][:, 4])
    assert torch.equal(adjacency[:, first + 2, second + 7], tensors["conv2.weight"][:, 7, 2].flatten(1))
    dense = adjacency[:, third + 5, outputs + 9]  # a dense weight is a 1 x 1 kernel, centred in 3 x 3
    assert torch.equal(dense[:, 4], tensors["dense.weight"][:, 9, 5]) and not dense[:, [0, 1, 2, 3, 5, 6, 7, 8]].any()
    assert not adjacency[:, second + 7, first + 2].any()  # edges run forward only
    assert layout.in_degree_histogram.tolist()[:2] == [1, 16] and layout.in_degree_histogram[16] == 42


def test_reverse_edges_carry_forward_backward_and_sum_blocks(siren_space, random_batch):
    weights = random_batch(siren_space, 2, seed=1)
    layout = NeuralGraphLayout(NetworkDescription.from_weight_space(siren_space), reverse_edges=True)
    _, adjacency = dense_graphs(layout.batch(weights), layout)
    w = weights.tensors[2][:, 3, 1]  # sine2.weight[3, 1]: node 2 + 1 -> node 7 + 3
    assert torch.equal(adjacency[:, 3, 10], torch.stack([w, torch.zeros_like(w), w], dim=-1))
    assert torch.equal(adjacency[:, 10, 3], torch.stack([torch.zeros_like(w), w, w], dim=-1))


def test_positions_distinguish_inputs_and_outputs_but_not_a_hidden_layers_neurons(siren_space):
    layout = NeuralGraphLayout(NetworkDescription.from_weight_space(siren_space))
    assert layout.node_position.tolist() == [0, 1, *[2] * 5, *[3] * 4, 4]
    assert layout.num_positions == 5


@pytest.mark.parametrize("space_name", ["cnn", "siren"])
def test_a_hidden_neuron_permutation_relabels_the_graphs_nodes(space_name, cnn_space, siren_space, random_batch):
    space = cnn_space if space_name == "cnn" else siren_space
    weights = random_batch(space, 4, seed=2)
    symmetry = FeedforwardSymmetry(space)
    element = symmetry.sample(torch.Generator().manual_seed(3), batch_size=4)
    layout = NeuralGraphLayout(NetworkDescription.from_weight_space(space), reverse_edges=True)
    nodes, adjacency = dense_graphs(layout.batch(weights), layout)
    moved_nodes, moved_adjacency = dense_graphs(layout.batch(symmetry.act(element, weights)), layout)
    offsets = layout.node_offsets  # new node of hidden axis l + 1 at i is old node permutations[l][:, i]
    old = torch.arange(layout.num_nodes).repeat(4, 1)
    for axis, permutation in enumerate(element.permutations, start=1):
        old[:, offsets[axis]:offsets[axis + 1]] = permutation + offsets[axis]
    member = torch.arange(4).view(4, 1)
    assert torch.equal(moved_nodes, nodes[member, old])
    assert torch.equal(moved_adjacency, adjacency[member.unsqueeze(-1), old.unsqueeze(-1), old.unsqueeze(1)])
    assert not torch.equal(moved_adjacency, adjacency)  # the permutation did move something


@pytest.mark.parametrize("space_name", ["cnn", "siren"])
def test_to_weights_reads_back_what_the_graph_holds(space_name, cnn_space, siren_space, random_batch):
    """A weight output is node and edge values put back (`to_weights`): the graph's own features give
    the member again, bit for bit; the same values one edge along give other weights (the control)."""
    space = cnn_space if space_name == "cnn" else siren_space
    weights = random_batch(space, 3, seed=4)
    layout = NeuralGraphLayout(NetworkDescription.from_weight_space(space))
    nodes, edges = layout.features(weights)
    back = layout.to_weights(space, nodes.squeeze(-1), edges)
    assert back.space == space and all(torch.equal(a, b) for a, b in zip(back.tensors, weights.tensors))
    shifted = layout.to_weights(space, nodes.squeeze(-1), edges.roll(1, dims=1))
    assert not all(torch.equal(a, b) for a, b in zip(shifted.tensors, weights.tensors))


def test_ng_gnn_does_not_depend_on_the_graphs_edge_order(cnn_space, random_batch):
    torch.manual_seed(0)
    model = create_model("ng_gnn", cnn_space, hidden_dim=8, fourier_features=8).eval()
    graphs = neural_graphs(random_batch(cnn_space, 3, seed=4))
    order = torch.randperm(graphs.edge_index.shape[1], generator=torch.Generator().manual_seed(5))
    shuffled = graphs.clone()
    shuffled.edge_index, shuffled.edge_attr = graphs.edge_index[:, order], graphs.edge_attr[order]
    shuffled.edge_layer = graphs.edge_layer[order]
    with torch.no_grad():
        torch.testing.assert_close(model.forward_graphs(shuffled), model.forward_graphs(graphs), rtol=1e-5, atol=1e-5)


def test_ng_gnn_presets_carry_the_authors_settings(cnn_space, siren_space, random_batch):
    assert model_config("ng_gnn").hidden_dim == 256 and model_config("ng_gnn").num_layers == 4
    inr = model_config("ng_gnn", preset="inr-classification")
    assert (inr.hidden_dim, inr.reverse_edges, inr.dropout, inr.out_features) == (32, True, 0.2, 10)
    model = create_model("ng_gnn", siren_space, preset="inr-classification").eval()
    assert model.dense_edge_encoder is None  # an all-dense network needs no separate dense-edge encoder
    with torch.no_grad():
        assert model(random_batch(siren_space, 2, seed=6)).shape == (2, 10)
    assert create_model("ng_gnn", cnn_space, hidden_dim=8).dense_edge_encoder is not None  # conv + dense
