"""Monomial-NFN: an invariant NFN for permutations with positive scalings or sign flips.

Tran, Vo, Tran-Huu, Nguyen & Nguyen, "Equivariant Neural Functional Networks for Monomial Matrix Groups"
(NeurIPS 2024), Sec. 4-5 and the generalization-prediction experiment (Sec. 6). The model is a stack of
equivariant `MonomialLinear` layers, the group's invariant pool and an MLP head. The nonlinearity between
equivariant layers must commute with the group. ReLU is positively homogeneous (relu(d z) = d relu(z), d >
0), which suits the scaling group. Tanh is odd, which suits the sign group.

For the invariant output of the sign group, the last equivariant layer is followed by |.| instead (the
authors' `S_tanh_abs_gen` preset). That makes the pooled features sign invariant. They are then pooled as
HNP's are (`GROUP_POOLS`). `MonomialPool`'s normalization is left out: it removes positive factors, which
the sign group does not have.

For the scaling group ReLU follows every equivariant layer but the last, which has none. This departs on
purpose from the authors' HNPS preset, which has a ReLU there too. A middle bias b_l[j] reaches the pool
only through its sign. Everything on its path is positively homogeneous, and the pool normalizes. So a final
ReLU that leaves one of the 5 channels alive makes that path constant. That freezes its parameters'
gradients at exactly zero, which happened for about 1 in 6 random initializations. Without it the gradients
are generic.

The other defaults are that preset's: equivariant channels 16, 16, 5 and a head of two hidden layers of
width 200. With `output="weights"` (INR editing) the group's nonlinearity follows every layer of `channels`.
Then a last `MonomialLinear` to one channel, with nothing after it, gives a weight delta
(`nfn_models.stack`). That delta is equivariant to the group. The generalization task runs `group="scale"`
on CNN-ReLU zoos and `group="sign"` on CNN-tanh zoos.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch
from torch import nn

from nfn_models.features import FeatureActivation, NetworkDescription
from nfn_models.layers import HNPPool, MonomialLinear, MonomialPool, check_channels, check_head_hparams, mlp
from nfn_models.registry import register_model
from nfn_models.stack import InvariantStack, check_output
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightSpace

# The equivariant nonlinearity each group allows, and what ends the equivariant stack.
GROUP_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"scale": nn.ReLU, "sign": nn.Tanh}


class _Abs(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.abs()


GROUP_FINAL_ACTIVATIONS: dict[str, Callable[[], nn.Module]] = {"scale": nn.Identity, "sign": _Abs}
# The invariant pool each group needs after its final activation: the scaling group's removes
# each entry's positive factor by normalizing its feature vector (`MonomialPool`); the sign
# group has no positive factor to remove (|.| has already made every feature sign invariant),
# so it pools as HNP does. Normalizing there would throw information away, and all of it with
# one channel: a 1-vector of |.| normalizes to 1 whatever the member (the INR classifier's
# 64, 64, 1 stack then predicted a constant class).
GROUP_POOLS: dict[str, Callable[[NetworkDescription, int], nn.Module]] = {
    "scale": MonomialPool, "sign": lambda description, channels: HNPPool(description)}


@dataclasses.dataclass(frozen=True)
class MonomialNFNConfig:
    group: str = "scale"  # "scale": ReLU nets (positive scalings); "sign": tanh/sine nets (sign flips)
    channels: tuple[int, ...] = (16, 16, 5)  # the paper's generalization-prediction preset
    hidden_sizes: tuple[int, ...] = (200, 200)  # the preset's head: two hidden layers of 200
    activation: str = "relu"  # in the head only; the equivariant stack's is fixed by `group`
    dropout: float = 0.0  # in the head only; the preset uses none
    out_features: int = 1  # one scalar per checkpoint for regression tasks (e.g. test accuracy)
    output: str = "invariant"  # "weights": an equivariant weight-space output (a delta), no pool or head

    def validate(self, where: str, key: str) -> None:
        check_head_hparams(where, key, self.hidden_sizes, self.activation, self.dropout, self.out_features)
        check_group(where, key, self.group)
        check_channels(where, key, self.channels)
        check_output(where, key, self.output)


def check_group(where: str, key: str, group: str) -> None:
    """The monomial group must be one whose nonlinearity we know (`GROUP_ACTIVATIONS`)."""
    if group not in GROUP_ACTIVATIONS:
        prefix = f"{key}." if key else ""
        raise SchemaError(where, f"{prefix}group", f"expected one of {sorted(GROUP_ACTIVATIONS)}, got {group!r}")


@register_model("monomial_nfn")
class MonomialNFN(InvariantStack):
    """WeightBatch -> [MonomialLinear -> activation]* -> the group's pool -> MLP -> (B, out_features)."""

    Config = MonomialNFNConfig
    # Tran et al. 2024's settings: generalization prediction (the defaults; `group` as the zoo's
    # activation) and INR classification of SIRENs (sign flips; the authors' S_sin_abs stack of
    # 64, 64, 1 channels and a head of 1000 with dropout 0.1, 10 classes). Their classifier feeds
    # the |.| features through Fourier features and HNP layers before pooling; ours pools them
    # directly, which keeps the whole model sign invariant.
    # INR editing: the authors put two sign-equivariant layers (1 -> 16 -> 1) in front of NP's
    # editing network, which makes the whole not sign equivariant; ours is the monomial stack
    # alone, at the NFN editing network's width (3 layers of 128, then the 1-channel layer).
    PRESETS = {"generalization": {},
               "inr-classification": {"group": "sign", "channels": (64, 64, 1), "hidden_sizes": (1000,),
                                      "dropout": 0.1, "out_features": 10},
               "inr-editing": {"group": "sign", "channels": (128, 128, 128), "output": "weights"},
               # the CPU budget's: the classifier as the paper's (it is cheap); the editor at 32 channels
               "inr-classification-budget": {"group": "sign", "channels": (64, 64, 1), "hidden_sizes": (1000,),
                                             "dropout": 0.1, "out_features": 10},
               "inr-editing-budget": {"group": "sign", "channels": (32, 32, 32), "output": "weights"}}

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__()
        self.weight_space = weight_space
        self.config = MonomialNFNConfig(**hparams)
        self.config.validate(f"model {type(self).__name__}", "")
        self.description = NetworkDescription.from_weight_space(weight_space)
        group = self.config.group
        blocks: list[nn.Module] = []
        width = 1
        invariant = self.config.output == "invariant"
        for index, channels in enumerate(self.config.channels):
            last = index == len(self.config.channels) - 1 and invariant
            activation = (GROUP_FINAL_ACTIVATIONS if last else GROUP_ACTIVATIONS)[group]()
            blocks += [MonomialLinear(self.description, width, channels, group), FeatureActivation(activation)]
            width = channels
        if invariant:
            self.pool = GROUP_POOLS[group](self.description, width)
            self.head = mlp(MonomialPool.num_features(self.description, width), self.config.hidden_sizes,
                            self.config.out_features, self.config.activation, self.config.dropout)
        else:
            blocks.append(MonomialLinear(self.description, width, 1, group))
            self.pool = self.head = None
        self.equivariant = nn.Sequential(*blocks)

    @property
    def symmetries(self) -> tuple[str, ...]:
        return ("permutation", self.config.group)
