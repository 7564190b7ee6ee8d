"""NumPy-backed transcendentals: torch's values and gradients to float32 rounding, layouts kept."""

from __future__ import annotations

import torch

from zoo.training import simd


def test_sin_cos_match_torch_to_float32_rounding():
    z = torch.randn(4, 784, 32, generator=torch.Generator().manual_seed(0)) * 40  # SIREN pre-activations
    sine, cosine = simd.sin_cos(z)
    assert torch.allclose(sine, torch.sin(z), atol=2e-6) and torch.allclose(cosine, torch.cos(z), atol=2e-6)
    assert not torch.equal(sine, torch.cos(z))
    double = z.double()  # other dtypes take torch's own path
    assert torch.equal(simd.sin_cos(double)[0], torch.sin(double))


def test_tanh_values_gradient_and_layout():
    x = torch.randn(8, 32, 14, 14, generator=torch.Generator().manual_seed(1)) * 3
    x = x.contiguous(memory_format=torch.channels_last).requires_grad_()
    y = simd.tanh(x)
    assert y.is_contiguous(memory_format=torch.channels_last)
    reference = torch.tanh(x.detach())
    assert torch.allclose(y, reference, atol=1e-6)
    upstream = torch.randn_like(reference)
    (y * upstream).sum().backward()
    assert torch.allclose(x.grad, upstream * (1 - reference * reference), atol=1e-6)
    plain = x.detach().clone().requires_grad_()
    torch.tanh(plain).mul(upstream).sum().backward()
    assert torch.allclose(x.grad, plain.grad, atol=1e-6)
