"""The SIREN member of the INR family: architecture, hyperparameters, initialization, forward, fit metrics.

The member is Sitzmann et al. 2020's, Sec. 3 and 3.2.
`zoo.families.inr` gives the equations and the fitting recipe.
This module holds what `inr` (the family) and `inr_population` both use, below both of them.
(`inr_population` fits a population as one tensor program.)
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal, Sequence

import torch
from torch import nn

from zoo.validation.domains import Index, LearningRate, Real, Scale, Size

INTENSITY_RANGES: dict[str, tuple[float, float]] = {"signed": (-1.0, 1.0), "unit": (0.0, 1.0)}
INTENSITY_RANGE = 2.0  # the default ("signed") targets span [-1, 1]


@dataclasses.dataclass(frozen=True)
class INRArchitecture:
    in_features: Size = 2  # (row, column) coordinates
    hidden_features: Size = 32
    num_sine_layers: Size = 2  # sine layers before the linear output: 2 -> 32 -> 32 -> out
    out_features: Size = 1  # 1 for grayscale, 3 for color
    image_size: Size = 28  # the fitted grid is image_size x image_size; needed to render a member
    first_omega_0: Scale = 30.0  # frequency factor of the first layer
    hidden_omega_0: Scale = 30.0  # ... and of the later sine layers
    # The fields below were added for members fitted with other conventions (the DWSNets INRs of
    # Navon et al. 2023); their defaults are what every spec before them meant, and a spec that
    # leaves them out hashes as before (architectures are hashed as written).
    coordinates: Literal["row_column", "column_row"] = "row_column"  # input 0 is the pixel's row; "column_row":
    # its column, as DWSNets' make_coordinates (np.meshgrid's default "xy" indexing) feeds it
    intensity_range: Literal["signed", "unit"] = "signed"  # fit targets: [-1, 1] (Normalize(0.5, 0.5)), or
    # "unit": [0, 1] (ToTensor), what a DWSNets INR fits
    output_offset: Real = 0.0  # added to the linear output: DWSNets' INR returns seq(x) + 0.5

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


def member_inputs(arch: INRArchitecture, coords: torch.Tensor) -> torch.Tensor:
    """(P, 2) (row, column) coordinates (`coordinate_grid`) in the order the member's first layer reads them."""
    if arch.coordinates == "row_column":
        return coords
    if coords.shape[-1] != 2:
        raise ValueError(f"coordinates {arch.coordinates!r} orders 2 pixel coordinates, not {coords.shape[-1]}")
    return coords.flip(-1)


class Siren(nn.Module):
    """One SIREN as a plain module, for users and reference checks.

    Populations train in `zoo.families.inr_population`.
    Stored weights are evaluated by `siren_forward`.
    """

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
        """(P, 2) (row, column) coordinates -> (P, out) intensities on the architecture's range."""
        h = member_inputs(self.arch, coords)  # (P, in)
        layers = [getattr(self, name) for name in layer_names(self.arch)]
        for layer, omega in zip(layers[:-1], omegas(self.arch)):
            h = torch.sin(omega * layer(h))  # (P, hidden)
        out = layers[-1](h)  # (P, out)
        return out + self.arch.output_offset if self.arch.output_offset else out


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


def pixel_targets(images: torch.Tensor, intensity_range: str = "signed") -> torch.Tensor:
    """(B, C, H, W) intensities in [0, 1] -> (B, H*W, C) on `intensity_range` ([-1, 1] by default).

    Pixels come in the order of `coordinate_grid`.
    """
    scaled = images * 2 - 1 if intensity_range == "signed" else images
    return scaled.flatten(2).transpose(1, 2).contiguous()


def siren_forward(arch: INRArchitecture, params: Sequence[torch.Tensor], coords: torch.Tensor) -> torch.Tensor:
    """B SIRENs at once -> (B, P, out).

    `params` are in weight-space order, each (B, ...).
    `coords` are (P, in), (row, column) as `coordinate_grid`.
    """
    *_, out = _siren_layers(arch, params, coords)
    return out


def siren_activations(arch: INRArchitecture, params: Sequence[torch.Tensor],
                      coords: torch.Tensor) -> list[torch.Tensor]:
    """Every layer's values for B SIRENs, as `siren_forward` computes them.

    They are the members' inputs, each sine layer's outputs and the outputs (offset included).
    Each is (B, P, units of that layer).
    """
    return list(_siren_layers(arch, params, coords))


def _siren_layers(arch: INRArchitecture, params: Sequence[torch.Tensor], coords: torch.Tensor):
    members = params[0].shape[0]
    coords = member_inputs(arch, coords)
    h = coords.expand(members, *coords.shape)  # (B, P, in)
    yield h
    last = len(params) // 2 - 1
    for layer in range(last + 1):
        weight, bias = params[2 * layer], params[2 * layer + 1]  # (B, out, in), (B, out)
        if layer == last:
            # as (W h^T)^T: with P columns rather than out (often 1) the product stays a GEMM
            # whose arithmetic does not depend on how many members share the call
            out = torch.baddbmm(bias.unsqueeze(2), weight, h.transpose(1, 2)).transpose(1, 2)  # (B, P, out)
            yield out + arch.output_offset if arch.output_offset else out
            return
        # omega (W h + b) as (omega W) h + omega b: scales the small tensors, not (B, P, out)
        omega = omegas(arch)[layer]
        h = torch.sin(torch.baddbmm(omega * bias.unsqueeze(1), h, (omega * weight).transpose(1, 2)))  # (B, P, out)
        yield h


def fit_metrics(mse: float, label: int, intensity_range: str = "signed") -> dict[str, float | int]:
    """The METRICS of one fit.

    A diverged fit (non-finite MSE) has NaN for both float metrics.
    PSNR is over the targets' range.
    So either range gives the PSNR of the image on the [0, 1] scale.
    """
    if not math.isfinite(mse):
        return {"label": label, "psnr": math.nan, "mse": math.nan}
    low, high = INTENSITY_RANGES[intensity_range]
    psnr = 10 * math.log10((high - low) ** 2 / mse) if mse > 0 else math.inf
    return {"label": label, "psnr": psnr, "mse": mse}
