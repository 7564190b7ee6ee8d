"""Elementwise transcendentals through NumPy's SIMD kernels on the CPU.

On this project's AVX-512 CPU machines, NumPy's float32 `tanh` and `sin` are much faster than torch's.
Both agree to the same few ulps; the timings are on docs/performance.md.
Sines take a large share of a SIREN fitting step, and tanh of a tanh CNN's step.
The population trainers use these; other devices and dtypes get torch's own.
Results keep the input's memory layout (NumPy ufuncs follow it), so channels-last stays so.
"""

from __future__ import annotations

import numpy as np
import torch


def _on_numpy(x: torch.Tensor) -> bool:
    return x.device.type == "cpu" and x.dtype == torch.float32 and not x.requires_grad


def sin_cos(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """sin(z) and cos(z), without gradient."""
    if _on_numpy(z):
        values = z.numpy()
        return torch.from_numpy(np.sin(values)), torch.from_numpy(np.cos(values))
    return torch.sin(z), torch.cos(z)


class _Tanh(torch.autograd.Function):
    """tanh with torch's backward, grad * (1 - tanh^2), from the saved output."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        detached = x.detach()
        out = torch.from_numpy(np.tanh(detached.numpy())) if _on_numpy(detached) else torch.tanh(detached)
        ctx.save_for_backward(out)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (out,) = ctx.saved_tensors
        return torch.ops.aten.tanh_backward(grad, out)


def tanh(x: torch.Tensor) -> torch.Tensor:
    """torch.tanh, differentiable, through NumPy on the CPU."""
    return _Tanh.apply(x)
