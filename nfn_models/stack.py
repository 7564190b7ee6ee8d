"""The shape every invariant NFN here shares: features -> equivariant stack -> pool -> MLP head.

A model sets `weight_space`, `description`, `equivariant` (an `nn.Sequential` of layers that
map `WeightSpaceFeatures` to features), `pool` (features -> (B, D)) and `head` (an MLP) in its
constructor; `forward` is this one.
"""

from __future__ import annotations

import torch
from torch import nn

from nfn_models.features import NetworkDescription, WeightSpaceFeatures
from nfn_models.registry import check_weight_space
from zoo.weightspace import WeightBatch, WeightSpace


class InvariantStack(nn.Module):
    weight_spaces = ("feedforward",)  # the feature container describes MLPs and CNNs (`nfn_models.features`)
    weight_space: WeightSpace
    description: NetworkDescription
    equivariant: nn.Module
    pool: nn.Module
    head: nn.Module

    def forward(self, weights: WeightBatch) -> torch.Tensor:
        check_weight_space(self.weight_space, weights)
        features = WeightSpaceFeatures.from_weight_batch(weights, self.description)  # C = 1
        return self.head(self.pool(self.equivariant(features)))  # (B, out_features)
