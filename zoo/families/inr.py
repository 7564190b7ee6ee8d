"""The INR family: one SIREN fitted to each image, as in the NFN and DWSNet INR data sets.

The member is a SIREN (Sitzmann et al. 2020, "Implicit Neural Representations with Periodic
Activation Functions", Sec. 3).
It computes Phi(x) = W_n (phi_{n-1} o ... o phi_0)(x) + b_n, with a linear output.
Its sine layers are phi_i(h) = sin(omega_0 (W_i h + b_i)), with omega_0 = 30.
Two INR data sets use 2 -> 32 -> 32 -> 1, with 3 outputs for color.
They are Zhou et al. 2023 ("Permutation Equivariant Neural Functionals", Sec. 5.1) and
Navon et al. 2023 ("Equivariant Architectures for Learning in Deep Weight Spaces", Sec. 6).
That gives 1,185 parameters, or 1,251 for CIFAR-10.

Three architecture fields describe a member fitted with other conventions.
The DWSNets INRs are such members (`zoo.imports.dwsnets_inrs`).
`coordinates` says which pixel coordinate the first layer reads first.
`intensity_range` puts the targets on [-1, 1] or [0, 1].
`output_offset` is a constant added to the output: DWSNets' INR returns W_n h + b_n + 0.5.
Their defaults are the conventions below.

Initialization follows Sitzmann et al. Sec. 3.2 and supplement 1.5, with n the fan-in.
The first layer's weights are U(-1/n, 1/n).
Every later weight is U(-sqrt(6/n)/omega_0, sqrt(6/n)/omega_0).
Biases keep PyTorch's `nn.Linear` default U(-1/sqrt(n), 1/sqrt(n)), as the reference code leaves them.
Each member draws its init from its own generator, seeded by (run seed, image index).
So its weights never depend on which population trains it.

Fitting is SIREN's image fitting, which the NFN data set's code also uses.
The coordinates are the image's pixel grid in [-1, 1]^2: `linspace(-1, 1, size)` per axis.
They come in (row, column) order, pixels row-major, channels last.
Intensities are scaled from [0, 1] to [-1, 1], as torchvision's Normalize(0.5, 0.5).
Each step is full batch: every pixel, every step.
The loss is the mean squared error over pixels and channels.
The optimizer is Adam (Kingma & Ba 2015, Algorithm 1) with beta = (0.9, 0.999) and eps = 1e-8.
`zoo.training.optim_stacked` holds its arithmetic, torch.optim.Adam's.
Fitting steps play the role of epochs.
PSNR = 10 log10(R^2 / MSE), with R = 2 the intensity range.
That is the PSNR of the image on the usual [0, 1] scale.

A population of images is fitted in one tensor program (`zoo.families.inr_population`).
Every parameter is stacked on a leading member dimension, and the layers are batched matrix products.
The gradient is written out by hand per member.
Adam is elementwise, with a per-member learning rate.
So each member follows the trajectory it would alone.
That holds bitwise in any population, since every kernel's arithmetic is independent of the population.
Against `nn.Module` + `torch.optim.Adam`, it holds to float32 rounding.
A member whose loss turns non-finite is frozen where it diverged and recorded "diverged".
Masking keeps its NaNs out of every update.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Sequence

import torch

from zoo.data.images import SOURCES, ImageData, image_source_names
from zoo.families.inr_model import (  # noqa: F401 (the member's pieces, re-exported for users of the family)
    INTENSITY_RANGE,
    INTENSITY_RANGES,
    INRArchitecture,
    INRHParams,
    Siren,
    coordinate_grid,
    fit_metrics,
    init_siren,
    layer_names,
    layer_shapes,
    member_inputs,
    omegas,
    pixel_targets,
    siren_forward,
)
from zoo.families.base import CheckpointResult, Family, MemberSize, register_family
from zoo.training.reproducibility import exact_sqrt
from zoo.training.population import populations
from zoo.symmetry.feedforward import FeedforwardSymmetry
from zoo.training.train import seeded_generator
from zoo.weightspace import WeightSpace


# --- the family -----------------------------------------------------------------------------

@register_family("inr")
class INRFamily(Family):
    Architecture = INRArchitecture
    HParams = INRHParams
    METRICS = {"label": int, "psnr": float, "mse": float}
    HEADLINE = ("psnr", 0.0, 60.0)  # dB; 8-bit images top out near 59
    # Members per tensor program: the family's measured choice on one CPU core (a Ray worker's)
    # and on a GPU (benchmarks/perf/gpu_check.sh); docs/performance.md. Larger CPU populations
    # slow down once their activations outgrow the caches.
    POPULATION_SIZES = {"cpu": 64, "cuda": 4096}

    def build(self, architecture: dict, hparams: dict | None = None) -> Siren:
        return Siren(INRArchitecture(**architecture))

    def weight_space(self, architecture: dict) -> WeightSpace:
        return WeightSpace.from_state_dict(self.build(architecture).state_dict())

    def member_size(self, architecture: dict) -> MemberSize:
        """`Siren`'s parameters: in -> hidden, num_sine_layers - 1 hidden -> hidden, hidden -> out (with biases)."""
        a = INRArchitecture(**architecture)
        hidden = a.hidden_features
        parameters = ((a.in_features + 1) * hidden + (a.num_sine_layers - 1) * (hidden + 1) * hidden
                      + (hidden + 1) * a.out_features)
        return MemberSize(parameters, {"in_features": a.in_features, "hidden_features": hidden,
                                       "out_features": a.out_features}, a.num_sine_layers + 1)

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
        """Populations of `population_size_on` images, fitted on their images' device.

        `zoo.families.inr_population` fits them.
        """
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
                                     spec.training.epochs, spec.training.checkpoint_epochs,
                                     exact_sqrt=exact_sqrt(spec))
            labels = data.y[index].tolist()
            for step in sorted(results):
                weights, mses, finite = results[step]
                for member, run in enumerate(population):
                    metrics = fit_metrics(mses[member] if finite[member] else math.nan, labels[member],
                                          arch.intensity_range)
                    emit(run, CheckpointResult(step, weights[member], metrics, "ok" if finite[member] else "diverged"))

    def train_run(self, spec, run, data: ImageData, emit: Callable[[CheckpointResult], None]) -> None:
        """One image fitted alone with `nn.Module` and `torch.optim.Adam`, as the reference INR data sets were made.

        It is the baseline the population trainer is measured against.
        It equals the population's fit to float32 rounding.
        """
        arch, hp = INRArchitecture(**spec.architecture), INRHParams(**run.hparams)
        model = self.build(spec.architecture)
        model.load_state_dict(init_siren(arch, seeded_generator(run.seed, f"siren_init/{hp.image_index}")))
        optimizer = torch.optim.Adam(model.parameters(), lr=hp.learning_rate)
        coords = coordinate_grid(arch.image_size)
        target = pixel_targets(data.x[hp.image_index:hp.image_index + 1], arch.intensity_range)[0]  # (P, C)
        label, wanted = int(data.y[hp.image_index]), set(spec.training.checkpoint_epochs)
        for step in range(spec.training.epochs + 1):
            with torch.set_grad_enabled(step < spec.training.epochs):
                loss = (model(coords) - target).pow(2).mean()
            finite = bool(torch.isfinite(loss))
            if step in wanted or not finite:
                weights = {name: t.detach().clone() for name, t in model.state_dict().items()}
                for epoch in sorted(e for e in wanted if e >= step) if not finite else [step]:
                    emit(CheckpointResult(epoch, weights, fit_metrics(loss.item() if finite else math.nan, label,
                                                                      arch.intensity_range),
                                          "ok" if finite else "diverged"))
            if not finite or step == spec.training.epochs:
                return
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()

    def evaluate(self, spec, hparams: dict, weights: dict[str, torch.Tensor],
                 data: ImageData) -> dict[str, float | int]:
        """The label, MSE and PSNR of stored weights on their image, computed as the fit computed them.

        `SirenPopulation` computes them, and its arithmetic does not depend on the population.
        So on the CPU a recomputation equals the stored metrics exactly.
        """
        from zoo.families.inr_population import SirenPopulation  # imports this module

        arch = INRArchitecture(**spec.architecture)
        index = int(hparams["image_index"])
        params = [weights[name].unsqueeze(0) for name in self.weight_space(spec.architecture).names]
        images = data.x[index:index + 1]
        with torch.no_grad():
            output, _ = SirenPopulation(arch, images.device).forward(params)  # (1, P, C)
            mse = (output - pixel_targets(images, arch.intensity_range)).square().mean(dim=(1, 2)).item()
        return fit_metrics(mse, int(data.y[index]), arch.intensity_range)

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
