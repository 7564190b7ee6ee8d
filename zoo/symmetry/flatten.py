"""Hidden-unit symmetries of a CNN whose last convolution is flattened into a dense layer.

A flatten (`nn.Flatten` on NCHW) turns a convolution's (C, H, W) output into C * H * W inputs.
They are channel-major, so each channel owns a block of H * W consecutive input columns.
Permuting and rescaling the C channels moves these blocks whole.
View the dense weight as (out, C, H * W): channel c's block is column c of the middle axis.
The action on it is then the feedforward action along that axis (`zoo.symmetry.feedforward`).
See Hecht-Nielsen 1990 and Zhou et al. 2023, Sec. 2.
Everything else (sampling, inverse, composition) is the feedforward group's.
"""

from __future__ import annotations

import dataclasses

from zoo.symmetry.feedforward import FeedforwardElement, FeedforwardSymmetry, _along, _gather
from zoo.weightspace import WeightBatch


@dataclasses.dataclass(frozen=True)
class FlattenedFeedforwardSymmetry(FeedforwardSymmetry):
    """A `FeedforwardSymmetry` that also handles a flatten.

    A weight with more inputs than the previous layer has units reads them as channel-major blocks.
    Each block is permuted and scaled as a unit.
    """

    def act(self, element: FeedforwardElement, weights: WeightBatch) -> WeightBatch:
        last = self.space.num_layers - 1
        out = []
        for spec, tensor in zip(self.space.tensors, weights.tensors):
            if spec.layer < last:  # output units: W_l -> D_l P_l W_l
                permutation, scale = element.permutations[spec.layer], element.scales[spec.layer]
                tensor = _gather(tensor, 0, permutation) * _along(scale.to(tensor.dtype), 0, tensor.ndim)
            if spec.role == "weight" and spec.layer > 0:  # input units (or blocks of them)
                permutation, scale = element.permutations[spec.layer - 1], element.scales[spec.layer - 1]
                units, inputs = permutation.shape[1], tensor.shape[2]
                if inputs % units:
                    raise ValueError(f"{spec.name}: {inputs} inputs are not blocks of the previous layer's "
                                     f"{units} units")
                blocks = tensor.reshape(tensor.shape[0], tensor.shape[1], units, inputs // units, *tensor.shape[3:])
                blocks = _gather(blocks, 1, permutation) / _along(scale.to(tensor.dtype), 1, blocks.ndim)
                tensor = blocks.reshape(tensor.shape)
            out.append(tensor)
        return WeightBatch(self.space, tuple(out))
