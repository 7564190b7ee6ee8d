"""The pooled CNN family: the CNN members of the Model Zoos (Schürholt et al. 2022), import-only.

The paper, "Model Zoos: A Dataset of Diverse Populations of Neural Network Models", trains populations of small CNNs.
Its authors are Schürholt, Taskiran, Knyazev, Giró-i-Nieto and Borth (NeurIPS 2022 Datasets and Benchmarks;
arXiv 2209.14764).
The exact member is the reference code's, read for facts.
That code is ModelZoos/ModelZooDataset, `code/model_definitions/def_net.py`.
Each convolution has no padding and stride 1.
Where the architecture says so, a 2x2 max pool follows it, *then* the activation, then dropout.
The last feature map is flattened channel-major into a dense hidden layer, with its activation and dropout.
A dense layer to the classes ends the member.

CNN-s (`model::type` CNN) takes 28x28 inputs.
It has conv 8@5x5, pool, conv 6@5x5, pool, and conv 4@2x2 without a pool.
It flattens 4x3x3 = 36 -> 20 -> 10: 2,464 parameters on one input channel, 2,864 on three.

CNN-l (`CNN3`) takes 32x32 inputs.
It has conv 16@3x3, 32@3x3 and 15@3x3, each pooled, and flattens 60 -> 20 -> 10.

Inputs arrive as [0, 1] pixels (`zoo.data.images`).
They are normalized as the zoo's torchvision transform did, (x - input_mean) / input_std.
`input_crop: center` center-crops a larger image to `image_size`, as the SVHN zoo's CenterCrop(28).
Activations follow the reference's table; LeakyReLU's slope is PyTorch's default 0.01.

The symmetry is `zoo.symmetry.flatten`'s.
It permutes every conv layer's channels and the hidden dense units.
The flatten makes the last conv's channel a block of H*W dense inputs.
A 2x2 max pool commutes with permutations and with positive scaling.
It does not commute with a sign flip, since max(-x) = -min(x).
So ReLU and LeakyReLU members also get positive per-unit scales.
Tanh members get only the permutations.
Their sign symmetry holds on the unpooled layers alone, which the group does not declare.
Sigmoid, GELU and SiLU members get permutations.

The family is import-only: `nfnzoo import model-zoos` writes its members (`zoo.imports.model_zoos`).
It has no training recipe, and `IMPORT_ONLY` names the importer.
`nfnzoo generate` refuses its specs, and `train_population` raises.
The bundled `model-zoos-mnist` records the MNIST hyperparameter zoo's recipe.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Literal

import torch
import torch.nn.functional as F
from torch import nn

from zoo.data.images import SOURCE_INFO, TaskData, image_source_names, load_classifier_data
from zoo.families.base import Family, MemberSize, register_family
from zoo.symmetry.flatten import FlattenedFeedforwardSymmetry
from zoo.training.train import CLASSIFICATION_METRICS, evaluate_sets
from zoo.validation.domains import Classes, Coefficient, LearningRate, Probability, Real, Scale, Size
from zoo.weightspace import WeightSpace

# the reference's get_nonlin table (def_net.py)
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "leakyrelu": F.leaky_relu, "relu": F.relu, "tanh": torch.tanh, "sigmoid": torch.sigmoid,
    "silu": F.silu, "gelu": F.gelu}
# the rescalings each activation commutes with, through a max pool (module docstring)
SYMMETRY_MODES: dict[str, str] = {"relu": "scale", "leakyrelu": "scale"}


@dataclasses.dataclass(frozen=True)
class PooledCNNArchitecture:
    in_channels: Size = 1
    image_size: Size = 28  # the side the convolutions expect
    channels: tuple[Size, ...] = (8, 6, 4)  # each convolution's output channels
    kernel_sizes: tuple[Size, ...] = (5, 5, 2)
    pooled: tuple[bool, ...] = (True, True, False)  # a 2x2 max pool after the convolution, before its activation
    hidden: Size = 20  # the dense hidden layer's width
    num_classes: Classes = 10
    input_mean: Real = 0.1307  # torchvision Normalize's mean, one for every channel
    input_std: Scale = 0.3081
    input_crop: Literal["none", "center"] = "none"  # "center": center-crop larger images to image_size

    def validate(self, where: str, key: str) -> None:
        """One entry per convolution in channels, kernel_sizes and pooled, and a feature map left at the end."""
        from zoo.validation.schema import SchemaError

        if not len(self.channels) == len(self.kernel_sizes) == len(self.pooled) or not self.channels:
            raise SchemaError(where, f"{key}.channels", f"channels {list(self.channels)}, kernel_sizes "
                              f"{list(self.kernel_sizes)} and pooled {list(self.pooled)} must be non-empty and of "
                              "one length (one entry per convolution)")
        if self.feature_side() < 1:
            raise SchemaError(where, f"{key}.image_size", f"a {self.image_size}x{self.image_size} input shrinks to "
                              f"nothing through kernels {list(self.kernel_sizes)} and pools {list(self.pooled)}")

    def feature_side(self) -> int:
        """The last feature map's side: each conv takes k - 1, each pool halves (floor)."""
        side = self.image_size
        for kernel, pooled in zip(self.kernel_sizes, self.pooled):
            side = side - kernel + 1
            side = side // 2 if pooled else side
        return side

    @property
    def flat_features(self) -> int:
        return self.channels[-1] * self.feature_side() ** 2


@dataclasses.dataclass(frozen=True)
class PooledCNNHParams:
    """The reference config's keys: model::nlin, model::init_type, model::dropout, optim::*, training::batchsize."""

    activation: Literal["leakyrelu", "relu", "tanh", "sigmoid", "silu", "gelu"]
    init: Literal["uniform", "normal", "kaiming_uniform", "kaiming_normal", "xavier_uniform", "xavier_normal"]
    dropout: Probability  # after the pooled convolutions' activations and the hidden layer's (CNN-l: every conv's)
    optimizer: Literal["adam", "sgd", "rms_prop"]
    learning_rate: LearningRate
    weight_decay: Coefficient  # the optimizer's weight_decay
    momentum: Coefficient  # SGD's and RMSprop's; 0 where the config has none (Adam takes none)
    batch_size: Size


class PooledCNN(nn.Module):
    def __init__(self, arch: PooledCNNArchitecture, activation: str = "relu"):
        super().__init__()
        self.arch, self.activation = arch, ACTIVATIONS[activation]
        channels = arch.in_channels
        for i, (width, kernel) in enumerate(zip(arch.channels, arch.kernel_sizes)):
            self.add_module(f"conv{i + 1}", nn.Conv2d(channels, width, kernel))
            channels = width
        self.dense1 = nn.Linear(arch.flat_features, arch.hidden)
        self.dense2 = nn.Linear(arch.hidden, arch.num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """[0, 1] pixels (B, C, H, W) -> logits (B, classes); dropout is off (members are only evaluated)."""
        arch = self.arch
        if arch.input_crop == "center" and x.shape[-1] > arch.image_size:
            top, left = (x.shape[-2] - arch.image_size) // 2, (x.shape[-1] - arch.image_size) // 2
            x = x[..., top:top + arch.image_size, left:left + arch.image_size]
        if tuple(x.shape[-3:]) != (arch.in_channels, arch.image_size, arch.image_size):
            raise ValueError(f"pooled_cnn expects ({arch.in_channels}, {arch.image_size}, {arch.image_size}) "
                             f"inputs, got {tuple(x.shape[-3:])}")
        h = (x - arch.input_mean) / arch.input_std
        for i, pooled in enumerate(arch.pooled):
            h = getattr(self, f"conv{i + 1}")(h)  # (B, channels_i, H', W')
            h = self.activation(F.max_pool2d(h, 2, 2) if pooled else h)
        h = self.activation(self.dense1(h.flatten(1)))  # channel-major flatten: (B, C * H' * W')
        return self.dense2(h)


@register_family("pooled_cnn")
class PooledCNNFamily(Family):
    Architecture = PooledCNNArchitecture
    HParams = PooledCNNHParams
    METRICS = dict.fromkeys(CLASSIFICATION_METRICS, float)
    IMPORT_ONLY = "model-zoos"

    def build(self, architecture: dict, hparams: dict | None = None) -> PooledCNN:
        arch = PooledCNNArchitecture(**architecture)
        return PooledCNN(arch) if hparams is None else PooledCNN(arch, hparams["activation"])

    def weight_space(self, architecture: dict) -> WeightSpace:
        return WeightSpace.from_state_dict(self.build(architecture).state_dict())

    def member_size(self, architecture: dict) -> MemberSize:
        """`PooledCNN`'s parameters: each convolution, the flattened features -> hidden, hidden -> classes."""
        a = PooledCNNArchitecture(**architecture)
        parameters, channels = 0, a.in_channels
        for width, kernel in zip(a.channels, a.kernel_sizes):
            parameters, channels = parameters + channels * width * kernel ** 2 + width, width
        parameters += (a.flat_features + 1) * a.hidden + (a.hidden + 1) * a.num_classes
        widths = {"in_channels": a.in_channels, **{f"channels[{i}]": width for i, width in enumerate(a.channels)},
                  "hidden": a.hidden, "num_classes": a.num_classes}
        return MemberSize(parameters, widths, len(a.channels) + 2)

    def symmetry(self, architecture: dict, hparams: dict) -> FlattenedFeedforwardSymmetry:
        """Channel and hidden-unit permutations; positive scales too for ReLU and LeakyReLU (module docstring)."""
        return FlattenedFeedforwardSymmetry(self.weight_space(architecture),
                                            SYMMETRY_MODES.get(hparams["activation"], "permutation"))

    def data_sources(self, architecture: dict) -> list[str]:
        return image_source_names()

    def load_data(self, spec) -> TaskData:
        arch = PooledCNNArchitecture(**spec.architecture)
        return load_classifier_data(spec, arch.in_channels, arch.num_classes)

    def train_population(self, spec, runs, data, emit) -> None:
        raise NotImplementedError(f"family {self.name!r} is import-only (nfnzoo import model-zoos): it has no "
                                  "training recipe, so it cannot generate a zoo")

    def train_run(self, spec, run, data, emit) -> None:
        self.train_population(spec, [run], data, emit)

    def forward_flops(self, spec) -> int:
        """FLOPs (2 per multiply-add) of one example's forward pass."""
        arch = PooledCNNArchitecture(**spec.architecture)
        side, channels, flops = arch.image_size, arch.in_channels, 0
        for width, kernel, pooled in zip(arch.channels, arch.kernel_sizes, arch.pooled):
            side = side - kernel + 1
            flops += 2 * side * side * width * channels * kernel * kernel
            side, channels = (side // 2 if pooled else side), width
        return flops + 2 * (arch.flat_features * arch.hidden + arch.hidden * arch.num_classes)

    def run_flops(self, spec, hparams: dict) -> float:
        """Evaluation of each checkpoint on the test set (the family trains nothing)."""
        test = SOURCE_INFO[spec.dataset.name].test_size if spec.dataset.name in SOURCE_INFO else 0
        return float(self.forward_flops(spec) * test * len(spec.training.checkpoint_epochs))

    def metric_matches(self, name: str, stored: float, recomputed: float, data: TaskData) -> bool:
        """Accuracy within one and a half test examples, since a near-tie may flip.

        The loss must agree to 1e-4 relative.
        The reference scored the whole test set as one float32 batch; we score it in batches.
        """
        if name.endswith("_accuracy"):
            return abs(stored - recomputed) <= 1.5 / len(data.test)
        return math.isclose(stored, recomputed, rel_tol=1e-4, abs_tol=1e-5)

    def evaluate(self, spec, hparams: dict, weights: dict[str, torch.Tensor], data: TaskData) -> dict[str, float]:
        """Test loss (mean cross-entropy: the reference's NLL of log-softmax) and accuracy of stored weights.

        The reference's validation set is its own seeded split of the training images, which ours is not.
        """
        model = self.build(spec.architecture, hparams)
        model.load_state_dict(weights)
        return evaluate_sets(model, {"test": data.test}, spec.training.eval_batch_size)
