"""PNA message passing with edge features, as NG-GNN uses it on neural graphs.

Kofinas et al. 2024 ("Graph Neural Networks for Learning Equivariant Representations of Neural Networks",
ICLR 2024), Sec. 4 (NG-GNN). It uses principal neighbourhood aggregation (Corso et al. 2020, Sec. 2:
aggregators and degree scalers). The edge features modulate the messages (FiLM) and are updated between
layers. Here j is the source and i the target of edge j -> i. The message is

    m_ij = s(e_ij) * h([x_i, x_j]) + t(e_ij),

with s and t one linear map of e_ij, split. The node update is

    x_i' = lin(post([x_i, (+)_{j -> i} m_ij])),

with (+) the {mean, min, max, std} x {1, amplification} aggregation. Between layers, not after the last, the
edges are updated:

    e_ij' = lin1(act(lin_e(e_ij) + lin_s(x_j) + lin_t(x_i))).

`(+)` is `torch_geometric`'s `DegreeScalerAggregation` with the graph's in-degree histogram. That histogram
is the same for every member of an architecture. Here `DegreeBuckets` computes it. The edges are sorted once
per forward by their target's in-degree. The nodes of in-degree k then read their messages as a dense (n, k,
C) block. Each aggregator is a reduction over its middle axis.

This is the same function as `torch_geometric`'s scatter reductions, and faster (docs/performance.md).
tests/nfn_models/test_pna.py checks values and gradients in float64. Where messages tie for a node's min or
max, the gradient goes to one of them (torch's `max(dim)`). It is not split evenly among them.

This module imports `torch_geometric` at import time. Only `nfn_models.ng_gnn` imports it, inside its
constructor, so `import nfn_models` stays light.
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn
import nfn_models.layers.quiet_geometric  # noqa: F401  (before any torch_geometric import)
from torch_geometric.nn.aggr import DegreeScalerAggregation
from torch_geometric.nn.conv import MessagePassing

AGGREGATORS = ("mean", "min", "max", "std")  # the paper's PNA configuration (the authors' pna.yaml)
SCALERS = ("identity", "amplification")
STD_FLOOR = 1e-5  # torch_geometric's StdAggregation: sqrt(max(var, 1e-5)), and 0 where var <= 1e-5


@dataclasses.dataclass(frozen=True)
class DegreeBuckets:
    """The edges of (batched) graphs grouped by their target's in-degree, for dense reductions.

    `edge_order` lists the edges by (in-degree of the target, target). The nodes of in-degree k then own
    consecutive runs of k edges each. `sizes` holds (k, count) pairs, k ascending. `node_position[i]` is
    where node i's row sits in that order. `degree` is each node's in-degree.
    """

    edge_order: torch.Tensor  # (E,)
    node_position: torch.Tensor  # (N,)
    sizes: tuple[tuple[int, int], ...]  # (in-degree, nodes) per bucket
    degree: torch.Tensor  # (N,), long

    @classmethod
    def of(cls, edge_index: torch.Tensor, num_nodes: int) -> "DegreeBuckets":
        target = edge_index[1]
        degree = torch.bincount(target, minlength=num_nodes)
        node_order = torch.argsort(degree, stable=True)
        node_position = torch.empty_like(node_order)
        node_position[node_order] = torch.arange(num_nodes, device=target.device)
        edge_order = torch.argsort(node_position[target], stable=True)
        degrees, counts = torch.unique_consecutive(degree[node_order], return_counts=True)
        return cls(edge_order, node_position, tuple(zip(degrees.tolist(), counts.tolist())), degree)

    def aggregate(self, messages: torch.Tensor) -> torch.Tensor:
        """(E, C) messages -> (N, 4 C): [mean, min, max, std] over each node's incoming messages. A node
        without any gets 0, as torch_geometric's scatter reductions give."""
        ordered = messages.index_select(0, self.edge_order)
        channels = messages.shape[-1]
        rows, start = [], 0
        for degree, count in self.sizes:
            if degree == 0:
                rows.append(messages.new_zeros(count, len(AGGREGATORS) * channels))
                continue
            block = ordered[start:start + degree * count].view(count, degree, channels)
            start += degree * count
            mean = block.mean(1)
            variance = (block * block).mean(1) - mean * mean
            std = variance.clamp(min=STD_FLOOR).sqrt()
            std = std.masked_fill(std <= math.sqrt(STD_FLOOR), 0.0)
            rows.append(torch.cat([mean, block.min(1).values, block.max(1).values, std], dim=-1))
        return torch.cat(rows).index_select(0, self.node_position)


class EdgeModulatedPNAConv(MessagePassing):
    """One PNA layer whose messages are scaled and shifted by the edge features (FiLM)."""

    def __init__(self, channels: int, edge_channels: int, in_degree_histogram: torch.Tensor):
        # the aggregation module holds the histogram's mean log-degree (its buffer avg_deg_log, in
        # the state dict); `DegreeBuckets` computes what its forward would
        super().__init__(aggr=DegreeScalerAggregation(list(AGGREGATORS), list(SCALERS), in_degree_histogram),
                         node_dim=0)
        self.edge_film = nn.Linear(edge_channels, 2 * channels)  # -> (scale, shift)
        self.pre = nn.Linear(2 * channels, channels)  # h: the message from [x_i, x_j]
        self.post = nn.Linear((len(AGGREGATORS) * len(SCALERS) + 1) * channels, channels)
        self.lin = nn.Linear(channels, channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor,
                buckets: DegreeBuckets | None = None) -> torch.Tensor:
        """x (N, C), edge_index (2, E), edge_attr (E, C'); `buckets` of this edge_index when the
        caller has them (one per forward of a stack), else computed here."""
        if buckets is None:
            buckets = DegreeBuckets.of(edge_index, x.shape[0])
        # h([x_i, x_j]) = W_t x_i + W_s x_j + b: each half of h's weight applied once per node, not per edge
        target_weight, source_weight = self.pre.weight.chunk(2, dim=1)
        target = F.linear(x, target_weight, self.pre.bias)  # (N, C)
        source = F.linear(x, source_weight)
        scale, shift = self.edge_film(edge_attr).chunk(2, dim=-1)  # (E, C) each
        messages = scale * (target.index_select(0, edge_index[1]) + source.index_select(0, edge_index[0])) + shift
        return self.lin(self.post(torch.cat([x, self.scaled_aggregation(messages, buckets)], dim=-1)))  # (N, C)

    def scaled_aggregation(self, messages: torch.Tensor, buckets: DegreeBuckets) -> torch.Tensor:
        """(E, C) messages -> (N, 8 C): what `self.aggr_module` (torch_geometric's) returns. That is the
        aggregators under each scaler in order (amplification: log(in-degree + 1) / its mean)."""
        aggregated = buckets.aggregate(messages)  # (N, 4 C)
        amplification = torch.log(buckets.degree.to(messages.dtype) + 1).unsqueeze(-1) / self.aggr_module.avg_deg_log
        return torch.cat([aggregated, aggregated * amplification], dim=-1)


class EdgeUpdate(nn.Module):
    """e_ij' = lin1(act(lin_e(e_ij) + lin_s(x_source) + lin_t(x_target)))."""

    def __init__(self, channels: int, edge_channels: int, activation: nn.Module):
        super().__init__()
        self.lin_e = nn.Linear(edge_channels, edge_channels)
        self.lin_s = nn.Linear(channels, edge_channels)
        self.lin_t = nn.Linear(channels, edge_channels)
        self.activation = activation
        self.lin1 = nn.Linear(edge_channels, edge_channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        source, target = edge_index
        hidden = self.lin_e(edge_attr) + self.lin_s(x)[source] + self.lin_t(x)[target]
        return self.lin1(self.activation(hidden))
