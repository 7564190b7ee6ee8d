"""DWSNets: an invariant network of DWS layers for MLP (SIREN) weight spaces.

Navon, Shamsian, Achituve, Fetaya, Chechik & Maron, "Equivariant Architectures for Learning in Deep Weight
Spaces" (ICML 2023). Sec. 5 composes the equivariant DWS layers (`nfn_models.layers.dws`, Sec. 4-5) with
pointwise nonlinearities into DWSNet. Sec. 5 and the Appendix make it invariant by pooling over the hidden
axes. The pool keeps what the fixed input and output axes index. W_0 is averaged over its hidden outputs
only, W_{L-1} over its hidden inputs only, and b_{L-1} is kept whole (`HNPPool`'s features). A fully
connected head follows. The stack follows the authors' MNIST INR classifier (AvivNavon/DWSNets
`DWSModelForClassification`):

    DWS(1 -> c_1), then for each next width c: [BatchNorm] -> ReLU -> Dropout -> DWS(-> c),
    then ReLU -> Dropout -> invariant pool -> MLP head.

BatchNorm (`FeatureBatchNorm`) normalizes each weight and bias tensor's channels over the batch and all its
entries. So it commutes with hidden permutations. With `output="weights"` the stack ends in a DWS layer of
one channel, with no pool, head or activation after it. The model then outputs a weight delta of the input's
space (`nfn_models.stack`), equivariant to hidden permutations.

Symmetries: hidden-unit permutations only. Not input/output permutations, since W_0's inputs and W_{L-1}'s
outputs are channels. Nor scalings or sign flips.

Weight spaces: the paper is about MLP weight spaces (the INR zoos). On a CNN a convolution's filter
positions become channels, as NP/HNP treat them. That extension is ours, not the paper's. There is no preset
for CNN generalization prediction, because the paper reports none. `generalization` is just the defaults (3
DWS layers of 16 channels, not a paper setting), which the registry asks every model to have.

Presets: `inr-classification` is the authors' MNIST INR script (`experiments/mnist/trainer.py` defaults).
That is hidden width 32, with 4 hidden DWS layers after the first (5 in all) and batch norm on. It has
dropout 0, one linear invariant output layer (`n_out_fc=1`) and 10 classes. They train with AdamW, lr 5e-3,
weight decay 5e-4 and batch 512, a task setting. Their script pools with max and uses set-attention (SAB)
blocks inside each layer. Here the layers are the paper's linear ones with mean pooling (see
`nfn_models.layers.dws`). So results are not expected to match theirs exactly.
"""

from __future__ import annotations

import dataclasses

from torch import nn

from nfn_models.features import FeatureActivation, NetworkDescription, WeightSpaceFeatures
from nfn_models.layers import ACTIVATIONS, HNPPool, check_channels, check_head_hparams, mlp
from nfn_models.layers.dws import DWSLinear
from nfn_models.registry import register_model
from nfn_models.stack import InvariantStack, check_output
from zoo.weightspace import WeightSpace


class FeatureBatchNorm(nn.Module):
    """One BatchNorm1d per weight and bias tensor, over its channels (batch and entries pooled)."""

    def __init__(self, description: NetworkDescription, channels: int):
        super().__init__()
        self.weights = nn.ModuleList(nn.BatchNorm1d(channels) for _ in description.layers)
        self.biases = nn.ModuleList(nn.BatchNorm1d(channels) for _ in description.layers)

    def forward(self, features: WeightSpaceFeatures) -> WeightSpaceFeatures:
        def normalize(norm: nn.BatchNorm1d, x):  # (B, C, *entries) -> the same
            return norm(x.flatten(2)).view(x.shape)

        return WeightSpaceFeatures(features.description,
                                   tuple(normalize(m, w) for m, w in zip(self.weights, features.weights)),
                                   tuple(normalize(m, b) for m, b in zip(self.biases, features.biases)))


@dataclasses.dataclass(frozen=True)
class DWSNetConfig:
    # DWS layer widths. Not a paper setting (`generalization` is these defaults): 3 of 16 keep the CNN
    # extension near 2M parameters on the Small CNN (each term maps C*9 to O*9 channels there); the
    # paper's INR classifier is 5 of 32 (the `inr-classification` preset)
    channels: tuple[int, ...] = (16, 16, 16)
    hidden_sizes: tuple[int, ...] = ()  # the head's hidden widths; () is their one linear layer (n_out_fc=1)
    activation: str = "relu"  # between DWS layers and in the head; a name in ACTIVATIONS
    dropout: float = 0.0  # on the features between DWS layers and before the pool (their do_rate)
    batch_norm: bool = True  # FeatureBatchNorm before each activation between layers (their add_bn)
    out_features: int = 1  # one scalar per checkpoint for regression tasks
    output: str = "invariant"  # "weights": a 1-channel DWS layer gives a weight delta, no pool or head

    def validate(self, where: str, key: str) -> None:
        check_head_hparams(where, key, self.hidden_sizes, self.activation, self.dropout, self.out_features)
        check_channels(where, key, self.channels)
        check_output(where, key, self.output)


@register_model("dwsnet")
class DWSNet(InvariantStack):
    """WeightBatch -> [DWS layer -> (BN) -> activation -> dropout]* -> pool -> MLP -> (B, out_features)."""

    Config = DWSNetConfig
    symmetries: tuple[str, ...] = ("permutation",)
    PRESETS = {"generalization": {},  # the defaults; the paper has no CNN generalization setting (see Config)
               "inr-classification": {"channels": (32, 32, 32, 32, 32), "hidden_sizes": (), "dropout": 0.0,
                                      "batch_norm": True, "out_features": 10},
               # 16 channels (the paper's 32) and 3 layers (its 5): the CPU budget's (timings in docs/performance.md)
               "inr-classification-budget": {"channels": (16, 16, 16), "hidden_sizes": (), "dropout": 0.0,
                                             "batch_norm": True, "out_features": 10},
               # INR editing: the DWSNet that Kofinas et al.'s style_editing runs (dwsnet.yaml: 4 hidden
               # layers of 32, batch norm, no dropout; max reduction, which our DWS layer does not use);
               # budget: the classification budget's widths
               "inr-editing": {"channels": (32, 32, 32, 32), "dropout": 0.0, "batch_norm": True, "output": "weights"},
               "inr-editing-budget": {"channels": (16, 16, 16), "dropout": 0.0, "batch_norm": True,
                                      "output": "weights"}}

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__()
        self.weight_space = weight_space
        self.config = DWSNetConfig(**hparams)
        self.description = NetworkDescription.from_weight_space(weight_space)
        config, description = self.config, self.description

        def between(width: int) -> list[nn.Module]:
            norm = [FeatureBatchNorm(description, width)] if config.batch_norm else []
            dropout = [FeatureActivation(nn.Dropout(config.dropout))] if config.dropout > 0 else []
            return [*norm, FeatureActivation(ACTIVATIONS[config.activation]()), *dropout]

        blocks: list[nn.Module] = [DWSLinear(description, 1, config.channels[0])]
        width = config.channels[0]
        for channels in config.channels[1:]:
            blocks += [*between(width), DWSLinear(description, width, channels)]
            width = channels
        if config.output == "weights":
            blocks += [*between(width), DWSLinear(description, width, 1)]
            self.pool = self.head = None
        else:
            # the authors' classifier: ReLU and dropout (no batch norm) before the invariant layer
            blocks += [FeatureActivation(ACTIVATIONS[config.activation]())]
            if config.dropout > 0:
                blocks.append(FeatureActivation(nn.Dropout(config.dropout)))
            self.pool = HNPPool(description)
            self.head = mlp(HNPPool.num_features(description, width), config.hidden_sizes, config.out_features,
                            config.activation, config.dropout)
        self.equivariant = nn.Sequential(*blocks)
