"""The pieces NG-GNN and NG-T share: the input encoders, the positional embedding and the readout.

Kofinas et al., "Graph Neural Networks for Learning Equivariant Representations of Neural
Networks" (ICLR 2024), Sec. 4: both models encode each scalar of the neural graph (a bias, or a
kernel vector) with random Fourier features, [cos 2 pi B v, sin 2 pi B v] with B ~ N(0, sigma^2)
fixed (the authors' `GaussianEncoding` from `rff`), then two linear maps (their `proj_bias` /
`proj_weight` and `proj_node_in` / `proj_edge_in`); add a learned positional embedding per node
(initialised N(0, 1), their `torch.randn` parameter); and read the output neurons' features,
concatenated in order, with an MLP (their `proj_out`). Plain torch: no graph library needed.
"""

from __future__ import annotations

import math

import torch
from torch import nn


class FourierEncoder(nn.Module):
    """v (..., f) -> [cos 2 pi v B^T, sin 2 pi v B^T] (..., 2 m) -> linear -> linear (..., d); B fixed."""

    def __init__(self, in_features: int, frequencies: int, scale: float, out_features: int):
        super().__init__()
        self.register_buffer("frequencies", scale * torch.randn(frequencies, in_features))  # (m, f)
        self.project = nn.Sequential(nn.Linear(2 * frequencies, out_features), nn.Linear(out_features, out_features))

    def forward(self, values: torch.Tensor) -> torch.Tensor:
        angles = 2 * math.pi * values @ self.frequencies.T  # (..., m)
        return self.project(torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1))


def positional_embedding(num_positions: int, dim: int) -> nn.Embedding:
    """One learned vector per position (`NeuralGraphLayout.node_position`), drawn N(0, 1)."""
    embedding = nn.Embedding(num_positions, dim)
    nn.init.normal_(embedding.weight)  # the authors' torch.randn parameter
    return embedding


def readout_mlp(in_features: int, hidden_features: int, out_features: int, hidden_layers: int) -> nn.Sequential:
    """Linear -> ReLU, `hidden_layers` times, then Linear to `out_features`."""
    layers: list[nn.Module] = []
    for i in range(hidden_layers):
        layers += [nn.Linear(in_features if i == 0 else hidden_features, hidden_features), nn.ReLU()]
    layers.append(nn.Linear(hidden_features if hidden_layers else in_features, out_features))
    return nn.Sequential(*layers)
