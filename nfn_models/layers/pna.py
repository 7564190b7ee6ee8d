"""PNA message passing with edge features, as NG-GNN uses it on neural graphs.

Kofinas et al. 2024 ("Graph Neural Networks for Learning Equivariant Representations of Neural
Networks", ICLR 2024), Sec. 4 (NG-GNN): principal neighbourhood aggregation (Corso et al. 2020)
where the edge features modulate the messages (FiLM) and are updated between layers:

    m_ij  = s(e_ij) * h([x_i, x_j]) + t(e_ij)                 (s, t: one linear map of e_ij, split)
    x_i'  = lin(post([x_i, (+)_{j -> i} m_ij]))               (+): {mean, min, max, std} x {1, amplification}
    e_ij' = lin1(act(lin_e(e_ij) + lin_s(x_j) + lin_t(x_i)))  (between layers, not after the last)

with j the source and i the target of edge j -> i. `(+)` is `torch_geometric`'s
`DegreeScalerAggregation` with the in-degree histogram of the graph (the same for every member of
an architecture). Imports `torch_geometric` at import time: only `nfn_models.ng_gnn` imports
this module, inside its constructor, so `import nfn_models` stays light.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
import nfn_models.layers.quiet_geometric  # noqa: F401  (before any torch_geometric import)
from torch_geometric.nn.aggr import DegreeScalerAggregation
from torch_geometric.nn.conv import MessagePassing

AGGREGATORS = ("mean", "min", "max", "std")  # the paper's PNA configuration (the authors' pna.yaml)
SCALERS = ("identity", "amplification")


class EdgeModulatedPNAConv(MessagePassing):
    """One PNA layer whose messages are scaled and shifted by the edge features (FiLM)."""

    def __init__(self, channels: int, edge_channels: int, in_degree_histogram: torch.Tensor):
        super().__init__(aggr=DegreeScalerAggregation(list(AGGREGATORS), list(SCALERS), in_degree_histogram),
                         node_dim=0)
        self.edge_film = nn.Linear(edge_channels, 2 * channels)  # -> (scale, shift)
        self.pre = nn.Linear(2 * channels, channels)  # h: the message from [x_i, x_j]
        self.post = nn.Linear((len(AGGREGATORS) * len(SCALERS) + 1) * channels, channels)
        self.lin = nn.Linear(channels, channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        # h([x_i, x_j]) = W_t x_i + W_s x_j + b: each half of h's weight applied once per node, not per edge
        target_weight, source_weight = self.pre.weight.chunk(2, dim=1)
        target = F.linear(x, target_weight, self.pre.bias)  # (N, C)
        source = F.linear(x, source_weight)
        aggregated = self.propagate(edge_index, target=target, source=source, edge_attr=edge_attr)  # (N, 8 C)
        return self.lin(self.post(torch.cat([x, aggregated], dim=-1)))  # (N, C)

    def message(self, target_i: torch.Tensor, source_j: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        scale, shift = self.edge_film(edge_attr).chunk(2, dim=-1)  # (E, C) each
        return scale * (target_i + source_j) + shift


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
