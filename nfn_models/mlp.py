"""MLP baseline: an MLP on the flattened weights of each checkpoint.

The "DNN on flattened weights" estimator of Unterthiner et al. 2020, "Predicting Neural Network Accuracy
from Weights" (arXiv:2002.11448). All parameters are concatenated in layer order and standardized per
coordinate. A fully connected network follows. It ignores every symmetry of the weight space, which makes it
the negative control for invariance tests. With `output="weights"` its last layer has one output per
parameter. These are unflattened into a weight batch: the MLP baseline of INR editing (Zhou et al. 2023,
Sec. 5.3). It is the authors' `MLPTransferNet`, three hidden layers of 1,000 (the `inr-editing` preset).
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from nfn_models.layers import check_head_hparams, input_normalization, mlp
from nfn_models.registry import check_weight_space, register_model
from nfn_models.stack import check_output
from zoo.weightspace import WeightBatch, WeightSpace


@dataclasses.dataclass(frozen=True)
class MLPConfig:
    hidden_sizes: tuple[int, ...] = (256, 256)  # two layers fit a few thousand checkpoints without overfitting fast
    activation: str = "relu"  # a name in nfn_models.layers.ACTIVATIONS
    dropout: float = 0.1  # flattened weights are high-dimensional; a little dropout regularizes
    out_features: int = 1  # one scalar per checkpoint for regression tasks (e.g. test accuracy)
    output: str = "invariant"  # "weights": one output per parameter, a weight batch (out_features unused)

    def validate(self, where: str, key: str) -> None:
        check_head_hparams(where, key, self.hidden_sizes, self.activation, self.dropout, self.out_features)
        check_output(where, key, self.output)


@register_model("mlp")
class MLP(nn.Module):
    """Flattened weights (B, num_params) -> standardization -> MLP -> (B, out_features)."""

    Config = MLPConfig
    # the defaults serve both tasks; INR classification predicts 10 classes
    PRESETS = {"generalization": {}, "inr-classification": {"out_features": 10},
               "inr-editing": {"hidden_sizes": (1000, 1000, 1000), "dropout": 0.0, "output": "weights"},
               # cheap already: the budget presets are the paper's
               "inr-classification-budget": {"out_features": 10},
               "inr-editing-budget": {"hidden_sizes": (1000, 1000, 1000), "dropout": 0.0, "output": "weights"}}
    symmetries: tuple[str, ...] = ()  # reads weights in a fixed order: no symmetry claimed
    outputs = ("invariant", "weights")

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__()
        self.weight_space = weight_space
        self.config = MLPConfig(**hparams)
        self.normalize = input_normalization(weight_space.num_params)
        out = weight_space.num_params if self.config.output == "weights" else self.config.out_features
        self.head = mlp(weight_space.num_params, self.config.hidden_sizes, out, self.config.activation,
                        self.config.dropout)

    def forward(self, weights: WeightBatch) -> torch.Tensor | WeightBatch:
        check_weight_space(self.weight_space, weights)
        output = self.head(self.normalize(weights.flatten()))  # (B, out_features or num_params)
        return WeightBatch.from_flat(self.weight_space, output) if self.config.output == "weights" else output
