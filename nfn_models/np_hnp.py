"""NP-NFN and HNP-NFN: invariant permutation-equivariant NFNs for feedforward weight spaces.

Zhou et al., "Permutation Equivariant Neural Functionals" (NeurIPS 2023), Sec. 3-4. The model is a stack of
equivariant NF-Layers (NP or HNP, `nfn_models.layers`) with pointwise ReLUs, an invariant pool, and an MLP
head. The defaults are the paper's generalization-prediction preset: equivariant channels 16, 16, 5 and a
head of width 1000. The output is invariant to the hidden-unit permutations of the input network. NP's is
invariant to input/output permutations too. It is not invariant to ReLU networks' positive scalings or
tanh/sine sign flips; Monomial-NFN adds those.

With `output="weights"` the stack ends in an equivariant layer of one channel (`nfn_models.stack`). The
model then outputs a weight delta. That is the paper's INR editing (Sec. 5.3). Its preset is 3 equivariant
layers of 128 channels, then the 1-channel layer.
"""

from __future__ import annotations

import dataclasses

from torch import nn

from nfn_models.features import FeatureActivation, NetworkDescription
from nfn_models.layers import (ACTIVATIONS, HNPLinear, HNPPool, NPLinear, NPPool, check_channels, check_head_hparams,
                               mlp)
from nfn_models.layers.encoding import FourierFeatures, IOPositionEncoding
from nfn_models.registry import register_model
from nfn_models.stack import InvariantStack, check_output
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightSpace


@dataclasses.dataclass(frozen=True)
class EquivariantNFNConfig:
    channels: tuple[int, ...] = (16, 16, 5)  # the paper's generalization-prediction preset
    hidden_sizes: tuple[int, ...] = (1000,)  # the paper's head width for that preset
    activation: str = "relu"  # between equivariant layers and in the head; a name in ACTIVATIONS
    dropout: float = 0.0  # in the head only; the preset uses none
    out_features: int = 1  # one scalar per checkpoint for regression tasks (e.g. test accuracy)
    # input encodings (`nfn_models.layers.encoding`), off by default; the INR-classification preset uses both
    fourier_features: int = 0  # m > 0: every scalar -> 2 m random Fourier features (Gaussian, std fourier_scale)
    fourier_scale: float = 10.0
    io_encoding: bool = False  # append the sinusoidal layer and input/output position channels (NP's fix)
    io_max_freq: float = 10.0
    io_num_bands: int = 6
    output: str = "invariant"  # "weights": an equivariant weight-space output (a delta), no pool or head

    def validate(self, where: str, key: str) -> None:
        check_head_hparams(where, key, self.hidden_sizes, self.activation, self.dropout, self.out_features)
        check_channels(where, key, self.channels)
        check_output(where, key, self.output)
        prefix = f"{key}." if key else ""
        for name in ("fourier_features", "io_num_bands"):
            if getattr(self, name) < 0:
                raise SchemaError(where, f"{prefix}{name}", f"expected a count >= 0, got {getattr(self, name)}")
        for name in ("fourier_scale", "io_max_freq"):
            if not getattr(self, name) > 0:
                raise SchemaError(where, f"{prefix}{name}", f"expected a positive number, got {getattr(self, name)}")


class EquivariantNFN(InvariantStack):
    """WeightBatch -> features -> [equivariant layer -> activation]* -> pool -> MLP -> (B, out_features)."""

    Config = EquivariantNFNConfig
    symmetries: tuple[str, ...] = ("permutation",)
    # Zhou et al. 2023's settings (the authors' configs): generalization prediction on the Small
    # CNN Zoo is the defaults; INR classification (MNIST SIRENs, 10 classes) uses 3 layers of 256
    # channels, random Fourier features (128, scale 3), a head of 1000 with dropout 0.1, and for NP
    # the input/output position encoding (3 bands up to frequency 3). INR editing (stylize_siren
    # configs, equiv.yaml / equiv_io.yaml): Fourier features (128, scale 3), 3 layers of 128
    # channels, then the 1-channel layer (the task adds the learned output scale); NP adds the
    # position encoding (3 bands up to frequency 3).
    PRESETS = {"generalization": {},
               "inr-classification": {"channels": (256, 256, 256), "hidden_sizes": (1000,), "dropout": 0.1,
                                      "out_features": 10, "fourier_features": 128, "fourier_scale": 3.0},
               "inr-editing": {"channels": (128, 128, 128), "fourier_features": 128, "fourier_scale": 3.0,
                               "output": "weights"},
               # the CPU budget's (README, INR tasks): 32 channels and 32 Fourier features (paper: 256 or
               # 128 of each; timings in docs/performance.md)
               "inr-classification-budget": {"channels": (32, 32, 32), "hidden_sizes": (1000,), "dropout": 0.1,
                                             "out_features": 10, "fourier_features": 32, "fourier_scale": 3.0},
               "inr-editing-budget": {"channels": (32, 32, 32), "fourier_features": 32, "fourier_scale": 3.0,
                                      "output": "weights"}}
    LAYER: type[nn.Module] = NPLinear
    POOL: type[nn.Module] = NPPool

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__()
        self.weight_space = weight_space
        self.config = EquivariantNFNConfig(**hparams)
        self.description = NetworkDescription.from_weight_space(weight_space)
        blocks: list[nn.Module] = []
        width = 1
        if self.config.fourier_features:
            blocks.append(FourierFeatures(width, self.config.fourier_features, self.config.fourier_scale))
            width = 2 * self.config.fourier_features
        if self.config.io_encoding:
            encoding = IOPositionEncoding(self.description, self.config.io_max_freq, self.config.io_num_bands)
            blocks.append(encoding)
            width += encoding.channels
        for channels in self.config.channels:
            blocks += [self.LAYER(self.description, width, channels),
                       FeatureActivation(ACTIVATIONS[self.config.activation]())]
            width = channels
        if self.config.output == "weights":
            blocks.append(self.LAYER(self.description, width, 1))
            self.pool = self.head = None
        else:
            self.pool = self.POOL(self.description)
            self.head = mlp(self.POOL.num_features(self.description, width), self.config.hidden_sizes,
                            self.config.out_features, self.config.activation, self.config.dropout)
        self.equivariant = nn.Sequential(*blocks)



@register_model("np")
class NPNFN(EquivariantNFN):
    """NP layers: equivariant to permutations of every unit axis, inputs and outputs included."""

    LAYER, POOL = NPLinear, NPPool
    PRESETS = {**EquivariantNFN.PRESETS,
               "inr-classification": {**EquivariantNFN.PRESETS["inr-classification"], "io_encoding": True,
                                      "io_max_freq": 3.0, "io_num_bands": 3},
               "inr-editing": {**EquivariantNFN.PRESETS["inr-editing"], "io_encoding": True, "io_max_freq": 3.0,
                               "io_num_bands": 3},
               **{name: {**EquivariantNFN.PRESETS[name], "io_encoding": True, "io_max_freq": 3.0, "io_num_bands": 3}
                  for name in ("inr-classification-budget", "inr-editing-budget")}}


@register_model("hnp")
class HNPNFN(EquivariantNFN):
    """HNP layers: equivariant to hidden-unit permutations only (inputs and outputs stay ordered)."""

    LAYER, POOL = HNPLinear, HNPPool
