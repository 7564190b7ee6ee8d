"""STATNN: an MLP on simple statistics of each weight and bias tensor.

Unterthiner et al. 2020, "Predicting Neural Network Accuracy from Weights" (arXiv:2002.11448), Sec. 4: the
weight-statistics features (their W-tilde) fed to a DNN estimator. For every tensor of the weight space we
take 7 statistics of its entries. These are the mean, the variance and the q-th quantiles for q in {0, 0.25,
0.5, 0.75, 1} (minimum, quartiles, maximum). The paper uses the input layer and the top layers of deeper
nets. Our weight spaces are small, so every tensor contributes: 7 * len(weight_space.tensors) features.
Statistics of a tensor's entries do not depend on their order. So STATNN is invariant to any permutation of
entries within a tensor. Hence it is invariant to the neuron permutation symmetries of the networks it
reads.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from nfn_models.layers import check_head_hparams, input_normalization, mlp
from nfn_models.registry import check_weight_space, register_model, weight_space_kind
from zoo.weightspace import WeightBatch, WeightSpace

QUANTILES = (0.0, 0.25, 0.5, 0.75, 1.0)
STATISTICS = ("mean", "variance", *(f"q{int(q * 100)}" for q in QUANTILES))


def quantiles(values: torch.Tensor, qs: tuple[float, ...]) -> torch.Tensor:
    """Quantiles along the last dimension with linear interpolation (numpy's default method).

    Sorting once serves all quantiles. Unlike `torch.quantile`, it has no input-size limit. values: (B, N)
    -> (B, len(qs)).
    """
    ordered = values.sort(dim=-1).values  # (B, N)
    n = ordered.shape[-1]
    position = torch.tensor(qs, dtype=values.dtype, device=values.device) * (n - 1)  # (Q,)
    lower = position.floor().long()
    upper = position.ceil().long()
    fraction = position - lower  # (Q,)
    return torch.lerp(ordered[:, lower], ordered[:, upper], fraction)  # (B, Q)


def tensor_statistics(weights: WeightBatch) -> torch.Tensor:
    """The 7 statistics of every tensor, concatenated in weight-space order.

    Returns (B, 7 * num_tensors). The statistics of tensor i are columns 7i..7i+6 in the order of
    `STATISTICS`. The variance is the population variance (numpy's ddof=0), which is defined for
    single-entry tensors too.
    """
    features = []
    for tensor in weights.tensors:
        flat = tensor.reshape(tensor.shape[0], -1)  # (B, numel)
        mean = flat.mean(dim=1, keepdim=True)
        variance = flat.var(dim=1, unbiased=False, keepdim=True)
        features += [mean, variance, quantiles(flat, QUANTILES)]
    return torch.cat(features, dim=1)


@dataclasses.dataclass(frozen=True)
class STATNNConfig:
    hidden_sizes: tuple[int, ...] = (128, 128)  # the 7-per-tensor features are few; a small MLP suffices
    activation: str = "relu"  # a name in nfn_models.layers.ACTIVATIONS
    dropout: float = 0.0  # few, already aggregated features rarely need dropout
    out_features: int = 1  # one scalar per checkpoint for regression tasks (e.g. test accuracy)

    def validate(self, where: str, key: str) -> None:
        check_head_hparams(where, key, self.hidden_sizes, self.activation, self.dropout, self.out_features)


@register_model("statnn")
class STATNN(nn.Module):
    """Per-tensor statistics (B, 7 * num_tensors) -> standardization -> MLP -> (B, out_features)."""

    Config = STATNNConfig
    # the defaults serve both tasks; INR classification predicts 10 classes
    PRESETS = {"generalization": {}, "inr-classification": {"out_features": 10},
               "inr-classification-budget": {"out_features": 10}}  # cheap already: the same

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__()
        self.weight_space = weight_space
        self.config = STATNNConfig(**hparams)
        num_features = len(STATISTICS) * len(weight_space.tensors)
        self.normalize = input_normalization(num_features)
        self.head = mlp(num_features, self.config.hidden_sizes, self.config.out_features,
                        self.config.activation, self.config.dropout)

    @property
    def symmetries(self) -> tuple[str, ...]:
        """Per-tensor statistics ignore the units' order. That covers the hidden-unit permutations of a CNN
        or SIREN, and a transformer's neuron relabellings ("attention-permutation"). Its GL(d) factors
        change the statistics."""
        return ("permutation",) if weight_space_kind(self.weight_space) == "feedforward" else ("attention-permutation",)

    def forward(self, weights: WeightBatch) -> torch.Tensor:
        check_weight_space(self.weight_space, weights)
        features = tensor_statistics(weights)  # (B, 7 * num_tensors)
        return self.head(self.normalize(features))  # (B, out_features)
