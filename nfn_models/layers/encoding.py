"""Input encodings of weight-space features: Fourier features and NP's input/output positions.

Zhou et al., "Permutation Equivariant Neural Functionals" (NeurIPS 2023), Sec. 3.1 and App. (INR
classification). NP treats the input and output units as permutable, which a network's weights are not. The
paper's fix adds a sinusoidal encoding of each entry's position as extra channels (`IOPositionEncoding`).
The position is the entry's layer and its input or output unit. NP then depends on their order and stays
equivariant to hidden permutations.

The INR classifiers first map every scalar through random Fourier features (`FourierFeatures`). That is
Tancik et al. 2020, "Fourier Features Let Networks Learn High Frequency Functions", Eq. 5 with Gaussian B.
It acts pointwise, so it is equivariant to every permutation. It is not invariant to scalings or sign flips,
so models that claim those must not use it. Frequencies, band counts and channel order follow the authors'
`nfn` package, which the tests use as the oracle.

A position p in [-1, 1] is encoded with `num_bands` bands up to `max_freq` as

    [sin(pi p f_1), ..., sin(pi p f_n), cos(pi p f_1), ..., cos(pi p f_n), p].

The f are linearly spaced in [1, max_freq / 2], which gives d = 2 num_bands + 1 channels. Layer i's entries
get the encoding of its layer position, linspace(-1, 1, L)[i]. The first layer's weights add that of their
input unit. The last layer's weights and biases add that of their output unit.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nfn_models.features import NetworkDescription, WeightSpaceFeatures


def sinusoidal(positions: torch.Tensor, max_freq: float, num_bands: int) -> torch.Tensor:
    """(n,) positions -> (n, 2 num_bands + 1): sines, cosines, the position itself."""
    scales = torch.linspace(1.0, max_freq / 2, num_bands, dtype=positions.dtype, device=positions.device)
    angles = positions[:, None] * scales * math.pi
    return torch.cat([angles.sin(), angles.cos(), positions[:, None]], dim=1)


class IOPositionEncoding(nn.Module):
    """features (B, C, ...) -> (B, C + d, ...): the layer and input/output positions appended."""

    def __init__(self, description: NetworkDescription, max_freq: float = 10.0, num_bands: int = 6,
                 encode_layers: bool = True):
        super().__init__()
        self.description, self.max_freq, self.num_bands = description, max_freq, num_bands
        self.encode_layers = encode_layers
        self.channels = 2 * num_bands + 1

    def forward(self, features: WeightSpaceFeatures) -> WeightSpaceFeatures:
        first = features.weights[0]
        dtype, device, batch = first.dtype, first.device, features.batch_size
        L, n = self.description.num_layers, self.description.unit_sizes

        def encode(count: int) -> torch.Tensor:  # (d, count)
            positions = torch.linspace(-1.0, 1.0, count, dtype=dtype, device=device)
            return sinusoidal(positions, self.max_freq, self.num_bands).T

        layer = encode(L) if self.encode_layers else torch.zeros(self.channels, L, dtype=dtype, device=device)
        inputs, outputs = encode(n[0]), encode(n[L])
        weights, biases = [], []
        for i, (weight, bias) in enumerate(zip(features.weights, features.biases)):
            kernel_axes = weight.ndim - 4
            w = layer[:, i].view(-1, 1, 1)  # (d, 1, 1): rows, columns
            b = layer[:, i].view(-1, 1)
            if i == 0:
                w = w + inputs.view(self.channels, 1, n[0])
            if i == L - 1:
                w = w + outputs.view(self.channels, n[L], 1)
                b = b + outputs
            w = w.view(*w.shape, *(1,) * kernel_axes).expand(self.channels, *weight.shape[2:])
            weights.append(torch.cat([weight, w.unsqueeze(0).expand(batch, *w.shape)], dim=1))
            b = b.expand(self.channels, bias.shape[-1])
            biases.append(torch.cat([bias, b.unsqueeze(0).expand(batch, *b.shape)], dim=1))
        return WeightSpaceFeatures(self.description, tuple(weights), tuple(biases))

    def extra_repr(self) -> str:
        return f"max_freq={self.max_freq}, num_bands={self.num_bands}, encode_layers={self.encode_layers}"


class FourierFeatures(nn.Module):
    """features (B, C, ...) -> (B, 2 m, ...): [sin(2 pi x B), cos(2 pi x B)] per entry. B ~ N(0, scale^2) is
    a fixed (C, m) buffer."""

    def __init__(self, in_channels: int, mapping_size: int = 128, scale: float = 10.0):
        super().__init__()
        self.in_channels, self.mapping_size, self.scale = in_channels, mapping_size, scale
        self.register_buffer("projection", torch.randn(in_channels, mapping_size) * scale)

    def _encode(self, x: torch.Tensor) -> torch.Tensor:
        angles = 2 * math.pi * (x.movedim(1, -1) @ self.projection).movedim(-1, 1)
        return torch.cat([angles.sin(), angles.cos()], dim=1)

    def forward(self, features: WeightSpaceFeatures) -> WeightSpaceFeatures:
        return WeightSpaceFeatures(features.description, tuple(map(self._encode, features.weights)),
                                   tuple(map(self._encode, features.biases)))

    def extra_repr(self) -> str:
        return f"in_channels={self.in_channels}, mapping_size={self.mapping_size}, scale={self.scale}"
