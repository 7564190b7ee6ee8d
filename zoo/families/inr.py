"""The INR family: one SIREN fitted to each image, as in the NFN and DWSNet INR data sets.

The member (Sitzmann et al. 2020, "Implicit Neural Representations with Periodic Activation
Functions", Sec. 3): Phi(x) = W_n (phi_{n-1} o ... o phi_0)(x) + b_n with sine layers
phi_i(h) = sin(omega_0 (W_i h + b_i)), omega_0 = 30, and a linear output. The INR data sets
of Zhou et al. 2023 ("Permutation Equivariant Neural Functionals", Sec. 5.1) and Navon et
al. 2023 ("Equivariant Architectures for Learning in Deep Weight Spaces", Sec. 6) use
2 -> 32 -> 32 -> 1 (3 outputs for color): 1,185 parameters (1,251 for CIFAR-10).

Initialization (Sitzmann et al. Sec. 3.2 and supplement 1.5): the first layer's weights
U(-1/n, 1/n), every later weight U(-sqrt(6/n)/omega_0, sqrt(6/n)/omega_0), n the fan-in;
biases keep PyTorch's `nn.Linear` default U(-1/sqrt(n), 1/sqrt(n)), as the reference code
leaves them. Each member draws its init from its own generator, seeded by (run seed, image
index), so its weights never depend on which population trains it.

Fitting, as SIREN's image fitting (and the NFN data set, which uses its code): the image's
pixel grid as coordinates in [-1, 1]^2 (`linspace(-1, 1, size)` per axis, (row, column)
order, pixels row-major, channels last) and intensities scaled from [0, 1] to [-1, 1]
(torchvision's Normalize(0.5, 0.5)); full batch (every pixel every step), loss the mean
squared error over pixels and channels, Adam (Kingma & Ba 2015, Algorithm 1; beta = (0.9,
0.999), eps = 1e-8, torch.optim.Adam's arithmetic in `zoo.optim_stacked`). Fitting steps
play the role of epochs. PSNR = 10 log10(R^2 / MSE) with R = 2 the intensity range, i.e.
the PSNR of the image on the usual [0, 1] scale.

A population of images is fitted in one tensor program (`zoo.families.inr_population`):
every parameter is stacked on a leading member dimension, the layers are batched matrix
products, the gradient is written out by hand per member, and Adam is elementwise with a
per-member learning rate, so each member follows the trajectory it would alone, bitwise in
any population (every kernel's arithmetic is independent of the population) and to float32
rounding against `nn.Module` + `torch.optim.Adam`. A member whose loss turns non-finite is
frozen where it diverged and recorded "diverged"; masking keeps its NaNs out of every update.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import torch
from torch import nn

from zoo.data import SOURCES, ImageData, image_source_names
from zoo.domains import Index, LearningRate, Scale, Size
from zoo.family import CheckpointResult, Family, register_family
from zoo.population import populations
from zoo.symmetry.feedforward import FeedforwardSymmetry
from zoo.train import seeded_generator
from zoo.weightspace import WeightSpace

INTENSITY_RANGE = 2.0  # targets span [-1, 1]


@dataclasses.dataclass(frozen=True)
class INRArchitecture:
    in_features: Size = 2  # (row, column) coordinates
    hidden_features: Size = 32
    num_sine_layers: Size = 2  # sine layers before the linear output: 2 -> 32 -> 32 -> out
    out_features: Size = 1  # 1 for grayscale, 3 for color
    image_size: Size = 28  # the fitted grid is image_size x image_size; needed to render a member
    first_omega_0: Scale = 30.0  # frequency factor of the first layer
    hidden_omega_0: Scale = 30.0  # ... and of the later sine layers

    @property
    def pixels(self) -> int:
        return self.image_size * self.image_size


@dataclasses.dataclass(frozen=True)
class INRHParams:
    image_index: Index  # position in the source's training images followed by its test images
    learning_rate: LearningRate  # Adam's step size


# --- the member ---------------------------------------------------------------------------

def layer_names(arch: INRArchitecture) -> list[str]:
    return [f"sine{i + 1}" for i in range(arch.num_sine_layers)] + ["output"]


def layer_shapes(arch: INRArchitecture) -> list[tuple[int, int]]:
    """(out, in) of every layer, in forward order."""
    widths = [arch.in_features] + [arch.hidden_features] * arch.num_sine_layers + [arch.out_features]
    return list(zip(widths[1:], widths[:-1]))


def omegas(arch: INRArchitecture) -> list[float]:
    return [arch.first_omega_0] + [arch.hidden_omega_0] * (arch.num_sine_layers - 1)


class Siren(nn.Module):
    """One SIREN as a plain module (for users and reference checks; populations train in
    `zoo.families.inr_population`, stored weights are evaluated by `siren_forward`)."""

    def __init__(self, arch: INRArchitecture):
        super().__init__()
        self.arch = arch
        for name, (fan_out, fan_in) in zip(layer_names(arch), layer_shapes(arch)):
            # no default init: it would draw from the global RNG; weights come from init_siren or a checkpoint
            layer = nn.utils.skip_init(nn.Linear, fan_in, fan_out)
            nn.init.zeros_(layer.weight)
            nn.init.zeros_(layer.bias)
            self.add_module(name, layer)

    def forward(self, coords: torch.Tensor) -> torch.Tensor:
        h = coords  # (P, in)
        layers = [getattr(self, name) for name in layer_names(self.arch)]
        for layer, omega in zip(layers[:-1], omegas(self.arch)):
            h = torch.sin(omega * layer(h))  # (P, hidden)
        return layers[-1](h)  # (P, out)


def init_siren(arch: INRArchitecture, generator: torch.Generator) -> dict[str, torch.Tensor]:
    """SIREN's initialization (module docstring), drawn in weight-space order from `generator`."""
    weights = {}
    for i, (name, (fan_out, fan_in)) in enumerate(zip(layer_names(arch), layer_shapes(arch))):
        bound = 1 / fan_in if i == 0 else math.sqrt(6 / fan_in) / arch.hidden_omega_0
        weights[f"{name}.weight"] = torch.empty(fan_out, fan_in).uniform_(-bound, bound, generator=generator)
        bias_bound = 1 / math.sqrt(fan_in)
        weights[f"{name}.bias"] = torch.empty(fan_out).uniform_(-bias_bound, bias_bound, generator=generator)
    return weights


def coordinate_grid(image_size: int) -> torch.Tensor:
    """(P, 2) pixel centres in [-1, 1]^2, (row, column), row-major like `image.reshape(-1)`."""
    axis = torch.linspace(-1, 1, image_size)
    rows, columns = torch.meshgrid(axis, axis, indexing="ij")
    return torch.stack([rows, columns], dim=-1).reshape(-1, 2)


def pixel_targets(images: torch.Tensor) -> torch.Tensor:
    """(B, C, H, W) intensities in [0, 1] -> (B, H*W, C) in [-1, 1], the pixel order of `coordinate_grid`."""
    return (images * 2 - 1).flatten(2).transpose(1, 2).contiguous()


def siren_forward(arch: INRArchitecture, params: Sequence[torch.Tensor], coords: torch.Tensor) -> torch.Tensor:
    """B SIRENs at once: params in weight-space order, each (B, ...); coords (P, in) -> (B, P, out)."""
    members = params[0].shape[0]
    h = coords.expand(members, *coords.shape)  # (B, P, in)
    last = len(params) // 2 - 1
    for layer in range(last + 1):
        weight, bias = params[2 * layer], params[2 * layer + 1]  # (B, out, in), (B, out)
        if layer == last:
            # as (W h^T)^T: with P columns rather than out (often 1) the product stays a GEMM
            # whose arithmetic does not depend on how many members share the call
            return torch.baddbmm(bias.unsqueeze(2), weight, h.transpose(1, 2)).transpose(1, 2)  # (B, P, out)
        # omega (W h + b) as (omega W) h + omega b: scales the small tensors, not (B, P, out)
        omega = omegas(arch)[layer]
        h = torch.sin(torch.baddbmm(omega * bias.unsqueeze(1), h, (omega * weight).transpose(1, 2)))  # (B, P, out)
    raise AssertionError("unreachable: the loop returns at the output layer")


def fit_metrics(mse: float, label: int) -> dict[str, float | int]:
    """The METRICS of one fit; a diverged fit (non-finite MSE) has NaN for both float metrics."""
    if not math.isfinite(mse):
        return {"label": label, "psnr": math.nan, "mse": math.nan}
    psnr = 10 * math.log10(INTENSITY_RANGE ** 2 / mse) if mse > 0 else math.inf
    return {"label": label, "psnr": psnr, "mse": mse}


# --- the family -----------------------------------------------------------------------------

@register_family("inr")
class INRFamily(Family):
    Architecture = INRArchitecture
    HParams = INRHParams
    METRICS = {"label": int, "psnr": float, "mse": float}
    HEADLINE = ("psnr", 0.0, 60.0)  # dB; 8-bit images top out near 59
    # Members per tensor program. CPU, one core (a Ray worker's): 16 to 64 within 2% of each
    # other per member, 128 11% slower (its activations outgrow the caches); 64 hold ~50 MB.
    # H200: 4,096 fit 8,192 checkpoints of 200 steps in 2.3 s (benchmarks/perf/gpu_check.sh).
    POPULATION_SIZES = {"cpu": 64, "cuda": 4096}

    def build(self, architecture: dict, hparams: dict | None = None) -> Siren:
        return Siren(INRArchitecture(**architecture))

    def weight_space(self, architecture: dict) -> WeightSpace:
        return WeightSpace.from_state_dict(self.build(architecture).state_dict())

    def symmetry(self, architecture: dict, hparams: dict | None = None) -> FeedforwardSymmetry:
        """Hidden-unit permutations with sign flips: sine is odd, and not positively homogeneous."""
        return FeedforwardSymmetry(self.weight_space(architecture), "sign")

    def data_sources(self, architecture: dict) -> list[str]:
        return image_source_names()

    def load_data(self, spec) -> ImageData:
        """The source's training images followed by its test images: image_index indexes this."""
        unused = {name: getattr(spec.dataset, name) for name in ("train_size", "test_size")
                  if getattr(spec.dataset, name) is not None}
        if spec.dataset.validation_size:
            unused["validation_size"] = spec.dataset.validation_size
        if unused:
            raise ValueError(f"{spec.name}: dataset {unused} does not apply to INRs: every image is a run "
                             "(search_space image_index) and splits go by image index (splits.by); "
                             "set validation_size: 0 and drop train_size/test_size")
        train, test, _ = SOURCES.get(spec.dataset.name)()
        images = ImageData(torch.cat([train.x, test.x]), torch.cat([train.y, test.y]))
        arch = INRArchitecture(**spec.architecture)
        channels, height, width = images.x.shape[1:]
        if (channels, height, width) != (arch.out_features, arch.image_size, arch.image_size):
            raise ValueError(f"{spec.name}: architecture fits {arch.out_features}x{arch.image_size}x{arch.image_size} "
                             f"images; {spec.dataset.name} has {channels}x{height}x{width}")
        if spec.training.batch_size != arch.pixels:
            raise ValueError(f"{spec.name}: SIREN fitting is full-batch; set training.batch_size to the "
                             f"{arch.pixels} pixels of an image (got {spec.training.batch_size})")
        return images

    def train_population(self, spec, runs: Sequence, data: ImageData,
                         emit: Callable[[Any, CheckpointResult], None]) -> None:
        """Populations of `population_size_on` images, fitted on the device their images are on
        (`zoo.families.inr_population`)."""
        from zoo.families.inr_population import fit_population  # imports this module
        arch = INRArchitecture(**spec.architecture)
        for population in populations(runs, self.population_size_on(data.x.device), self.population_key):
            hparams = [INRHParams(**run.hparams) for run in population]
            index = [hp.image_index for hp in hparams]
            outside = [i for i in index if not 0 <= i < len(data)]
            if outside:
                raise ValueError(f"{spec.name}: image_index {outside[0]} is outside {spec.dataset.name}'s "
                                 f"{len(data)} images (training images, then test images)")
            inits = [init_siren(arch, seeded_generator(run.seed, f"siren_init/{hp.image_index}"))
                     for run, hp in zip(population, hparams)]
            results = fit_population(arch, inits, data.x[index], [hp.learning_rate for hp in hparams],
                                     spec.training.epochs, spec.training.checkpoint_epochs)
            labels = data.y[index].tolist()
            for step in sorted(results):
                weights, mses, finite = results[step]
                for member, run in enumerate(population):
                    metrics = fit_metrics(mses[member] if finite[member] else math.nan, labels[member])
                    emit(run, CheckpointResult(step, weights[member], metrics, "ok" if finite[member] else "diverged"))

    def train_run(self, spec, run, data: ImageData, emit: Callable[[CheckpointResult], None]) -> None:
        """One image fitted alone with `nn.Module` and `torch.optim.Adam`, the way the reference
        INR data sets were made: the baseline the population trainer is measured against, and
        equal to the population's fit to float32 rounding."""
        arch, hp = INRArchitecture(**spec.architecture), INRHParams(**run.hparams)
        model = self.build(spec.architecture)
        model.load_state_dict(init_siren(arch, seeded_generator(run.seed, f"siren_init/{hp.image_index}")))
        optimizer = torch.optim.Adam(model.parameters(), lr=hp.learning_rate)
        coords = coordinate_grid(arch.image_size)
        target = pixel_targets(data.x[hp.image_index:hp.image_index + 1])[0]  # (P, C)
        label, wanted = int(data.y[hp.image_index]), set(spec.training.checkpoint_epochs)
        for step in range(spec.training.epochs + 1):
            with torch.set_grad_enabled(step < spec.training.epochs):
                loss = (model(coords) - target).pow(2).mean()
            finite = bool(torch.isfinite(loss))
            if step in wanted or not finite:
                weights = {name: t.detach().clone() for name, t in model.state_dict().items()}
                for epoch in sorted(e for e in wanted if e >= step) if not finite else [step]:
                    emit(CheckpointResult(epoch, weights, fit_metrics(loss.item() if finite else math.nan, label),
                                          "ok" if finite else "diverged"))
            if not finite or step == spec.training.epochs:
                return
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def evaluate(self, spec, hparams: dict, weights: dict[str, torch.Tensor],
                 data: ImageData) -> dict[str, float | int]:
        """The label, MSE and PSNR of stored weights on their image, computed as the fit computed
        them (`SirenPopulation`, whose arithmetic does not depend on the population): on the
        CPU a recomputation equals the stored metrics exactly."""
        from zoo.families.inr_population import SirenPopulation  # imports this module

        arch = INRArchitecture(**spec.architecture)
        index = int(hparams["image_index"])
        params = [weights[name].unsqueeze(0) for name in self.weight_space(spec.architecture).names]
        images = data.x[index:index + 1]
        with torch.no_grad():
            output, _ = SirenPopulation(arch, images.device).forward(params)  # (1, P, C)
            mse = (output - pixel_targets(images)).square().mean(dim=(1, 2)).item()
        return fit_metrics(mse, int(data.y[index]))

    def metric_matches(self, name: str, stored: float, recomputed: float, data: ImageData) -> bool:
        """For `nfnzoo verify --recompute`: the label exactly, MSE and PSNR as any float metric."""
        if name == "label":
            return int(stored) == int(recomputed)
        return super().metric_matches(name, stored, recomputed, data)

    # --- planning -------------------------------------------------------------------------

    def forward_flops(self, architecture: dict) -> int:
        """FLOPs (2 per multiply-add) of one pixel's forward pass (the sines and bias adds not counted)."""
        return 2 * sum(fan_out * fan_in for fan_out, fan_in in layer_shapes(INRArchitecture(**architecture)))

    def examples_per_run(self, spec, hparams: dict) -> int:
        """Pixels seen by one fit: every pixel at every step."""
        return INRArchitecture(**spec.architecture).pixels * spec.training.epochs

    def run_flops(self, spec, hparams: dict) -> float:
        """Fitting (forward + backward ~ 3 forwards per pixel-step) plus the final step's forward."""
        forward = self.forward_flops(spec.architecture)
        return forward * (3 * self.examples_per_run(spec, hparams) + INRArchitecture(**spec.architecture).pixels)
