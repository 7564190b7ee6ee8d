"""The shape every feedforward NFN here shares: features -> equivariant stack -> pool -> MLP head.

With `output="weights"` it is instead features -> equivariant stack -> one channel: a weight-space output.

A model sets these in its constructor: `weight_space`, `description`, `config` (with an `output` field) and
`equivariant`. The last is an `nn.Sequential` of layers that map `WeightSpaceFeatures` to features. For the
invariant output it also sets `pool` (features -> (B, D)) and `head` (an MLP). `forward` is this one.

With `output="weights"` the stack's last layer has one output channel and no nonlinearity after it. The
model returns a `WeightBatch` of the input's weight space. That is the weight delta of INR editing (Zhou et
al. 2023 Sec. 5.3). It is equivariant, not invariant, to the groups the model claims (`symmetries`).
`tests/nfn_models/test_exactness.py` checks that.
"""

from __future__ import annotations

from typing import Literal

import torch
from torch import nn

from nfn_models.features import NetworkDescription, WeightSpaceFeatures
from nfn_models.registry import check_weight_space
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightBatch, WeightSpace

Output = Literal["invariant", "weights"]


class InvariantStack(nn.Module):
    weight_spaces = ("feedforward",)  # the feature container describes MLPs and CNNs (`nfn_models.features`)
    outputs = ("invariant", "weights")  # what `config.output` may be (`nfn_models.registry.model_outputs`)
    weight_space: WeightSpace
    description: NetworkDescription
    equivariant: nn.Module
    pool: nn.Module | None
    head: nn.Module | None

    def forward(self, weights: WeightBatch) -> torch.Tensor | WeightBatch:
        check_weight_space(self.weight_space, weights)
        features = self.equivariant(WeightSpaceFeatures.from_weight_batch(weights, self.description))  # C = 1 in
        if self.config.output == "weights":
            return features.to_weight_batch(self.weight_space)  # the last layer has one channel
        return self.head(self.pool(features))  # (B, out_features)


def check_output(where: str, key: str, output: str) -> None:
    """`output` must be "invariant" or "weights"; raises `SchemaError`."""
    if output not in ("invariant", "weights"):
        prefix = f"{key}." if key else ""
        raise SchemaError(where, f"{prefix}output", f"expected 'invariant' or 'weights', got {output!r}")
