"""TensorMoments: three moments of each weight tensor's entries, fed to a small MLP.

The mean, the root mean square and the mean absolute value of a tensor's entries do not depend
on their order, so the output is invariant to the hidden-unit permutations of a CNN or a SIREN
(nfnzoo's "permutation" group). They do change when a ReLU unit's incoming weights are scaled
by s and its outgoing ones by 1/s, so the model claims no "scale": `OverclaimingMoments` does,
falsely, and `nfnzoo bench check-model my_nfn.model:OverclaimingMoments` says so.

The model contract (see nfnzoo's `nfn_models.registry`): an `nn.Module` built as
`Model(weight_space, **hparams)`, a dataclass `Config` of its hyperparameters (each with a
default), `symmetries` (what the output is exactly invariant to), `weight_spaces` (the kinds of
members it reads), and a forward pass from a `WeightBatch` to (B, out_features).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from zoo.weightspace import WeightBatch, WeightSpace


@dataclasses.dataclass(frozen=True)
class TensorMomentsConfig:
    hidden: int = 32  # three numbers per tensor are few: a narrow MLP suffices
    out_features: int = 1  # one scalar per checkpoint (the generalization task sets it)


class TensorMoments(nn.Module):
    """(B, 3 * num_tensors) moments -> LayerNorm -> MLP -> (B, out_features)."""

    Config = TensorMomentsConfig
    symmetries = ("permutation",)
    weight_spaces = ("feedforward",)  # a transformer's GL(d) factors change the moments

    def __init__(self, weight_space: WeightSpace, hidden: int = 32, out_features: int = 1):
        super().__init__()
        self.weight_space = weight_space
        features = 3 * len(weight_space.tensors)
        self.head = nn.Sequential(nn.LayerNorm(features), nn.Linear(features, hidden), nn.ReLU(),
                                  nn.Linear(hidden, out_features))

    def forward(self, weights: WeightBatch) -> torch.Tensor:
        moments = []
        for tensor in weights.tensors:
            flat = tensor.reshape(tensor.shape[0], -1)  # (B, numel)
            moments += [flat.mean(1), flat.square().mean(1).sqrt(), flat.abs().mean(1)]
        return self.head(torch.stack(moments, dim=1))  # (B, out_features)


class OverclaimingMoments(TensorMoments):
    """The same model claiming ReLU scalings too: a false claim `check-model` must catch."""

    symmetries = ("permutation", "scale")
