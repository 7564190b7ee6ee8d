"""Hidden-unit symmetries of a CNN whose last convolution is flattened into a dense layer.

When a convolution's (C, H, W) output is flattened channel-major into the next dense layer's
C * H * W inputs (`nn.Flatten` on NCHW), permuting and rescaling the C channels moves whole
blocks of H * W consecutive input columns of the dense weight: with the dense weight viewed as
(out, C, H * W), channel c's block is column c of the middle axis, so the action on it is the
feedforward action (`zoo.symmetry.feedforward`, Hecht-Nielsen 1990; Zhou et al. 2023, Sec. 2)
along that axis. Everything else (sampling, inverse, composition) is the feedforward group's.
"""

from __future__ import annotations

import dataclasses

from zoo.symmetry.feedforward import FeedforwardElement, FeedforwardSymmetry, _along, _gather
from zoo.weightspace import WeightBatch


@dataclasses.dataclass(frozen=True)
class FlattenedFeedforwardSymmetry(FeedforwardSymmetry):
    """A `FeedforwardSymmetry` where a weight whose inputs outnumber the previous layer's units
    reads them as channel-major blocks (a flatten), each block permuted and scaled as a unit."""

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
