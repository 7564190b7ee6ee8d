"""ProbeGen and vanilla probing: a black box that reads each member's outputs on learned probes.

Kahana, Horwitz, Shuval, Hoshen 2024, "Deep Linear Probe Generators for Weight Space Learning"
(arXiv:2410.10811, ICLR 2025). The model never reads a weight as a feature. It runs every member network f_w
on N shared probe inputs x_1 .. x_N. It concatenates the outputs and classifies them with an MLP (the
paper's probing formulation, its Fig. 1):

    y(w) = MLP([f_w(x_1), ..., f_w(x_N)]).

Vanilla probing (their baseline) learns the probes x_n themselves (`generator="none"`). ProbeGen (their
method) generates them as x_n = G(z_n), from learned latent codes z_n (`generator="linear"`). G is a shared
deep *linear* generator: linear maps with no nonlinearity between them. That is an inductive bias towards
structured probes, which reduces overfitting. Before the image bound, all probes lie in one affine space of
dimension <= d. For images, transposed convolutions also correlate neighbouring pixels.

Facts from the authors' code (jonkahana/ProbeGen, read for facts only):

(1) Images. Each z_n in R^32 is a 1x1 map. It passes 6 transposed convolutions, 1x1 -> 32x32, with (kernel,
stride, padding) (4,1,0) (4,2,1) (4,2,1) (3,1,1) (4,2,1) (3,1,1). They have 8w, 4w, 2w, 2w, w and C channels
(w = 16). One tanh bounds the final probe; it is not a nonlinearity between layers. Vanilla probing of
images learns the 32x32 probes and bounds them with the same tanh.

(2) INR coordinates. Each z_n in R^32 passes two linear layers 32 -> 32 -> in_features, unbounded. Vanilla
probing learns the coordinates directly (standard normal init).

(3) They use 128 probes (64 in their smaller setting). A member's outputs (N, out) are flattened probe-major
to N * out features. They are neither normalised nor softmaxed: a CNN's logits, a SIREN's intensities. The
MLP is 6 linear layers of width 256 with ReLU.

Our CNN members read [0, 1] pixels mapped to their `input_range` (`zoo.families.cnn.scale_input`). So a
probe t in [-1, 1] is the pixel (t + 1) / 2, which on a `signed` member is exactly the authors' probe. The
Small CNN's global average pooling reads 32x32 probes whatever its data's size (MNIST's 28x28).

One departure, a switch (`normalize_outputs`, on by default). Each of the N * out features is standardized
before the MLP. A BatchNorm without affine parameters does this. Its running statistics use momentum 0.1, so
they follow the probes as they are learned. A CNN's logits on probes far from its data reach the hundreds,
and the thousands on unconstrained weights. There the head's float32 arithmetic loses ~1e-6 absolute with
the batch size. Standardized, it is well conditioned, as the repo's other heads are
(`nfn_models.layers.input_normalization`, for fixed features).

The member's forward pass is the family's own batched function of its weights. For the CNN that is
`population_forward`: every member's convolutions in one grouped convolution, the probes shared. For the
SIREN it is `siren_forward`. What the tensors' shapes do not say comes from the config. The CNN's activation
is `member_activation`, a zoo row's hyperparameter. The benchmark harness fills it from the rows the task
reads (`HPARAM_FIELDS`). It refuses a run over ReLU and tanh CNNs together until a `subset: {activation:
...}` picks one. The harness also fills fields from the zoo's architecture (`ARCHITECTURE_FIELDS`). These
are the CNN's stride, padding and input range, and the SIREN's frequencies, coordinate order and output
offset.

Transformer members are not read yet. The family's batched functional forward belongs to the trainer
(`zoo.families.transformer_population.PopulationTransformer`). It is built with the task data's embedding,
e.g. text members' frozen word vectors, which the weights do not hold. Image and text members also need
different probes (patches, tokens). A transformer ProbeGen would generate those first.

Symmetry: the output depends on the weights only through the member's function. So it is invariant to every
transformation that preserves that function, up to float rounding, though no layer is built equivariant.
These are hidden-unit permutations, with positive scalings for ReLU CNNs. For tanh CNNs and SIRENs they come
with sign flips, since sin and tanh are odd.
"""

from __future__ import annotations

import dataclasses
from typing import Callable, Literal

import torch
from torch import nn

from nfn_models.layers import check_head_hparams, mlp
from nfn_models.registry import check_weight_space, register_model
from zoo.families import create_family
from zoo.families.inr_model import INRArchitecture, siren_forward
from zoo.validation.domains import Real, Scale, Size
from zoo.weightspace import WeightBatch, WeightSpace

IMAGE_SIZE = 32  # the image generator's output side (1 -> 4 -> 8 -> 16 -> 16 -> 32 -> 32)
# the hidden-unit groups that preserve a member's function, by its activation
GROUPS = {"relu": ("permutation", "scale"), "tanh": ("permutation", "sign"), "sine": ("permutation", "sign")}


@dataclasses.dataclass(frozen=True)
class ProbeGenConfig:
    generator: Literal["linear", "none"] = "linear"  # "linear": ProbeGen; "none": vanilla probing
    num_probes: Size = 128  # the paper's main setting (64 its smaller one)
    latent_dim: Size = 32  # each probe's latent code z_n (the authors' 32)
    generator_width: Size = 16  # the image generator's channel unit w (8w, 4w, 2w, 2w, w channels)
    hidden_sizes: tuple[int, ...] = (256,) * 5  # with the output layer the paper's 6 linear layers of 256
    activation: str = "relu"  # the MLP's, a name in nfn_models.layers.ACTIVATIONS
    dropout: float = 0.0  # the paper uses none
    out_features: int = 1  # one scalar per checkpoint for regression tasks (e.g. test accuracy)
    normalize_outputs: bool = True  # standardize each output feature (module docstring); False: the authors' code
    # What the members compute that their shapes do not show (see the module docstring):
    member_activation: Literal["relu", "tanh"] = "relu"  # a CNN's (SIRENs are sine nets whatever this says)
    stride: Size = 2  # a CNN's convolution stride (zoo.families.cnn.CNNArchitecture)
    padding: Literal["symmetric", "valid"] = "symmetric"
    input_range: Literal["unit", "signed"] = "unit"
    first_omega_0: Scale = 30.0  # a SIREN's (zoo.families.inr_model.INRArchitecture)
    hidden_omega_0: Scale = 30.0
    coordinates: Literal["row_column", "column_row"] = "row_column"
    output_offset: Real = 0.0

    def validate(self, where: str, key: str) -> None:
        check_head_hparams(where, key, self.hidden_sizes, self.activation, self.dropout, self.out_features)


# --- the members' functions: probes (N, ...) -> outputs (B, N, out) -----------------------

def cnn_architecture(space: WeightSpace, config: ProbeGenConfig) -> dict | None:
    """The `zoo.families.cnn` architecture of `space` (None when it is no such CNN's)."""
    shapes = {t.name: t.shape for t in space.tensors}
    if "conv1.weight" not in shapes or "dense.weight" not in shapes or len(shapes["conv1.weight"]) != 4:
        return None
    channels, in_channels, kernel_size, _ = shapes["conv1.weight"]
    architecture = {"in_channels": in_channels, "channels": channels, "num_conv_layers": len(space.tensors) // 2 - 1,
                    "kernel_size": kernel_size, "num_classes": shapes["dense.weight"][0], "stride": config.stride,
                    "padding": config.padding, "input_range": config.input_range,
                    # 2x the unfold forward here; a member's bits still do not depend on the batch
                    "population_convolution": "grouped"}
    return architecture if create_family("cnn").weight_space(architecture) == space else None


def siren_architecture(space: WeightSpace, config: ProbeGenConfig) -> INRArchitecture | None:
    """The SIREN architecture of `space` (None when it is no `zoo.families.inr` member's)."""
    shapes = {t.name: t.shape for t in space.tensors}
    if "sine1.weight" not in shapes or "output.weight" not in shapes:
        return None
    hidden, in_features = shapes["sine1.weight"]
    architecture = INRArchitecture(in_features=in_features, hidden_features=hidden,
                                   num_sine_layers=len(space.tensors) // 2 - 1,
                                   out_features=shapes["output.weight"][0], first_omega_0=config.first_omega_0,
                                   hidden_omega_0=config.hidden_omega_0, coordinates=config.coordinates,
                                   output_offset=config.output_offset)
    return architecture if create_family("inr").weight_space(dataclasses.asdict(architecture)) == space else None


class CNNMembers(nn.Module):
    """B CNN members on N shared image probes in [-1, 1]: (N, C, 32, 32) -> logits (B, N, classes)."""

    def __init__(self, architecture: dict, activation: str):
        super().__init__()
        self.architecture, self.activation, self.family = architecture, activation, create_family("cnn")
        self.probe_shape = (architecture["in_channels"], IMAGE_SIZE, IMAGE_SIZE)
        self.num_outputs, self.groups = architecture["num_classes"], GROUPS[activation]

    def forward(self, weights: WeightBatch, probes: torch.Tensor) -> torch.Tensor:
        params = dict(zip(weights.space.names, weights.tensors))
        pixels = (probes + 1) / 2  # the [0, 1] pixels population_forward maps to the member's input range
        return self.family.population_forward(self.architecture, params, pixels,
                                              activations=[self.activation] * len(weights), shared_input=True)


class SIRENMembers(nn.Module):
    """B SIRENs on N shared coordinate probes: (N, in_features) -> intensities (B, N, out).

    They run in float64, since SIRENs are small. At omega_0 = 30 a sine's argument reaches ~100 on
    unconstrained weights. There the rounding of a float32 sum moves an output by ~1e-5, and a hidden-unit
    permutation reorders that sum.
    """

    def __init__(self, architecture: INRArchitecture):
        super().__init__()
        self.architecture = architecture
        self.probe_shape = (architecture.in_features,)
        self.num_outputs, self.groups = architecture.out_features, GROUPS["sine"]

    def forward(self, weights: WeightBatch, probes: torch.Tensor) -> torch.Tensor:
        params = [t.double() for t in weights.tensors]
        return siren_forward(self.architecture, params, probes.double()).to(probes.dtype)


def members(space: WeightSpace, config: ProbeGenConfig) -> CNNMembers | SIRENMembers:
    """The members' function for `space`, or a ValueError saying which spaces are read."""
    cnn = cnn_architecture(space, config)
    if cnn is not None:
        return CNNMembers(cnn, config.member_activation)
    siren = siren_architecture(space, config)
    if siren is not None:
        return SIRENMembers(siren)
    raise ValueError(f"probegen runs the members' own function and knows the CNN (conv1..convL, dense) and SIREN "
                     f"(sine1..sineL, output) families; these weights are neither: {list(space.names)}")


# --- the probes: () -> (N, *probe_shape) ----------------------------------------------------

class LinearImageGenerator(nn.Module):
    """ProbeGen's deep linear generator of images -> (N, C, 32, 32). Latent codes (N, d, 1, 1) pass 6
    transposed convolutions without nonlinearities, then the tanh that bounds a probe."""

    def __init__(self, num_probes: int, latent_dim: int, width: int, channels: int):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(num_probes, latent_dim, 1, 1))
        # (in, out, kernel, stride, padding): side 1 -> 4 -> 8 -> 16 -> 16 -> 32 -> 32
        layers = [(latent_dim, 8 * width, 4, 1, 0), (8 * width, 4 * width, 4, 2, 1), (4 * width, 2 * width, 4, 2, 1),
                  (2 * width, 2 * width, 3, 1, 1), (2 * width, width, 4, 2, 1), (width, channels, 3, 1, 1)]
        self.layers = nn.Sequential(*(nn.ConvTranspose2d(*layer) for layer in layers))

    def forward(self) -> torch.Tensor:
        return torch.tanh(self.layers(self.latents))  # (N, C, 32, 32)


class LinearCoordinateGenerator(nn.Module):
    """ProbeGen's deep linear generator of INR coordinates: (N, d) -> d -> in_features -> (N, in_features).
    It has no nonlinearity and no bound."""

    def __init__(self, num_probes: int, latent_dim: int, in_features: int):
        super().__init__()
        self.latents = nn.Parameter(torch.randn(num_probes, latent_dim))
        self.layers = nn.Sequential(nn.Linear(latent_dim, latent_dim), nn.Linear(latent_dim, in_features))

    def forward(self) -> torch.Tensor:
        return self.layers(self.latents)  # (N, in_features)


class LearnedProbes(nn.Module):
    """Vanilla probing: the probes are parameters (standard normal init); image probes bounded by tanh."""

    def __init__(self, num_probes: int, probe_shape: tuple[int, ...], bounded: bool):
        super().__init__()
        self.probes, self.bounded = nn.Parameter(torch.randn(num_probes, *probe_shape)), bounded

    def forward(self) -> torch.Tensor:
        return torch.tanh(self.probes) if self.bounded else self.probes  # (N, *probe_shape)


# (generator, members' kind) -> the probe module
GENERATORS: dict[tuple[str, type], Callable[[ProbeGenConfig, nn.Module], nn.Module]] = {
    ("linear", CNNMembers): lambda config, members: LinearImageGenerator(
        config.num_probes, config.latent_dim, config.generator_width, members.probe_shape[0]),
    ("linear", SIRENMembers): lambda config, members: LinearCoordinateGenerator(
        config.num_probes, config.latent_dim, members.probe_shape[0]),
    ("none", CNNMembers): lambda config, members: LearnedProbes(config.num_probes, members.probe_shape, bounded=True),
    ("none", SIRENMembers): lambda config, members: LearnedProbes(config.num_probes, members.probe_shape,
                                                                  bounded=False),
}


@register_model("probegen")
class ProbeGen(nn.Module):
    """Probes (N, ...) -> each member's outputs (B, N, out) -> flattened (B, N * out) -> standardization ->
    MLP -> (B, out_features)."""

    Config = ProbeGenConfig
    # Kahana et al. 2024's settings: 128 probes, the 6-layer MLP of 256; `member_activation` as the
    # CNN zoo subset's. The budget preset is their 64-probe setting (a CPU runs each member on
    # every probe per step).
    PRESETS = {"generalization": {}, "generalization-budget": {"num_probes": 64},
               "inr-classification": {"out_features": 10},
               "inr-classification-budget": {"out_features": 10, "num_probes": 64}}
    ARCHITECTURE_FIELDS = ("stride", "padding", "input_range", "first_omega_0", "hidden_omega_0", "coordinates",
                           "output_offset")  # of the members; the harness fills them from the zoo
    HPARAM_FIELDS = {"member_activation": "activation"}  # the rows' activation, filled by the harness
    weight_spaces = ("feedforward",)

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__()
        self.weight_space = weight_space
        self.config = ProbeGenConfig(**hparams)
        self.config.validate(f"model {type(self).__name__}", "")
        self.members = members(weight_space, self.config)
        self.probes = GENERATORS[self.config.generator, type(self.members)](self.config, self.members)
        self._probe_cache: tuple | None = None
        num_features = self.config.num_probes * self.members.num_outputs
        self.normalize = nn.BatchNorm1d(num_features, affine=False) if self.config.normalize_outputs else nn.Identity()
        self.head = mlp(num_features, self.config.hidden_sizes,
                        self.config.out_features, self.config.activation, self.config.dropout)

    @property
    def symmetries(self) -> tuple[str, ...]:
        """The groups that preserve the members' function (module docstring)."""
        return self.members.groups

    def member_outputs(self, weights: WeightBatch) -> torch.Tensor:
        """Each member's outputs on the current probes: (B, N, out)."""
        check_weight_space(self.weight_space, weights)
        return self.members(weights, self.current_probes())

    def current_probes(self) -> torch.Tensor:
        """The probes (N, *probe_shape). Without autograd (evaluation) they are computed once per state of
        the generator's parameters. An optimizer step or a load bumps their version counters."""
        if torch.is_grad_enabled():
            self._probe_cache = None
            return self.probes()
        key = tuple((p.data_ptr(), p._version) for p in self.probes.parameters())
        if self._probe_cache is None or self._probe_cache[0] != key:
            self._probe_cache = (key, self.probes())
        return self._probe_cache[1]

    def forward(self, weights: WeightBatch) -> torch.Tensor:
        outputs = self.member_outputs(weights)  # (B, N, out)
        return self.head(self.normalize(outputs.flatten(1)))  # (B, N * out) probe-major -> (B, out_features)
