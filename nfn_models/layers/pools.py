"""Invariant pools for NP and HNP features (Zhou et al. 2023, Sec. 3, invariant NF-Layers).

Zhou et al., "Permutation Equivariant Neural Functionals" (NeurIPS 2023). An invariant NF-Layer is an
equivariant layer followed by summing (here: averaging) over the permuted axes. `NPPool` averages every
weight over both unit axes and every bias over its units. It keeps filter positions: (B, C (sum_i f_i + L)).
`HNPPool` keeps what the fixed axes index. It averages W_0 over its (hidden) outputs only and W_{L-1} over
its (hidden) inputs only. It keeps b_{L-1} whole, and treats the rest as NP does. Features are laid out
channel-major, (B, C, D') flattened to (B, C D'), the order of the `nfn` package's pools.
"""

from __future__ import annotations

import torch
from torch import nn

from nfn_models.features import NetworkDescription, WeightSpaceFeatures
from nfn_models.layers.np import unit_mean


class NPPool(nn.Module):
    """features -> (B, channels * (sum f_i + L)), invariant to all unit permutations."""

    def __init__(self, description: NetworkDescription):
        super().__init__()
        self.description = description

    @staticmethod
    def num_features(description: NetworkDescription, channels: int) -> int:
        return channels * (sum(description.filter_sizes) + description.num_layers)

    def forward(self, features: WeightSpaceFeatures) -> torch.Tensor:
        batch, channels = features.batch_size, features.channels
        out = []
        for weight, bias in zip(features.weights, features.biases):
            out.append(unit_mean(weight, (2, 3)).reshape(batch, channels, -1))  # (B, C, f_i)
            out.append(bias.mean(dim=2, keepdim=True))  # (B, C, 1)
        return torch.cat(out, dim=2).flatten(1)  # (B, C D')


class HNPPool(nn.Module):
    """features -> (B, channels * D'), invariant to hidden-unit permutations only."""

    def __init__(self, description: NetworkDescription):
        super().__init__()
        if description.num_layers < 2:
            raise ValueError("HNP needs a hidden layer (at least two layers); use NPPool for one layer")
        self.description = description

    @staticmethod
    def num_features(description: NetworkDescription, channels: int) -> int:
        f, n = description.filter_sizes, description.unit_sizes
        middle = sum(f[1:-1]) + len(f) - 1
        return channels * (f[0] * n[0] + f[-1] * n[-1] + n[-1] + middle)

    def forward(self, features: WeightSpaceFeatures) -> torch.Tensor:
        batch, channels, L = features.batch_size, features.channels, len(features.weights)
        out = []
        for i, (weight, bias) in enumerate(zip(features.weights, features.biases)):
            if i == 0:
                pooled = unit_mean(weight, 2)  # (B, C, n_0, *kernel): hidden outputs averaged
            elif i == L - 1:
                pooled = unit_mean(weight, 3)  # (B, C, n_L, *kernel): hidden inputs averaged
            else:
                pooled = unit_mean(weight, (2, 3))  # (B, C, *kernel)
            out.append(pooled.reshape(batch, channels, -1))
            out.append(bias if i == L - 1 else bias.mean(dim=2, keepdim=True))  # (B, C, n_L) or (B, C, 1)
        return torch.cat(out, dim=2).flatten(1)  # (B, C D')
