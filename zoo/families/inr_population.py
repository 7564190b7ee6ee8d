"""Fitting a population of SIRENs in one tensor program, with hand-written gradients.

The member and its fit are `zoo.families.inr`'s (Sitzmann et al. 2020, Sec. 3).
Sine layers compute h_l = sin(omega_l (W_l h_{l-1} + b_l)), and a linear output follows.
The loss is the mean squared error over pixels and channels, and the optimizer is Adam.
Every parameter of the K members lives in one flat (K, n) buffer, in weight-space order.
So one Adam update moves them all (`zoo.training.optim_stacked`).
It takes a per-member learning rate and an `alive` mask.

The backward pass is the chain rule written out, rather than autograd's graph:

    Loss:     r = 2 (y - t) / (P C), which is dL/dy, (K, P, C).
    Output:   dW_out = r^T h_{L-1},  db_out = sum_p r,  dh_{L-1} = r W_out.
    Sine l:   g_l = dh_l * cos(z_l), with z_l = omega_l (W_l h_{l-1} + b_l) kept from the forward.
    Then:     dW_l = omega_l g_l^T h_{l-1},  db_l = omega_l sum_p g_l,  dh_{l-1} = omega_l g_l W_l.

Each member's gradient is its own, with no sum over members.
So a diverged member's NaNs stay in its own rows, which the masked update ignores.

The first layer sees only the pixel grid, whose coordinates are (row_i, column_j).
So its pre-activation is separable: z_0[i, j] = a_i + e_j.
Here a_i = omega (W[:, 0] row_i + b) and e_j = omega W[:, 1] column_j.
Its sines and cosines come from those of a and e by angle addition.
The formulas are sin(a + e) = sin a cos e + cos a sin e and cos(a + e) = cos a cos e - sin a sin e.
That takes H + W values per unit instead of H x W.
Its weight gradient is one product with the (P, 3) matrix [row, column, 1].

Every kernel's arithmetic is independent of K.
Batched products are computed member by member, and reductions run along a member's own axes.
Elementwise ops are independent of K anyway.
So a member's fit is bitwise the same in any population.
It equals its solo `nn.Module` + `torch.optim.Adam` fit to float32 rounding, and a test checks that.
The sines and cosines come from `zoo.training.simd`, NumPy's SIMD kernels on the CPU.
"""

from __future__ import annotations

from typing import Sequence

import torch

from zoo.families.inr_model import INRArchitecture, coordinate_grid, member_inputs, omegas, pixel_targets
from zoo.training.optim_stacked import StackedOptimizer
from zoo.training.simd import sin_cos
from zoo.weightspace import WeightSpace

Fitted = tuple[list[dict[str, torch.Tensor]], list[float], list[bool]]  # weights, MSE, finite; per member


def _views(space: WeightSpace, flat: torch.Tensor) -> list[torch.Tensor]:
    """Each tensor of `space`, in weight-space order, as a view (K, *shape) of the flat (K, n) buffer."""
    views, low = [], 0
    for spec in space.tensors:
        views.append(flat[:, low:low + spec.numel].view(flat.shape[0], *spec.shape))
        low += spec.numel
    return views


class SirenPopulation:
    """The forward pass and hand-written gradient of K SIRENs on one pixel grid."""

    def __init__(self, arch: INRArchitecture, device: torch.device):
        if arch.in_features != 2:
            raise ValueError(f"a SIREN fits an image from its 2 pixel coordinates, not {arch.in_features}")
        self.arch, self.omegas = arch, omegas(arch)
        self.axis = torch.linspace(-1, 1, arch.image_size).to(device)  # rows and columns alike, as coordinate_grid
        self.row_input = 0 if arch.coordinates == "row_column" else 1  # which first-layer input reads the row
        grid = member_inputs(arch, coordinate_grid(arch.image_size)).to(device).T  # (2, P), in input order
        self.inputs = torch.cat([grid, torch.ones(1, arch.pixels, device=device)])  # (3, P)

    def forward(self, params: Sequence[torch.Tensor]) -> tuple[torch.Tensor, list]:
        """Outputs (K, P, C) and what the gradient needs: per sine layer (input, cos(z))."""
        K, size, hidden = params[0].shape[0], self.arch.image_size, self.arch.hidden_features
        omega, weight, bias = self.omegas[0], params[0], params[1]
        row, column = self.row_input, 1 - self.row_input
        a = torch.addcmul((omega * bias).unsqueeze(1), self.axis.view(1, size, 1),
                          (omega * weight[:, :, row]).unsqueeze(1))  # (K, rows, H)
        e = self.axis.view(1, size, 1) * (omega * weight[:, :, column]).unsqueeze(1)  # (K, columns, H)
        (sin_a, cos_a), (sin_e, cos_e) = sin_cos(a), sin_cos(e)
        sin_a, cos_a, sin_e, cos_e = sin_a[:, :, None], cos_a[:, :, None], sin_e[:, None], cos_e[:, None]
        h = (sin_a * cos_e).addcmul_(cos_a, sin_e).view(K, -1, hidden)  # sin(a_i + e_j): (K, P, H)
        cosine = (cos_a * cos_e).addcmul_(sin_a, sin_e, value=-1).view(K, -1, hidden)
        saved = [(None, cosine)]
        for layer in range(1, self.arch.num_sine_layers):
            omega, weight, bias = self.omegas[layer], params[2 * layer], params[2 * layer + 1]
            # omega (h W^T + b) with W^T materialized: the non-transposed product runs faster
            z = torch.baddbmm(omega * bias.unsqueeze(1), h, (omega * weight).transpose(1, 2).contiguous())
            sine, cosine = sin_cos(z)
            saved.append((h, cosine))
            h = sine
        weight, bias = params[-2], params[-1]  # (K, C, H), (K, C)
        # as (W h^T)^T: a product whose arithmetic does not depend on K (batched GEMV kernels do)
        out = torch.baddbmm(bias.unsqueeze(2), weight, h.transpose(1, 2)).transpose(1, 2)  # (K, P, C)
        if self.arch.output_offset:
            out = out + self.arch.output_offset
        saved.append((h, None))
        return out, saved

    def gradient(self, params: Sequence[torch.Tensor], saved: list, residual: torch.Tensor,
                 grads: Sequence[torch.Tensor]) -> None:
        """Writes each member's gradient of its MSE into `grads` (views like `params`).

        `residual` is outputs - targets, (K, P, C).
        """
        K, P, C = residual.shape
        r = residual * (2.0 / (P * C))  # dL/dy
        h, _ = saved[-1]
        weight = params[-2]
        grads[-2].copy_(torch.bmm(r.transpose(1, 2), h))
        grads[-1].copy_(r.sum(1))
        dh = r * weight if C == 1 else torch.bmm(r, weight)  # (K, P, H); one channel: an outer product
        for layer in range(self.arch.num_sine_layers - 1, 0, -1):
            h, cosine = saved[layer]
            omega, weight = self.omegas[layer], params[2 * layer]
            g = dh.mul_(cosine)  # dL/dz_l / omega
            grads[2 * layer].copy_(torch.bmm(g.transpose(1, 2), h)).mul_(omega)
            grads[2 * layer + 1].copy_(g.sum(1)).mul_(omega)
            dh = torch.bmm(g, omega * weight)
        _, cosine = saved[0]
        g = dh.mul_(cosine)
        first = torch.matmul(self.inputs, g).mul_(self.omegas[0])  # (K, 3, H): d/dW[:, 0], d/dW[:, 1], d/db
        # (self.inputs is in the member's input order, so the first two rows are d/dW[:, 0] and d/dW[:, 1])
        grads[0].copy_(first[:, :2].transpose(1, 2))
        grads[1].copy_(first[:, 2])


def fit_population(arch: INRArchitecture, inits: Sequence[dict[str, torch.Tensor]], images: torch.Tensor,
                   learning_rates: Sequence[float], steps: int, checkpoints: Sequence[int], *,
                   exact_sqrt: bool = False) -> dict[int, Fitted]:
    """Fits K SIRENs, one per image, in one tensor program.

    `inits` are K state dicts in weight-space order.
    `images` are (K, C, H, W) in [0, 1], on the device to fit on.
    Returns, per checkpoint step, the members' weights (on the CPU), their MSE and whether each is still finite.
    """
    device, K = images.device, len(inits)
    space = WeightSpace.from_state_dict(inits[0])
    flat = torch.cat([torch.stack([init[name] for init in inits]).flatten(1) for name in space.names], 1).to(device)
    grad = torch.zeros_like(flat)
    params, grads = _views(space, flat), _views(space, grad)
    optimizer = StackedOptimizer([flat], torch.tensor(learning_rates, dtype=torch.float64, device=device), "adam",
                                 exact_sqrt=exact_sqrt)
    model = SirenPopulation(arch, device)
    targets = pixel_targets(images, arch.intensity_range)  # (K, P, C)
    alive = torch.ones(K, dtype=torch.bool, device=device)
    wanted, results = set(checkpoints), {}
    for step in range(steps + 1):  # the forward of step s measures the weights after s updates
        out, saved = model.forward(params)
        residual = out.sub_(targets)
        mse = residual.square().mean(dim=(1, 2))  # (K,)
        alive &= torch.isfinite(mse)
        if step in wanted:
            stacked = flat.cpu()
            weights = [{name: view[k].clone() for name, view in zip(space.names, _views(space, stacked))}
                       for k in range(K)]
            results[step] = (weights, mse.tolist(), alive.tolist())
        if step == steps:
            break
        model.gradient(params, saved, residual, grads)
        flat.grad = grad
        optimizer.step(alive)
    return results
