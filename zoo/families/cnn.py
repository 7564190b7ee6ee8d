"""The CNN family: the Small CNN Zoo member of Unterthiner et al. 2020.

The paper is "Predicting Neural Network Accuracy from Weights" (Unterthiner, Keysers, Gelly,
Bousquet, Tolstikhin, 2020), Section 3.
The member has three 3x3 convolutions of 16 channels with stride 2.
Global average pooling and a dense layer to 10 classes follow.
That is 4,970 parameters on one input channel.
The hyperparameters are their Table 1's: optimizer, learning rate, L2 coefficient,
initialization and its std, activation (ReLU or tanh), dropout rate and train fraction.
Dropout follows each convolution's activation.

Two architecture fields say which function the 4,970 weights compute.
The released training code is google-research `dnn_predict_accuracy/train_network.py`.
It builds Keras' `Conv2D(16, 3, strides=2)` with its default "valid" padding (28 -> 13 -> 6 -> 2 on MNIST).
It also scales pixels to [-1, 1].
So the bundled `cnn-*` specs say `padding: valid` and `input_range: signed`.
A spec without these fields means what every zoo before them was made with.
That is `padding: symmetric` (kernel_size // 2 zeros on every side, 28 -> 14 -> 7 -> 4).
It is also `input_range: unit`, with pixels in [0, 1].
A field a spec leaves out stays out of its hash, so those zoos keep their ids.
They retrain to their bits through `population_convolution: grouped`.
See `_grouped_conv` and `_unfold_conv`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Literal

import torch
import torch.nn.functional as F
from torch import nn

from zoo.training import simd
from zoo.data.images import SOURCE_INFO, TaskData, image_source_names, load_classifier_data, split_sizes
from zoo.validation.domains import Classes, Coefficient, Fraction, LearningRate, Probability, Scale, Size
from zoo.families.base import CheckpointResult, Family, MemberSize, register_family
from zoo.training.population import populations, train_classifier_population
from zoo.training.draws import solo_draws
from zoo.training.train import (CLASSIFICATION_METRICS, OPTIMIZERS, evaluate_sets, run_train_subset, seeded_generator,
                                train_classifier)
from zoo.symmetry.feedforward import FeedforwardSymmetry
from zoo.weightspace import WeightSpace

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": F.relu, "tanh": torch.tanh}
# the same functions for populations: tanh through NumPy's SIMD kernel on the CPU (`zoo.training.simd`)
POPULATION_ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"relu": F.relu, "tanh": simd.tanh}
# the hidden-unit rescalings each activation commutes with (zoo.symmetry.feedforward)
SYMMETRY_MODES: dict[str, str] = {"relu": "scale", "tanh": "sign"}

# zeros on every side of a convolution's input, from its kernel size
PADDINGS: dict[str, Callable[[int], int]] = {"symmetric": lambda kernel_size: kernel_size // 2, "valid": lambda _: 0}
# pixels arrive in [0, 1] (`zoo.data.images`); the network sees them in this range
INPUT_RANGES: dict[str, tuple[float, float]] = {"unit": (0.0, 1.0), "signed": (-1.0, 1.0)}

INITIALIZERS: dict[str, Callable[[torch.Tensor, float, torch.Generator], torch.Tensor]] = {
    "normal": lambda w, std, g: nn.init.normal_(w, 0.0, std, generator=g),
    "truncated_normal": lambda w, std, g: nn.init.trunc_normal_(w, 0.0, std, -2 * std, 2 * std, generator=g),
    # a uniform distribution with the given standard deviation
    "uniform": lambda w, std, g: nn.init.uniform_(w, -math.sqrt(3) * std, math.sqrt(3) * std, generator=g),
}


@dataclasses.dataclass(frozen=True)
class CNNArchitecture:
    in_channels: Size = 1  # 1 for MNIST and the grayscale variants
    channels: Size = 16  # every conv layer's width
    num_conv_layers: Size = 3
    kernel_size: Size = 3
    stride: Size = 2
    num_classes: Classes = 10
    # The defaults below are what zoos made before these fields existed mean; the bundled specs
    # set the released code's values explicitly.
    padding: Literal["symmetric", "valid"] = "symmetric"  # "valid": Keras' default, the released model's
    input_range: Literal["unit", "signed"] = "unit"  # "signed": pixels scaled to [-1, 1], as the released code does
    # How a population computes its convolutions (the numerics of training, not the function):
    # "unfold" gives a member the same bits in a population of any size; "grouped" (oneDNN's
    # grouped convolution, faster with symmetric padding) has a backward that rounds some
    # gradients by population size (the first layer's weights where it was found; the biases' at 3
    # members on two threads here), kept so that zoos made with it retrain to their bits.
    population_convolution: Literal["grouped", "unfold"] = "grouped"


def scale_input(x: torch.Tensor, input_range: str) -> torch.Tensor:
    """[0, 1] pixels to the architecture's range (min + x * (max - min), as the released code)."""
    low, high = INPUT_RANGES[input_range]
    return x if (low, high) == (0.0, 1.0) else low + x * (high - low)


def output_size(size: int, arch: CNNArchitecture) -> int:
    """A feature map's side after one convolution of `arch`."""
    return (size + 2 * PADDINGS[arch.padding](arch.kernel_size) - arch.kernel_size) // arch.stride + 1


@dataclasses.dataclass(frozen=True)
class CNNHParams:
    optimizer: Literal["adam", "rmsprop", "sgd", "sgd_momentum"]
    learning_rate: LearningRate
    l2: Coefficient  # coefficient of the sum of squared weights added to the loss
    init: Literal["normal", "truncated_normal", "uniform"]
    init_std: Scale  # standard deviation of the weight initialization (biases start at 0)
    activation: Literal["relu", "tanh"]
    dropout: Probability  # rate after each convolution's activation
    train_fraction: Fraction  # share of the training pool this run sees


class SmallCNN(nn.Module):
    def __init__(self, arch: CNNArchitecture, activation: str = "relu", dropout: float = 0.0):
        super().__init__()
        self.activation, self.dropout, self.input_range = ACTIVATIONS[activation], dropout, arch.input_range
        channels, padding = arch.in_channels, PADDINGS[arch.padding](arch.kernel_size)
        for i in range(arch.num_conv_layers):
            conv = nn.Conv2d(channels, arch.channels, arch.kernel_size, arch.stride, padding=padding)
            self.add_module(f"conv{i + 1}", conv)
            channels = arch.channels
        self.convs = [getattr(self, f"conv{i + 1}") for i in range(arch.num_conv_layers)]
        self.dense = nn.Linear(channels, arch.num_classes)

    def forward(self, x: torch.Tensor, masks=None) -> torch.Tensor:
        """Logits.

        In training mode with dropout, `masks(layer, shape)` gives layer i's 0/1 keep mask.
        Layers count from 1 (`zoo.training.draws`).
        """
        h = scale_input(x, self.input_range)  # (B, C, H, W)
        for i, conv in enumerate(self.convs, start=1):
            h = self.activation(conv(h))
            if self.training and self.dropout > 0:
                h = h * masks(i, tuple(h.shape)).to(h.device) / (1 - self.dropout)
        return self.dense(h.mean(dim=(2, 3)))  # global average pooling: (B, channels) -> (B, classes)


def _to_grouped(x: torch.Tensor, shared: bool, K: int) -> torch.Tensor:
    """(K, B, C, H, W) per-member inputs, or (B, C, H, W) shared ones -> (B, K*C, H, W) channels-last.

    Member k's channels are k*C .. (k+1)*C - 1.
    """
    if shared:
        B, C, H, W = x.shape
        grouped = x.permute(0, 2, 3, 1).unsqueeze(3).expand(B, H, W, K, C)
    else:
        _, B, C, H, W = x.shape
        grouped = x.permute(1, 3, 4, 0, 2)  # (B, H, W, K, C)
    return grouped.reshape(B, H, W, K * C).permute(0, 3, 1, 2).contiguous(memory_format=torch.channels_last)


def _grouped_conv(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, stride: int, padding: int) -> torch.Tensor:
    """K members' convolutions as one grouped convolution.

    Shapes: h (B, K*C, H, W) channels-last, weight (K, O, C, k, k), bias (K, O).
    The result is (B, K*O, H', W') channels-last.
    One grouped convolution runs far faster than K single ones (docs/performance.md).
    With two or more groups, a member's result and gradients are bitwise the same whatever K is.
    Its position does not matter either.
    A single group takes another kernel, so a population of one gets an inert all-zero partner.
    """
    K, out_channels = weight.shape[:2]
    weight, bias = weight.reshape(K * out_channels, *weight.shape[2:]), bias.reshape(K * out_channels)
    if K == 1:  # the partner's zeros get no gradient and add exact zeros to nothing
        h = torch.cat([h, torch.zeros_like(h)], dim=1).contiguous(memory_format=torch.channels_last)
        weight, bias = torch.cat([weight, torch.zeros_like(weight)]), torch.cat([bias, torch.zeros_like(bias)])
    out = F.conv2d(h, weight, bias, stride, padding, groups=max(K, 2))
    return out[:, :out_channels] if K == 1 else out


def _windows(size: int, k: int, stride: int) -> list[slice]:
    """The k slices of a side of `size` that the window offsets 0 .. k-1 read at `stride`."""
    count = (size - k) // stride + 1
    return [slice(a, a + stride * (count - 1) + 1, stride) for a in range(k)]


class _Patches(torch.autograd.Function):
    """h (K, C, H, W, B) -> its k x k windows at `stride` as columns (K, C*k*k, H'*W'*B).

    Examples are the innermost dimension, so every copy here moves runs of B contiguous values.
    That beats `unfold` on the examples-outer layout (docs/performance.md).
    The backward adds each window offset's gradient into a strided slice of zeros, in a fixed order.
    It is elementwise, so every input's gradient sums the same terms in the same order whatever K is.
    """

    @staticmethod
    def forward(ctx, h: torch.Tensor, k: int, stride: int) -> torch.Tensor:
        K, C, H, W, B = h.shape
        rows, columns = _windows(H, k, stride), _windows(W, k, stride)
        patches = h.new_empty(K, C, k, k, len(range(H)[rows[0]]), len(range(W)[columns[0]]), B)
        for a, row in enumerate(rows):
            for b, column in enumerate(columns):
                patches[:, :, a, b] = h[:, :, row, column]
        ctx.shape, ctx.k, ctx.stride = h.shape, k, stride
        return patches.view(K, C * k * k, -1)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        K, C, H, W, B = ctx.shape
        k, stride = ctx.k, ctx.stride
        rows, columns = _windows(H, k, stride), _windows(W, k, stride)
        grad = grad.view(K, C, k, k, len(range(H)[rows[0]]), len(range(W)[columns[0]]), B)
        grad_h = grad.new_zeros(K, C, H, W, B)
        for a, row in enumerate(rows):
            for b, column in enumerate(columns):
                grad_h[:, :, row, column] += grad[:, :, a, b]
        return grad_h, None, None


def _unfold_conv(h: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, stride: int, padding: int) -> torch.Tensor:
    """K members' convolutions as K matrix products over unfolded patches.

    Shapes: h (K, C, H, W, B), or (1, C, H, W, B) shared by all; weight (K, O, C, k, k); bias (K, O).
    The result is (K, O, H', W', B).
    Examples are innermost, so a layer's output is the next layer's input as it is.

    A member's output is its own matrix product.
    So is its weight gradient: its output gradient times its patches.
    Its input gradient is its weights times its output gradient, summed back over overlapping windows.
    These products and sums have the same shapes whatever K is.
    So a member gets the same bits alone and in a population of any size.
    """
    K, out_channels, C, k, _ = weight.shape
    if padding:
        h = F.pad(h, (0, 0, padding, padding, padding, padding))
    patches = _Patches.apply(h, k, stride).expand(K, -1, -1)  # (K, C*k*k, H'*W'*B); a shared input's are one copy
    out = torch.baddbmm(bias.unsqueeze(2), weight.reshape(K, out_channels, C * k * k), patches)  # (K, O, H'*W'*B)
    height, width = (h.shape[2] - k) // stride + 1, (h.shape[3] - k) // stride + 1
    return out.view(K, out_channels, height, width, h.shape[4])


def _activate(h: torch.Tensor, activations: list[str], width: int, member_dim: bool = False) -> torch.Tensor:
    """Each member's activation on its channels of h (B, K*width, H, W), or on h (K, ...) with `member_dim`."""
    if len(set(activations)) == 1:
        return POPULATION_ACTIVATIONS[activations[0]](h)
    relu = torch.tensor([a == "relu" for a in activations], device=h.device)
    relu = relu.view(-1, *[1] * (h.dim() - 1)) if member_dim else relu.repeat_interleave(width).view(1, -1, 1, 1)
    return torch.where(relu, F.relu(h), simd.tanh(h))


@register_family("cnn")
class CNNFamily(Family):
    Architecture = CNNArchitecture
    HParams = CNNHParams
    METRICS = dict.fromkeys(CLASSIFICATION_METRICS, float)

    # members per population: the family's measured choice (benchmarks/perf/generation.py,
    # docs/performance.md)
    POPULATION_SIZES = {"cpu": 16, "cuda": 256}
    FLOPS_HPARAMS = ("train_fraction",)

    def build(self, architecture: dict, hparams: dict | None = None) -> SmallCNN:
        arch = CNNArchitecture(**architecture)
        if hparams is None:
            return SmallCNN(arch)
        hp = CNNHParams(**hparams)
        return SmallCNN(arch, hp.activation, hp.dropout)

    def weight_space(self, architecture: dict) -> WeightSpace:
        return WeightSpace.from_state_dict(self.build(architecture).state_dict())

    def member_size(self, architecture: dict) -> MemberSize:
        """`SmallCNN`'s parameters: the first convolution, num_conv_layers - 1 more, the dense layer."""
        a = CNNArchitecture(**architecture)
        kernel = a.kernel_size ** 2
        first = a.in_channels * a.channels * kernel + a.channels
        later = (a.num_conv_layers - 1) * (a.channels * a.channels * kernel + a.channels)
        dense = a.channels * a.num_classes + a.num_classes
        return MemberSize(first + later + dense, {"in_channels": a.in_channels, "channels": a.channels,
                                                  "num_classes": a.num_classes}, a.num_conv_layers + 1)

    def symmetry(self, architecture: dict, hparams: dict) -> FeedforwardSymmetry:
        """Permutations of each conv layer's channels, with positive scaling (ReLU) or sign flips (tanh)."""
        return FeedforwardSymmetry(self.weight_space(architecture), SYMMETRY_MODES[hparams["activation"]])

    def data_sources(self, architecture: dict) -> list[str]:
        return image_source_names()

    def load_data(self, spec) -> TaskData:
        arch = CNNArchitecture(**spec.architecture)
        return load_classifier_data(spec, arch.in_channels, arch.num_classes)

    def initial_weights(self, spec, run) -> dict[str, torch.Tensor]:
        """The run's initialization, drawn from its own generator in parameter order (biases 0)."""
        hp = CNNHParams(**run.hparams)
        init = seeded_generator(run.seed, "init")
        weights = {}
        for name, parameter in self.build(spec.architecture).state_dict().items():
            weights[name] = (INITIALIZERS[hp.init](torch.empty_like(parameter), hp.init_std, init)
                             if name.endswith("weight") else torch.zeros_like(parameter))
        return weights

    def train_run(self, spec, run, data: TaskData, emit: Callable[[CheckpointResult], None]) -> None:
        """One run alone, with torch.optim: the reference the population trainer must match."""
        hp = CNNHParams(**run.hparams)
        model = self.build(spec.architecture, run.hparams)
        model.load_state_dict(self.initial_weights(spec, run))
        optimizer = OPTIMIZERS[hp.optimizer](model.parameters(), hp.learning_rate)
        train = run_train_subset(data.train, hp.train_fraction, run.seed)
        draws = solo_draws(spec.training.rng, run.seed, hp.dropout)
        for epoch, metrics, status in train_classifier(model, optimizer, hp.l2, train, data, spec.dataset,
                                                       spec.training, draws):
            weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
            emit(CheckpointResult(epoch, weights, metrics, status))

    def population_key(self, run) -> tuple:
        """An optimizer and a train fraction (equal steps per epoch) are shared by construction.

        So is an activation, so that each layer's is one elementwise call.
        """
        return run.hparams["optimizer"], run.hparams["train_fraction"], run.hparams["activation"]

    def train_population(self, spec, runs, data: TaskData, emit) -> None:
        """Runs with equal `population_key`s train together (`zoo.training.population`)."""
        size = self.population_size_on(data.train.x.device)
        for population in populations(runs, size, self.population_key):
            train_classifier_population(self, spec, population, data, emit)

    def population_forward(self, architecture: dict, params: dict[str, torch.Tensor], x: torch.Tensor, *,
                           activations: list[str], masks=None, shared_input: bool = False) -> torch.Tensor:
        """Logits (K, B, classes) of K members: x is (K, B, C, H, W), or (B, C, H, W) when shared.

        The members' convolutions run as K batched matrix products over unfolded patches (`_unfold_conv`).
        With `population_convolution: grouped`, they run as one grouped convolution instead.
        It spans K * channels in the channels-last layout (`_grouped_conv`).
        The dense layer runs as one batched matrix product.
        `masks(layer, shape)` gives dropout masks (K, *shape).
        """
        arch = CNNArchitecture(**architecture)
        K, padding = len(activations), PADDINGS[arch.padding](arch.kernel_size)
        x = scale_input(x, arch.input_range)
        if arch.population_convolution == "unfold":
            return self._unfold_forward(arch, params, x, activations, masks, padding)
        h = _to_grouped(x, shared_input, K)  # (B, K*C, H, W)
        for i in range(1, arch.num_conv_layers + 1):
            weight, bias = params[f"conv{i}.weight"], params[f"conv{i}.bias"]  # (K, O, I, k, k), (K, O)
            h = _activate(_grouped_conv(h, weight, bias, arch.stride, padding), activations, arch.channels)
            mask = masks(i, (h.shape[0], arch.channels, *h.shape[2:])) if masks is not None else None
            if mask is not None:  # (K, B, O, H', W') -> the layout of h
                h = h * _to_grouped(mask.to(h.device), False, K)
        # global average pooling (K, B, O), as rows of a contiguous copy: a channels-last reduction's
        # rounding depends on the channel count, a row's does not
        pooled = h.contiguous().flatten(2).mean(dim=2).view(h.shape[0], K, arch.channels).transpose(0, 1)
        return torch.baddbmm(params["dense.bias"].unsqueeze(1), pooled, params["dense.weight"].transpose(1, 2))

    @staticmethod
    def _unfold_forward(arch: CNNArchitecture, params: dict[str, torch.Tensor], x: torch.Tensor,
                        activations: list[str], masks, padding: int) -> torch.Tensor:
        """`population_forward` with `_unfold_conv`: x (K, B, C, H, W) or shared (B, C, H, W)."""
        h = x.permute(*range(x.dim() - 4), -3, -2, -1, -4)  # (K, C, H, W, B), or (C, H, W, B) shared
        h = (h.unsqueeze(0) if h.dim() == 4 else h).contiguous()
        for i in range(1, arch.num_conv_layers + 1):
            weight, bias = params[f"conv{i}.weight"], params[f"conv{i}.bias"]  # (K, O, I, k, k), (K, O)
            h = _activate(_unfold_conv(h, weight, bias, arch.stride, padding), activations, arch.channels,
                          member_dim=True)  # (K, O, H', W', B)
            mask = masks(i, (h.shape[4], h.shape[1], *h.shape[2:4])) if masks is not None else None
            if mask is not None:  # (K, B, O, H', W')
                h = h * mask.to(h.device).permute(0, 2, 3, 4, 1)
        pooled = h.flatten(2, 3).transpose(2, 3).contiguous().mean(dim=3).transpose(1, 2)  # (K, B, O): a row each
        return torch.baddbmm(params["dense.bias"].unsqueeze(1), pooled, params["dense.weight"].transpose(1, 2))

    def forward_flops(self, spec) -> int:
        """FLOPs (2 per multiply-add) of one example's forward pass."""
        arch = CNNArchitecture(**spec.architecture)
        _, height, width = SOURCE_INFO[spec.dataset.name].image_shape
        flops, channels = 0, arch.in_channels
        for _ in range(arch.num_conv_layers):
            height, width = output_size(height, arch), output_size(width, arch)
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

    def metric_matches(self, name: str, stored: float, recomputed: float, data: TaskData) -> bool:
        """Accuracy within one and a half examples (a near-tie may flip), losses to float32 order."""
        if name.endswith("_accuracy"):
            examples = len(data.validation) if name.startswith("val") else len(data.test)
            return abs(stored - recomputed) <= 1.5 / examples
        return super().metric_matches(name, stored, recomputed, data)

    def evaluate(self, spec, hparams: dict, weights: dict[str, torch.Tensor], data: TaskData) -> dict[str, float]:
        """Validation and test metrics of stored weights (train metrics depend on the run's subset)."""
        model = self.build(spec.architecture, hparams)
        model.load_state_dict(weights)
        return evaluate_sets(model, {"val": data.validation, "test": data.test}, spec.training.eval_batch_size)
