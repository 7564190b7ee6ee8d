"""The CNN family: the Small CNN Zoo member of Unterthiner et al. 2020.

"Predicting Neural Network Accuracy from Weights" (Unterthiner, Keysers, Gelly, Bousquet,
Tolstikhin, 2020), Section 3: three 3x3 convolutions of 16 channels with stride 2, global
average pooling and a dense layer to 10 classes: 4,970 parameters on one input channel.
Hyperparameters (their Table 1): optimizer, learning rate, L2 coefficient, initialization
and its std, activation (ReLU or tanh), dropout rate and train fraction. Dropout follows
each convolution's activation. "Same" padding is PyTorch's symmetric padding of 1, which
gives the paper's 28 -> 14 -> 7 -> 4 feature maps.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Literal

import torch
import torch.nn.functional as F
from torch import nn

from zoo.data import SOURCE_INFO, TaskData, load_task_data, split_sizes
from zoo.families import CheckpointResult, Family, register_family
from zoo.train import CLASSIFICATION_METRICS, OPTIMIZERS, evaluate_sets, run_train_subset, seeded_generator, train_classifier
from zoo.symmetry.feedforward import FeedforwardSymmetry
from zoo.weightspace import WeightSpace

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": F.relu, "tanh": torch.tanh}
# the hidden-unit rescalings each activation commutes with (zoo.symmetry.feedforward)
SYMMETRY_MODES: dict[str, str] = {"relu": "scale", "tanh": "sign"}

INITIALIZERS: dict[str, Callable[[torch.Tensor, float, torch.Generator], torch.Tensor]] = {
    "normal": lambda w, std, g: nn.init.normal_(w, 0.0, std, generator=g),
    "truncated_normal": lambda w, std, g: nn.init.trunc_normal_(w, 0.0, std, -2 * std, 2 * std, generator=g),
    # a uniform distribution with the given standard deviation
    "uniform": lambda w, std, g: nn.init.uniform_(w, -math.sqrt(3) * std, math.sqrt(3) * std, generator=g),
}


@dataclasses.dataclass(frozen=True)
class CNNArchitecture:
    in_channels: int = 1  # 1 for MNIST and the grayscale variants
    channels: int = 16  # every conv layer's width
    num_conv_layers: int = 3
    kernel_size: int = 3
    stride: int = 2
    num_classes: int = 10


@dataclasses.dataclass(frozen=True)
class CNNHParams:
    optimizer: Literal["adam", "rmsprop", "sgd", "sgd_momentum"]
    learning_rate: float
    l2: float  # coefficient of the sum of squared weights added to the loss
    init: Literal["normal", "truncated_normal", "uniform"]
    init_std: float  # standard deviation of the weight initialization (biases start at 0)
    activation: Literal["relu", "tanh"]
    dropout: float  # rate after each convolution's activation
    train_fraction: float  # share of the training pool this run sees


class SmallCNN(nn.Module):
    def __init__(self, arch: CNNArchitecture, activation: str = "relu", dropout: float = 0.0):
        super().__init__()
        self.activation, self.dropout = ACTIVATIONS[activation], dropout
        channels = arch.in_channels
        for i in range(arch.num_conv_layers):
            conv = nn.Conv2d(channels, arch.channels, arch.kernel_size, arch.stride, padding=arch.kernel_size // 2)
            self.add_module(f"conv{i + 1}", conv)
            channels = arch.channels
        self.convs = [getattr(self, f"conv{i + 1}") for i in range(arch.num_conv_layers)]
        self.dense = nn.Linear(channels, arch.num_classes)

    def forward(self, x: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
        h = x  # (B, C, H, W)
        for conv in self.convs:
            h = self.activation(conv(h))
            if self.training and self.dropout > 0:
                keep = torch.empty_like(h).bernoulli_(1 - self.dropout, generator=generator)
                h = h * keep / (1 - self.dropout)
        return self.dense(h.mean(dim=(2, 3)))  # global average pooling: (B, channels) -> (B, classes)


@register_family("cnn")
class CNNFamily(Family):
    Architecture = CNNArchitecture
    HParams = CNNHParams
    METRICS = dict.fromkeys(CLASSIFICATION_METRICS, float)

    def build(self, architecture: dict, hparams: dict | None = None) -> SmallCNN:
        arch = CNNArchitecture(**architecture)
        if hparams is None:
            return SmallCNN(arch)
        hp = CNNHParams(**hparams)
        return SmallCNN(arch, hp.activation, hp.dropout)

    def weight_space(self, architecture: dict) -> WeightSpace:
        return WeightSpace.from_state_dict(self.build(architecture).state_dict())

    def symmetry(self, architecture: dict, hparams: dict) -> FeedforwardSymmetry:
        """Permutations of each conv layer's channels, with positive scaling (ReLU) or sign flips (tanh)."""
        return FeedforwardSymmetry(self.weight_space(architecture), SYMMETRY_MODES[hparams["activation"]])

    def load_data(self, spec) -> TaskData:
        data = load_task_data(spec.dataset)
        arch = CNNArchitecture(**spec.architecture)
        if data.train.x.shape[1] != arch.in_channels or data.num_classes != arch.num_classes:
            raise ValueError(f"{spec.name}: architecture expects {arch.in_channels} input channels and "
                             f"{arch.num_classes} classes; {spec.dataset.name} has {data.train.x.shape[1]} and {data.num_classes}")
        return data

    def train_run(self, spec, run, data: TaskData, emit: Callable[[CheckpointResult], None]) -> None:
        hp = CNNHParams(**run.hparams)
        model = self.build(spec.architecture, run.hparams)
        init = seeded_generator(run.seed, "init")
        with torch.no_grad():
            for name, parameter in model.named_parameters():
                if name.endswith("weight"):
                    INITIALIZERS[hp.init](parameter, hp.init_std, init)
                else:
                    parameter.zero_()
        optimizer = OPTIMIZERS[hp.optimizer](model.parameters(), hp.learning_rate)
        train = run_train_subset(data.train, hp.train_fraction, run.seed)
        for epoch, metrics, status in train_classifier(model, optimizer, hp.l2, train, data, spec.dataset,
                                                       spec.training, run.seed):
            weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
            emit(CheckpointResult(epoch, weights, metrics, status))

    def forward_flops(self, spec) -> int:
        """FLOPs (2 per multiply-add) of one example's forward pass."""
        arch = CNNArchitecture(**spec.architecture)
        _, height, width = SOURCE_INFO[spec.dataset.name].image_shape
        flops, channels = 0, arch.in_channels
        for _ in range(arch.num_conv_layers):
            height, width = -(-height // arch.stride), -(-width // arch.stride)  # "same" padding
            flops += 2 * height * width * arch.channels * channels * arch.kernel_size ** 2
            channels = arch.channels
        return flops + 2 * channels * arch.num_classes

    def run_flops(self, spec, hparams: dict) -> float:
        """Training (forward + backward ~ 3 forwards) and checkpoint evaluation of one run."""
        train, validation, test = split_sizes(spec.dataset)
        seen = math.ceil(hparams["train_fraction"] * train)
        evaluated = min(seen, spec.dataset.eval_train_size) + validation + test
        forward = self.forward_flops(spec)
        return forward * (3 * seen * spec.training.epochs + evaluated * len(spec.training.checkpoint_epochs))

    def evaluate(self, spec, hparams: dict, weights: dict[str, torch.Tensor], data: TaskData) -> dict[str, float]:
        """Validation and test metrics of stored weights (train metrics depend on the run's subset)."""
        model = self.build(spec.architecture, hparams)
        model.load_state_dict(weights)
        return evaluate_sets(model, {"val": data.validation, "test": data.test}, spec.training.eval_batch_size)
