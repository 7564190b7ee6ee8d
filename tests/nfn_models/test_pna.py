"""nfn_models.layers.pna: the degree-bucketed PNA aggregation is torch_geometric's, values and gradients."""

import pytest
import torch

pytest.importorskip("torch_geometric")

from nfn_models.layers.pna import DegreeBuckets, EdgeModulatedPNAConv


def _graph(generator: torch.Generator, num_nodes: int = 40):
    """Random in-degrees 0-7 (some nodes with none), edges in a shuffled order."""
    degrees = torch.randint(0, 8, (num_nodes,), generator=generator)
    degrees[:3] = 0
    target = torch.repeat_interleave(torch.arange(num_nodes), degrees)
    source = torch.randint(0, num_nodes, (len(target),), generator=generator)
    order = torch.randperm(len(target), generator=generator)
    return torch.stack([source[order], target[order]]), degrees


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bucketed_aggregation_matches_torch_geometric_values_and_gradients(seed):
    generator = torch.Generator().manual_seed(seed)
    edge_index, degrees = _graph(generator)
    num_nodes, channels = len(degrees), 5
    conv = EdgeModulatedPNAConv(channels, channels, torch.bincount(degrees)).double()
    messages = torch.randn(edge_index.shape[1], channels, generator=generator, dtype=torch.float64, requires_grad=True)
    # a node whose messages all agree: its std is 0 (torch_geometric's masked floor)
    messages.data[edge_index[1] == int(torch.nonzero(degrees > 1)[0])] = 0.25
    weights = torch.randn(num_nodes, 8 * channels, generator=generator, dtype=torch.float64)

    ours = conv.scaled_aggregation(messages, DegreeBuckets.of(edge_index, num_nodes))
    reference = conv.aggr_module(messages, edge_index[1], dim_size=num_nodes)
    torch.testing.assert_close(ours, reference, rtol=1e-12, atol=1e-12)
    # ties (the constant node) send min/max gradients to one message here, split evenly there: compare elsewhere
    tied = (edge_index[1] == int(torch.nonzero(degrees > 1)[0])).unsqueeze(-1)
    ours_grad, = torch.autograd.grad((ours * weights).sum(), messages)
    reference_grad, = torch.autograd.grad((reference * weights).sum(), messages)
    torch.testing.assert_close(ours_grad.masked_fill(tied, 0), reference_grad.masked_fill(tied, 0), rtol=1e-12,
                               atol=1e-12)


def test_a_wrong_node_order_is_caught():
    """Negative control: buckets whose rows are read back in the wrong node order differ."""
    generator = torch.Generator().manual_seed(3)
    edge_index, degrees = _graph(generator)
    conv = EdgeModulatedPNAConv(4, 4, torch.bincount(degrees)).double()
    messages = torch.randn(edge_index.shape[1], 4, generator=generator, dtype=torch.float64)
    buckets = DegreeBuckets.of(edge_index, len(degrees))
    shuffled = DegreeBuckets(buckets.edge_order, buckets.node_position.roll(1), buckets.sizes, buckets.degree)
    reference = conv.aggr_module(messages, edge_index[1], dim_size=len(degrees))
    assert not torch.allclose(conv.scaled_aggregation(messages, shuffled), reference)


def test_buckets_group_each_node_with_its_own_edges():
    edge_index = torch.tensor([[0, 1, 2, 3, 0], [2, 2, 1, 2, 1]])  # in-degrees: 0, 2, 3, 0
    buckets = DegreeBuckets.of(edge_index, 4)
    assert buckets.sizes == ((0, 2), (2, 1), (3, 1))
    assert buckets.degree.tolist() == [0, 2, 3, 0]
    assert edge_index[1, buckets.edge_order].tolist() == [1, 1, 2, 2, 2]
