"""Weight-space features of feedforward networks (MLPs, SIRENs, the Small CNN) for NFN layers.

A `NetworkDescription` is the frozen description of a feedforward architecture. Per layer it holds the
output and input units and the kernel shape. Layer i (0-based) maps unit axis i to unit axis i + 1. So a
network of L layers has L + 1 unit axes. Axis 0 (inputs) and axis L (outputs) are fixed. The symmetry group
permutes axes 1..L-1, the hidden units (Zhou et al. 2023, "Permutation Equivariant Neural Functionals", Sec.
2).

The conventions are those of `zoo.symmetry.feedforward`. A weight's axis 0 is its output units and axis 1
its input units. Any further axes are the filter positions of a convolution. The Small CNN has global
average pooling between its last convolution and its dense layer. That makes conv3's output channels and the
dense layer's inputs one and the same hidden axis. So nothing special is needed for it here.

`WeightSpaceFeatures` holds C channels of features per weight and bias: weights[i] (B, C, n_{i+1}, n_i,
*kernel_i), biases[i] (B, C, n_{i+1}). A `WeightBatch` is the C = 1 case. `to_weight_batch` converts back,
so an equivariant model's output can be a weight delta. `shaped()` folds the filter positions into the
channels: (B, C, o, i, kh, kw) -> (B, C * kh * kw, o, i). The channel index is c * kh * kw + position. That
is how the NP/HNP layers see a convolution, as the `nfn` package does.

`act_on_features` applies a group element of a weight-space symmetry (`zoo.symmetry`) to multi-channel
features. Each channel is a copy of the weight space. The equivariance tests of every layer use it.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import torch
from torch import nn

from zoo.weightspace import TensorSpec, WeightBatch, WeightSpace


@dataclasses.dataclass(frozen=True)
class LayerDescription:
    weight_name: str  # the state-dict key of the weight, e.g. "conv1.weight"
    bias_name: str
    n_out: int  # output units (axis i + 1)
    n_in: int  # input units (axis i)
    kernel: tuple[int, ...]  # () for a dense layer, (kh, kw) for a 2-d convolution

    @property
    def filter_size(self) -> int:
        """Filter positions per (output, input) pair: kh * kw, or 1 for a dense layer."""
        return math.prod(self.kernel)


@dataclasses.dataclass(frozen=True)
class NetworkDescription:
    """A feedforward architecture's layers, in forward order; hidden unit axes are permuted."""

    layers: tuple[LayerDescription, ...]

    def __post_init__(self) -> None:
        if not self.layers:
            raise ValueError("a network needs at least one layer")
        for previous, layer in zip(self.layers, self.layers[1:]):
            if layer.n_in != previous.n_out:
                raise ValueError(f"{layer.weight_name} has {layer.n_in} inputs but {previous.weight_name} "
                                 f"has {previous.n_out} outputs; not a feedforward chain")

    @property
    def num_layers(self) -> int:
        return len(self.layers)

    @property
    def unit_sizes(self) -> tuple[int, ...]:
        """n_0 (inputs), n_1 .. n_{L-1} (hidden), n_L (outputs)."""
        return (self.layers[0].n_in, *(layer.n_out for layer in self.layers))

    @property
    def permuted_axes(self) -> tuple[int, ...]:
        """The unit axes the symmetry group permutes: the hidden ones."""
        return tuple(range(1, self.num_layers))

    @property
    def filter_sizes(self) -> tuple[int, ...]:
        return tuple(layer.filter_size for layer in self.layers)

    def without_kernels(self) -> "NetworkDescription":
        """The same units with every layer dense. A layer that folds the filter positions into its channels,
        and mixes them away, writes its output there (MAGEP-NFN's first layer)."""
        return NetworkDescription(tuple(dataclasses.replace(layer, kernel=()) for layer in self.layers))

    @classmethod
    def from_weight_space(cls, space: WeightSpace) -> "NetworkDescription":
        """Reads (weight, bias) pairs per layer; raises on anything but a feedforward chain."""
        by_layer: dict[int, dict[str, TensorSpec]] = {}
        for spec in space.tensors:
            if spec.role in by_layer.setdefault(spec.layer, {}):
                raise ValueError(f"layer {spec.layer} has two {spec.role} tensors")
            by_layer[spec.layer][spec.role] = spec
        layers = []
        for index in range(space.num_layers):
            tensors = by_layer.get(index, {})
            if set(tensors) != {"weight", "bias"}:
                raise ValueError(f"layer {index} needs one weight and one bias, has {sorted(tensors)}")
            weight, bias = tensors["weight"], tensors["bias"]
            if len(weight.shape) < 2 or bias.shape != weight.shape[:1]:
                raise ValueError(f"{weight.name} {weight.shape} / {bias.name} {bias.shape}: expected a weight "
                                 "(n_out, n_in, *kernel) and a bias (n_out,)")
            layers.append(LayerDescription(weight.name, bias.name, weight.shape[0], weight.shape[1], weight.shape[2:]))
        return cls(tuple(layers))


@dataclasses.dataclass(frozen=True)
class WeightSpaceFeatures:
    """C channels of features on every weight and bias of a feedforward weight space."""

    description: NetworkDescription
    weights: tuple[torch.Tensor, ...]  # each (B, C, n_out, n_in, *kernel)
    biases: tuple[torch.Tensor, ...]  # each (B, C, n_out)

    def __post_init__(self) -> None:
        if not len(self.weights) == len(self.biases) == self.description.num_layers:
            raise ValueError(f"expected {self.description.num_layers} weights and biases, "
                             f"got {len(self.weights)} and {len(self.biases)}")
        leading = {tuple(t.shape[:2]) for t in (*self.weights, *self.biases)}
        if len(leading) != 1:
            raise ValueError(f"tensors disagree on (batch, channels): {sorted(leading)}")
        for layer, weight, bias in zip(self.description.layers, self.weights, self.biases):
            if tuple(weight.shape[2:]) != (layer.n_out, layer.n_in, *layer.kernel):
                raise ValueError(f"{layer.weight_name}: expected (B, C, {layer.n_out}, {layer.n_in}, "
                                 f"*{layer.kernel}), got {tuple(weight.shape)}")
            if tuple(bias.shape[2:]) != (layer.n_out,):
                raise ValueError(f"{layer.bias_name}: expected (B, C, {layer.n_out}), got {tuple(bias.shape)}")

    @property
    def batch_size(self) -> int:
        return self.weights[0].shape[0]

    @property
    def channels(self) -> int:
        return self.weights[0].shape[1]

    @classmethod
    def from_weight_batch(cls, batch: WeightBatch,
                          description: NetworkDescription | None = None) -> "WeightSpaceFeatures":
        """One channel of features: the batch's own weights and biases."""
        description = description or NetworkDescription.from_weight_space(batch.space)
        tensors = dict(zip(batch.space.names, batch.tensors))
        return cls(description,
                   tuple(tensors[layer.weight_name].unsqueeze(1) for layer in description.layers),
                   tuple(tensors[layer.bias_name].unsqueeze(1) for layer in description.layers))

    def to_weight_batch(self, space: WeightSpace) -> WeightBatch:
        """The inverse of `from_weight_batch` for one-channel features, in `space`'s tensor order."""
        if self.channels != 1:
            raise ValueError(f"only one-channel features are a weight batch; these have {self.channels} "
                             "channels (end the model with an equivariant layer of out_channels=1)")
        tensors = {}
        for layer, weight, bias in zip(self.description.layers, self.weights, self.biases):
            tensors[layer.weight_name], tensors[layer.bias_name] = weight.squeeze(1), bias.squeeze(1)
        return WeightBatch(space, tuple(tensors[name] for name in space.names))

    def map(self, function: Callable[[torch.Tensor], torch.Tensor]) -> "WeightSpaceFeatures":
        """Applies an elementwise `function` to every tensor."""
        return WeightSpaceFeatures(self.description, tuple(function(w) for w in self.weights),
                                   tuple(function(b) for b in self.biases))

    def __add__(self, other: "WeightSpaceFeatures") -> "WeightSpaceFeatures":
        return WeightSpaceFeatures(self.description, tuple(a + b for a, b in zip(self.weights, other.weights)),
                                   tuple(a + b for a, b in zip(self.biases, other.biases)))

    def shaped(self) -> tuple[torch.Tensor, ...]:
        """The weights with filter positions folded into channels: each (B, C * f_i, n_out, n_in)."""
        out = []
        for weight in self.weights:
            kernel_dims = tuple(range(4, weight.ndim))
            folded = weight.permute(0, 1, *kernel_dims, 2, 3)  # (B, C, *kernel, o, i)
            out.append(folded.reshape(weight.shape[0], -1, weight.shape[2], weight.shape[3]))
        return tuple(out)

    @classmethod
    def from_shaped(cls, description: NetworkDescription, weights: tuple[torch.Tensor, ...],
                    biases: tuple[torch.Tensor, ...]) -> "WeightSpaceFeatures":
        """Inverse of `shaped`: weights[i] (B, C * f_i, o, i) -> (B, C, o, i, *kernel_i)."""
        out = []
        for layer, weight in zip(description.layers, weights):
            batch, _, n_out, n_in = weight.shape
            unfolded = weight.reshape(batch, -1, *layer.kernel, n_out, n_in)  # (B, C, *kernel, o, i)
            kernel_dims = tuple(range(2, 2 + len(layer.kernel)))
            out.append(unfolded.permute(0, 1, unfolded.ndim - 2, unfolded.ndim - 1, *kernel_dims))
        return cls(description, tuple(out), tuple(biases))


def stack_channels(per_channel: list[WeightSpaceFeatures]) -> WeightSpaceFeatures:
    """Concatenates features of one weight space along the channel dimension."""
    first = per_channel[0]
    return WeightSpaceFeatures(first.description,
                               tuple(torch.cat(ws, dim=1) for ws in zip(*(f.weights for f in per_channel))),
                               tuple(torch.cat(bs, dim=1) for bs in zip(*(f.biases for f in per_channel))))


def act_on_features(symmetry: Any, element: Any, features: WeightSpaceFeatures) -> WeightSpaceFeatures:
    """`symmetry.act(element, .)` on every channel (the channels are copies of `symmetry.space`)."""
    per_channel = []
    for c in range(features.channels):
        channel = WeightSpaceFeatures(features.description, tuple(w[:, c:c + 1] for w in features.weights),
                                      tuple(b[:, c:c + 1] for b in features.biases))
        moved = symmetry.act(element, channel.to_weight_batch(symmetry.space))
        per_channel.append(WeightSpaceFeatures.from_weight_batch(moved, features.description))
    return stack_channels(per_channel)


class FeatureActivation(nn.Module):
    """A pointwise nonlinearity applied to every weight and bias feature (equivariant trivially)."""

    def __init__(self, activation: nn.Module):
        super().__init__()
        self.activation = activation

    def forward(self, features: WeightSpaceFeatures) -> WeightSpaceFeatures:
        return features.map(self.activation)
