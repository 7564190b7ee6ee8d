"""Prefix tuning in a timm ViT and NoRGa's gate, against oracles built from torch's own attention."""

from __future__ import annotations

import copy

import pytest
import torch
from torch.nn import functional as F

pytest.importorskip("timm")

import timm

from benchmarks.tracks.common.prompted_vit import ACTIVATIONS, PromptedViT, ScoreGate, prefix_attention

LENGTH = 3


@pytest.fixture(scope="module")
def vit():
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=32, patch_size=8, embed_dim=32,
                              depth=3, num_heads=2, num_classes=0)
    return model.eval()


def _prefix(model, batch, seed=1):
    generator = torch.Generator().manual_seed(seed)
    shape = (batch, model.blocks[0].attn.num_heads, LENGTH, model.blocks[0].attn.head_dim)
    return torch.rand(shape, generator=generator) * 2 - 1, torch.rand(shape, generator=generator) * 2 - 1


def _images(batch=4):
    return torch.rand((batch, 3, 32, 32), generator=torch.Generator().manual_seed(2))


def test_without_prefixes_it_is_the_vits_own_feature(vit):
    images = _images()
    with torch.no_grad():
        expected = vit.forward_head(vit.forward_features(images), pre_logits=True)
        assert torch.equal(PromptedViT(vit).features(images), expected)


def test_a_prefix_without_gate_is_attention_over_the_concatenated_keys_and_values(vit):
    attention, x = vit.blocks[1].attn, torch.randn(4, 17, 32, generator=torch.Generator().manual_seed(3))
    keys, values = _prefix(vit, 4)
    with torch.no_grad():
        got = prefix_attention(attention, x, (keys, values))
        qkv = attention.qkv(x).reshape(4, 17, 3, attention.num_heads, attention.head_dim).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        oracle = F.scaled_dot_product_attention(q, torch.cat([keys, k], 2), torch.cat([values, v], 2))
        expected = attention.proj(oracle.transpose(1, 2).reshape(4, 17, -1))
    torch.testing.assert_close(got, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("activation", sorted(ACTIVATIONS))
def test_the_gate_is_s_plus_alpha_sigma_tau_s(activation):
    gate = ScoreGate(layers=2, activation=activation, alpha=0.5, tau=2.0)
    scores = torch.linspace(-3, 3, 13)
    torch.testing.assert_close(gate(scores, 1), scores + 0.5 * ACTIVATIONS[activation](2.0 * scores))


def test_alpha_zero_is_plain_prefix_tuning_and_alpha_one_is_not(vit):
    """HiDe-Prompt is NoRGa with alpha = 0, bit for bit; the negative control: alpha = 1 moves the feature."""
    model, images = PromptedViT(vit), _images()
    prefixes = {0: _prefix(vit, 4, 1), 2: _prefix(vit, 4, 4)}
    with torch.no_grad():
        plain = model.features(images, prefixes)
        assert torch.equal(model.features(images, prefixes, ScoreGate(3, "tanh", alpha=0.0)), plain)
        gated = model.features(images, prefixes, ScoreGate(3, "tanh", alpha=1.0))
        assert not torch.allclose(gated, plain, atol=1e-4)
        assert not torch.allclose(plain, model.features(images), atol=1e-4)  # the prefixes do act


def test_gradients_reach_the_prefixes_and_the_gate_not_a_frozen_backbone(vit):
    vit = copy.deepcopy(vit)  # frozen here only
    model = PromptedViT(vit)
    for parameter in vit.parameters():
        parameter.requires_grad_(False)
    keys, values = (p.clone().requires_grad_(True) for p in _prefix(vit, 4))
    gate = ScoreGate(3, "sigmoid")
    model.features(_images(), {1: (keys, values)}, gate).square().sum().backward()
    assert keys.grad.abs().sum() > 0 and values.grad.abs().sum() > 0
    assert gate.alpha.grad[1] != 0 and gate.tau.grad[1] != 0 and gate.alpha.grad[0] == 0  # only layer 1 prompted
    assert all(p.grad is None for p in vit.parameters())


def test_bad_prefixes_and_activations_are_refused(vit):
    model = PromptedViT(vit)
    with pytest.raises(ValueError, match="blocks \\[5\\]; the ViT has blocks 0..2"):
        model.features(_images(), {5: _prefix(vit, 4)})
    keys, values = _prefix(vit, 4)
    with pytest.raises(ValueError, match="must both be"):
        model.features(_images(), {0: (keys[:, :1], values[:, :1])})
    with pytest.raises(ValueError, match="unknown gate activation 'relu6'"):
        ScoreGate(2, "relu6")
