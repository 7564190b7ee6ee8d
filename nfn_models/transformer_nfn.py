"""Transformer-NFN: an invariant NFN for the weights of small transformers.

Tran et al. 2025, "Equivariant Neural Functional Networks for Transformers" (ICLR 2025), Sec. 4-6 and its
generalization-prediction model. The model reads three parts of a member.

(1) The encoder blocks' weights go through equivariant layers
(`nfn_models.layers.attention.AttentionLinear`), with ReLU on the MLP tensors between them. Then comes the
invariant layer (`AttentionInvariant`, a LayerNorm per block). The blocks' outputs are concatenated and
LayerNorm'd. An MLP (Linear, then two [LayerNorm, ReLU, Linear]) maps them to the encoder's features.

(2) The classifier head's weights go through an MLP on their flattened values. It has Linear-ReLU layers,
then Linear-ReLU to its features.

(3) The input stem's weights (the patch embedding) go through one Linear. A text member's frozen word
vectors are not weights.

The three feature vectors are concatenated, and a Linear maps them to the output. The paper applies a
sigmoid and binary cross-entropy: the task's `loss: bce`.

The defaults are the paper's (facts from the authors' code, Fsoft-AIC/Transformer-NFN). There is one
equivariant layer 1 -> 10 and an invariant layer 10 -> 10. The encoder MLP has width 10 and 10 outputs. The
classifier MLP is (10, 10) with 10 outputs, and there are 10 embedding features. That is about 1.8M
parameters on the Small Transformer Zoo's member. 72% of them sit in each block's two D^3 terms ([W_Q W_K^T]
-> W_B, b_B).

Where ours differs: it takes any number of blocks and heads; theirs hard-codes the per-block LayerNorms of
2. It runs on CPU or CUDA. It reads residual members, with the pi_O axis fixed (see the layers' module).
Initialization is N(0, 1/fan-in) per output. Theirs is Xavier-normal with a squared scale on the product
terms.

The output is exactly invariant to the paper's group on every block, claimed as "attention". That is
`zoo.symmetry.attention` with `mlp_scaling=False, permute_block_outputs=False`. It is not invariant to
positive scalings of the MLP's hidden units. Nor is it invariant to permutations of the model dimension
after the MLP. Those are symmetries of the members that the paper's group leaves out.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from nfn_models.attention_space import AttentionLayout, block_features, flat
from nfn_models.layers import check_channels
from nfn_models.layers.attention import AttentionInvariant, AttentionLinear, MLPActivation, axis_sizes
from nfn_models.registry import check_weight_space, register_model
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightBatch, WeightSpace


@dataclasses.dataclass(frozen=True)
class TransformerNFNConfig:
    num_heads: int = 2  # of the members (not visible in their tensors' shapes); checked against the zoo
    residual: bool = False  # whether the members have residual connections; checked against the zoo
    channels: tuple[int, ...] = (10,)  # each equivariant layer's output channels
    invariant_channels: int = 10  # per block, after the invariant layer
    layer_norm: bool = True  # after the invariant layer (per block) and in the encoder MLP
    encoder_hidden: int = 10  # the encoder MLP's width
    encoder_features: int = 10
    classifier_hidden_sizes: tuple[int, ...] = (10, 10)  # the classifier-head MLP
    classifier_features: int = 10
    embedding_features: int = 10  # 0: the stem's weights are not read
    out_features: int = 1

    def validate(self, where: str, key: str) -> None:
        prefix = f"{key}." if key else ""
        check_channels(where, key, self.channels)
        counts = {"num_heads": self.num_heads, "invariant_channels": self.invariant_channels,
                  "encoder_hidden": self.encoder_hidden, "encoder_features": self.encoder_features,
                  "classifier_features": self.classifier_features, "out_features": self.out_features}
        for name, value in counts.items():
            if value < 1:
                raise SchemaError(where, f"{prefix}{name}", f"expected a positive count, got {value}")
        if self.embedding_features < 0 or any(size < 1 for size in self.classifier_hidden_sizes):
            raise SchemaError(where, f"{prefix}classifier_hidden_sizes",
                              "expected positive sizes (and embedding_features >= 0), got "
                              f"{list(self.classifier_hidden_sizes)} and {self.embedding_features}")


def _features_mlp(in_features: int, hidden: tuple[int, ...], out_features: int) -> nn.Sequential:
    """Linear-ReLU layers ending in a ReLU'd feature vector (the paper's flattened-weights encoder)."""
    layers: list[nn.Module] = []
    for width in (*hidden, out_features):
        layers += [nn.Linear(in_features, width), nn.ReLU()]
        in_features = width
    return nn.Sequential(*layers)


@register_model("transformer_nfn")
class TransformerNFN(nn.Module):
    """WeightBatch -> [encoder blocks: AttentionLinear* -> AttentionInvariant -> MLP | head: MLP | stem:
    Linear] -> Linear."""

    Config = TransformerNFNConfig
    # Tran et al. 2025's generalization-prediction model (the defaults)
    PRESETS = {"generalization": {}}
    weight_spaces = ("transformer",)
    ARCHITECTURE_FIELDS = ("num_heads", "residual")  # of the members; the harness fills them from the zoo
    symmetries = ("attention", "attention-permutation")  # the second is a subgroup of the first

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__()
        self.weight_space = weight_space
        self.config = c = TransformerNFNConfig(**hparams)
        c.validate(f"model {type(self).__name__}", "")
        self.layout = layout = AttentionLayout.from_space(weight_space, c.num_heads)
        sizes = axis_sizes(c.num_heads, layout.d_model, layout.d_k, layout.d_v, layout.mlp_dim)
        blocks: list[nn.Module] = []
        for width_in, width_out in zip((1, *c.channels), c.channels):
            blocks += [AttentionLinear(layout.num_blocks, sizes, width_in, width_out, c.residual),
                       MLPActivation(nn.ReLU())]
        self.equivariant = nn.Sequential(*blocks)
        self.invariant = AttentionInvariant(layout.num_blocks, sizes, c.channels[-1], c.invariant_channels,
                                            c.residual, c.layer_norm)
        width, norm = layout.num_blocks * c.invariant_channels, (nn.LayerNorm if c.layer_norm else nn.Identity)
        self.encoder_head = nn.Sequential(
            norm(width), nn.Linear(width, c.encoder_hidden),
            norm(c.encoder_hidden), nn.ReLU(), nn.Linear(c.encoder_hidden, c.encoder_hidden),
            norm(c.encoder_hidden), nn.ReLU(), nn.Linear(c.encoder_hidden, c.encoder_features))
        classifier_size = sum(weight_space.tensors[i].numel for i in layout.classifier)
        self.classifier = (_features_mlp(classifier_size, c.classifier_hidden_sizes, c.classifier_features)
                           if classifier_size else None)
        embedding_size = sum(weight_space.tensors[i].numel for i in layout.embedding)
        self.embedding = (nn.Linear(embedding_size, c.embedding_features)
                          if embedding_size and c.embedding_features else None)
        total = (c.encoder_features + (c.classifier_features if self.classifier is not None else 0)
                 + (c.embedding_features if self.embedding is not None else 0))
        self.output = nn.Linear(total, c.out_features)

    def encode(self, weights: WeightBatch) -> torch.Tensor:
        """The encoder blocks' invariant features, (B, num_blocks * invariant_channels)."""
        return self.invariant(self.equivariant(block_features(weights, self.layout)))

    def forward(self, weights: WeightBatch) -> torch.Tensor:
        check_weight_space(self.weight_space, weights)
        features = [self.encoder_head(self.encode(weights))]
        if self.classifier is not None:
            features.append(self.classifier(flat(weights, self.layout.classifier)))
        if self.embedding is not None:
            features.append(self.embedding(flat(weights, self.layout.embedding)))
        return self.output(torch.cat(features, dim=1))  # (B, out_features)
