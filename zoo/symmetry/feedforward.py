"""Hidden-unit symmetries of feedforward networks (MLPs, CNNs, SIRENs).

Layer l of the network maps h_{l-1} to h_l = sigma(W_l h_{l-1} + b_l).
Permuting the hidden units of every hidden layer leaves the function unchanged.
Where the activation allows, so does rescaling them:

    W_l -> D_l P_l W_l P_{l-1}^T D_{l-1}^{-1},    b_l -> D_l P_l b_l

Here P_0 = D_0 = I (inputs) and P_L = D_L = I (outputs).
For positively homogeneous activations, D_l is a positive diagonal matrix.
(ReLU: sigma(d z) = d sigma(z) for d > 0.)
For odd ones (tanh, sine: sigma(-z) = -sigma(z)), D_l is a sign matrix.
See Hecht-Nielsen 1990 for these symmetries.
The NFNs are built to respect the groups of Zhou et al. 2023
("Permutation Equivariant Neural Functionals", Sec. 2).
Tran et al. 2024 ("Equivariant Neural Functional Networks for Monomial Matrix Groups", Sec. 3)
adds the monomial ones.

Axis 0 of a weight is its output units and axis 1 its input units.
That covers linear layers (out, in) and convolutions (out, in, kh, kw).
Global average pooling between convolutions and a dense layer commutes with both actions.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import torch

from zoo.weightspace import WeightBatch, WeightSpace

Mode = Literal["permutation", "scale", "sign"]


@dataclasses.dataclass(frozen=True)
class FeedforwardElement:
    """Per hidden layer: new unit i is old unit ``permutations[l][:, i]``, scaled by ``scales[l][:, i]``."""

    permutations: tuple[torch.Tensor, ...]  # each (B, n_l), int64
    scales: tuple[torch.Tensor, ...]  # each (B, n_l); ones, signs or positive factors

    @property
    def batch_size(self) -> int:
        return self.permutations[0].shape[0]


def _gather(tensor: torch.Tensor, axis: int, index: torch.Tensor) -> torch.Tensor:
    """tensor (B, ...) indexed along `axis` (counted after the batch dim) by index (B, n)."""
    shape = [index.shape[0]] + [1] * (tensor.ndim - 1)
    shape[axis + 1] = index.shape[1]
    expanded = index.view(shape).expand(*tensor.shape[:axis + 1], index.shape[1], *tensor.shape[axis + 2:])
    return torch.gather(tensor, axis + 1, expanded)


def _along(values: torch.Tensor, axis: int, ndim: int) -> torch.Tensor:
    """(B, n) values shaped to broadcast along `axis` of a (B, ...) tensor with `ndim` dims."""
    shape = [values.shape[0]] + [1] * (ndim - 1)
    shape[axis + 1] = values.shape[1]
    return values.view(shape)


@dataclasses.dataclass(frozen=True)
class FeedforwardSymmetry:
    space: WeightSpace
    mode: Mode = "permutation"
    max_log_scale: float = math.log(4.0)  # positive scales are drawn log-uniformly in [1/4, 4]

    @property
    def hidden_sizes(self) -> tuple[int, ...]:
        """Output units of every layer but the last: the permutable (hidden) layers."""
        sizes = {}
        for t in self.space.tensors:
            sizes.setdefault(t.layer, t.shape[0])
        return tuple(sizes[layer] for layer in range(self.space.num_layers - 1))

    def identity(self, batch_size: int) -> FeedforwardElement:
        return FeedforwardElement(tuple(torch.arange(n).expand(batch_size, n).clone() for n in self.hidden_sizes),
                                  tuple(torch.ones(batch_size, n) for n in self.hidden_sizes))

    def sample(self, generator: torch.Generator, batch_size: int) -> FeedforwardElement:
        permutations, scales = [], []
        for n in self.hidden_sizes:
            permutations.append(torch.argsort(torch.rand(batch_size, n, generator=generator), dim=1))
            if self.mode == "scale":
                scale = torch.exp((2 * torch.rand(batch_size, n, generator=generator) - 1) * self.max_log_scale)
            elif self.mode == "sign":
                scale = torch.randint(0, 2, (batch_size, n), generator=generator).float() * 2 - 1
            else:
                scale = torch.ones(batch_size, n)
            scales.append(scale)
        return FeedforwardElement(tuple(permutations), tuple(scales))

    def act(self, element: FeedforwardElement, weights: WeightBatch) -> WeightBatch:
        last = self.space.num_layers - 1
        out = []
        for spec, tensor in zip(self.space.tensors, weights.tensors):
            if spec.layer < last:  # output units: W_l -> D_l P_l W_l
                permutation, scale = element.permutations[spec.layer], element.scales[spec.layer]
                tensor = _gather(tensor, 0, permutation) * _along(scale.to(tensor.dtype), 0, tensor.ndim)
            if spec.role == "weight" and spec.layer > 0:  # input units: W_l -> W_l P_{l-1}^T D_{l-1}^{-1}
                permutation, scale = element.permutations[spec.layer - 1], element.scales[spec.layer - 1]
                tensor = _gather(tensor, 1, permutation) / _along(scale.to(tensor.dtype), 1, tensor.ndim)
            out.append(tensor)
        return WeightBatch(self.space, tuple(out))

    def inverse(self, element: FeedforwardElement) -> FeedforwardElement:
        permutations, scales = [], []
        for permutation, scale in zip(element.permutations, element.scales):
            inverse = torch.argsort(permutation, dim=1)
            permutations.append(inverse)
            scales.append(1.0 / torch.gather(scale, 1, inverse))
        return FeedforwardElement(tuple(permutations), tuple(scales))

    def compose(self, first: FeedforwardElement, second: FeedforwardElement) -> FeedforwardElement:
        """act(compose(a, b), w) == act(a, act(b, w)): permutation b[a], scale a * b[a]."""
        permutations, scales = [], []
        for pa, sa, pb, sb in zip(first.permutations, first.scales, second.permutations, second.scales):
            permutations.append(torch.gather(pb, 1, pa))
            scales.append(sa * torch.gather(sb, 1, pa))
        return FeedforwardElement(tuple(permutations), tuple(scales))
