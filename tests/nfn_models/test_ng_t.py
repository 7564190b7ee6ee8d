"""NG-T (`nfn_models.ng_t`): the dense neural graph, node relabelling, presets.

Its claims (hidden-neuron permutations exact, scalings and sign flips not) are checked with every
other model's in `test_exactness.py`; here: the dense graph holds each weight at (source, target),
relabelling a hidden layer's nodes of the graph leaves the output unchanged while relabelling the
output nodes does not (the negative control), and the presets carry the authors' settings.
"""

from __future__ import annotations

import pytest
import torch

from nfn_models import count_parameters, create_model, model_config
from nfn_models.features import NetworkDescription
from nfn_models.graphs import NeuralGraphLayout
from nfn_models.ng_t import dense_neural_graph
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightSpace

SIREN_SHAPES = {"sine1.weight": (5, 2), "sine1.bias": (5,), "sine2.weight": (4, 5), "sine2.bias": (4,),
                "output.weight": (3, 4), "output.bias": (3,)}
SMALL = {"hidden_dim": 8, "fourier_features": 8, "num_layers": 2, "num_heads": 2}


@pytest.fixture(scope="module")
def siren_space() -> WeightSpace:
    return WeightSpace.from_state_dict({name: torch.zeros(shape) for name, shape in SIREN_SHAPES.items()})


def test_the_dense_graph_holds_each_weight_from_its_source_to_its_target(siren_space, random_batch):
    weights = random_batch(siren_space, 2, seed=0)
    layout = NeuralGraphLayout(NetworkDescription.from_weight_space(siren_space), reverse_edges=True)
    nodes, edges = dense_neural_graph(layout, weights)
    assert nodes.shape == (2, 14, 1) and edges.shape == (2, 14, 14, 3)
    w = weights.tensors[2][:, 3, 1]  # sine2.weight[3, 1]: node 2 + 1 -> node 7 + 3
    assert torch.equal(edges[:, 3, 10], torch.stack([w, torch.zeros_like(w), w], dim=-1))
    assert torch.equal(edges[:, 10, 3], torch.stack([torch.zeros_like(w), w, w], dim=-1))
    assert int((edges.abs().sum(-1) > 0).sum()) == 2 * 2 * (10 + 20 + 12)  # members x both directions x weights


def _relabel(nodes: torch.Tensor, edges: torch.Tensor, order: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Node n of the result is node order[n] of the graph."""
    return nodes[:, order], edges[:, order][:, :, order]


def test_relabelling_a_hidden_layers_nodes_leaves_the_output_unchanged_and_the_outputs_do_not(cnn_space,
                                                                                              random_batch):
    torch.manual_seed(0)
    model = create_model("ng_t", cnn_space, **SMALL).eval()
    nodes, edges = dense_neural_graph(model.layout, random_batch(cnn_space, 3, seed=1))
    generator = torch.Generator().manual_seed(2)
    order = torch.arange(model.layout.num_nodes)
    offsets = model.layout.node_offsets  # 1 input, 16 + 16 + 16 hidden, 10 outputs
    for axis in (1, 2, 3):
        order[offsets[axis]:offsets[axis + 1]] = offsets[axis] + torch.randperm(16, generator=generator)
    outputs = order.clone()
    outputs[offsets[4]:offsets[5]] = offsets[4] + torch.randperm(10, generator=generator)
    with torch.no_grad():
        output = model.forward_graph(nodes, edges)
        hidden_moved = model.forward_graph(*_relabel(nodes, edges, order))
        outputs_moved = model.forward_graph(*_relabel(nodes, edges, outputs))
    torch.testing.assert_close(hidden_moved, output, rtol=1e-5, atol=1e-5)
    assert (outputs_moved - output).abs().max() > 1e-3  # the readout reads the output neurons in order


def test_the_presets_carry_the_authors_settings(cnn_space, siren_space, random_batch):
    cnn = model_config("ng_t")
    assert cnn.widths == {"hidden_dim": 128, "edge_dim": 64, "attention_dim": 256, "node_mlp_dim": 256,
                          "edge_mlp_dim": 128, "readout_dim": 256}
    assert (cnn.num_layers, cnn.num_heads, cnn.fourier_scale, cnn.readout_layers) == (4, 8, 1.0, 2)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        default = create_model("ng_t", cnn_space).eval()  # the other registry checks run it narrower
    assert count_parameters(default) == 1_806_977
    with torch.no_grad():
        assert default(random_batch(cnn_space, 1, seed=4)).shape == (1, 1)
    inr = model_config("ng_t", preset="inr-classification")
    assert inr.widths == {"hidden_dim": 64, "edge_dim": 32, "attention_dim": 128, "node_mlp_dim": 128,
                          "edge_mlp_dim": 64, "readout_dim": 128}
    assert (inr.dropout, inr.readout_layers, inr.out_features, inr.reverse_edges) == (0.2, 1, 10, False)
    model = create_model("ng_t", siren_space, **{**SMALL, "out_features": 10, "readout_layers": 1}).eval()
    assert model.layers[-1].edge_update is None and model.layers[0].edge_update is not None
    with torch.no_grad():
        assert model(random_batch(siren_space, 2, seed=3)).shape == (2, 10)
    with pytest.raises(SchemaError, match="attention_dim.*multiple of num_heads 3"):
        model_config("ng_t", hidden_dim=8, num_heads=3)
