"""Channel-mixing linear maps, the parameterized part of every NP/HNP term.

Each term of an equivariant layer (Zhou et al. 2023, Sec. 3) is a linear map of some invariant summary's
channels. The summary is a mean, a bias vector or a whole input-layer weight. The map's output is broadcast
along the unit axes it does not depend on. The maps feeding one output tensor are initialized together,
uniformly in +-1/sqrt(total fan-in). So the sum of the terms starts at the scale of PyTorch's default for
one linear layer with all of them as inputs.
"""

from __future__ import annotations

import math

import torch
from torch import nn
from torch.nn import functional as F


class ChannelLinear(nn.Linear):
    """nn.Linear over dim 1: (B, in_features, *units) -> (B, out_features, *units)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x.movedim(1, -1)).movedim(-1, 1)


class ChannelConv2d(ChannelLinear):
    """`ChannelLinear` on (B, in_features, rows, columns) as a 1x1 convolution, the bias fused."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, self.weight[:, :, None, None], self.bias)


def init_jointly(*maps: nn.Linear) -> None:
    """Uniform(+-1/sqrt(fan_in)) for weights and biases (where a map has one), fan_in summed over all `maps`."""
    bound = 1.0 / math.sqrt(sum(m.in_features for m in maps))
    with torch.no_grad():
        for m in maps:
            m.weight.uniform_(-bound, bound)
            if m.bias is not None:
                m.bias.uniform_(-bound, bound)
