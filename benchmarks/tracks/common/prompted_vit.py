"""Prefix tuning inside a timm ViT's attention, with NoRGa's non-linear residual gate.

Prefix tuning is Li & Liang 2021's, as DualPrompt, HiDe-Prompt and NoRGa use it in a ViT. A
prompted layer l gets, per sample, L prefix keys P_K and values P_V per head. They join the tokens'
keys and values, and a query x_i attends over both.

Le et al., "Mixture of Experts Meets Prompt-Based Continual Learning" (NeurIPS 2024), Sec. 3-4,
read each attention head as a mixture of experts. Its prefix experts are gated by the scores
s_ij = x_i W_Q P_K,j^T / sqrt(d). NoRGa (their Eq. 9-10) replaces each prefix score by

    s_ij + alpha * sigma(tau * s_ij),      sigma in {tanh, sigmoid, GELU}.

Each prompted layer has one learnable (alpha, tau). The token-token scores are left as they are.
One softmax then runs over [prefix scores, token scores]. The prefix values are weighted with the
token values. With alpha = 0 this is plain prefix tuning (HiDe-Prompt).

Facts from the authors' code (Minhchuyentoancbn/MoE_PromptCL, `attention.py`,
`peft/prompt/norga_prompt.py`) follow. The 1/sqrt(d) scaling comes before the gate. (tau, alpha)
start at 1 and are shared by the heads. The prefixes are raw parameters, not projected by W_K, W_V.

`PromptedViT` runs any timm `VisionTransformer` (`timm.create_model`) with prefixes for some
layers. It returns the pre-logits feature: the class token after the final norm, as the ViT's own
`forward_head(pre_logits=True)` gives. With no prefixes it is the ViT's own computation.

A ViT may carry an `InputTransform` (`with_input_transform`), e.g. a pretrained timm ViT fed
CIFAR's 32-pixel images. Its inputs are then resized and normalised first, per batch. So the data
sets stay at their stored size."""

from __future__ import annotations

from typing import Callable, Mapping

import torch
from torch import nn
from torch.nn import functional as F

Prefix = tuple[torch.Tensor, torch.Tensor]  # keys, values: (B, H, L, head_dim) each

ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "tanh": torch.tanh, "sigmoid": torch.sigmoid, "gelu": F.gelu}


INPUT_TRANSFORM = "nfnzoo_input_transform"  # the attribute `with_input_transform` sets on a ViT


class InputTransform:
    """Images (B, C, h, w) in [0, 1] -> bilinearly resized to `size` and normalised per channel."""

    def __init__(self, size: int, mean: tuple[float, ...] | None = None, std: tuple[float, ...] | None = None):
        if (mean is None) != (std is None):
            raise ValueError("give both mean and std, or neither")
        self.size = int(size)
        self.mean = None if mean is None else torch.tensor(mean, dtype=torch.float32).view(1, -1, 1, 1)
        self.std = None if std is None else torch.tensor(std, dtype=torch.float32).view(1, -1, 1, 1)

    def __call__(self, images: torch.Tensor) -> torch.Tensor:
        if images.shape[-2:] != (self.size, self.size):
            images = F.interpolate(images, size=(self.size, self.size), mode="bilinear", align_corners=False,
                                   antialias=images.shape[-1] > self.size)
        if self.mean is not None:
            if images.shape[1] != self.mean.shape[1]:
                raise ValueError(f"images have {images.shape[1]} channels; the backbone's normalisation has "
                                 f"{self.mean.shape[1]}")
            images = (images - self.mean.to(images)) / self.std.to(images)
        return images


def with_input_transform(vit: nn.Module, transform: InputTransform) -> nn.Module:
    """`vit`, whose `PromptedViT` features will pass their inputs through `transform` first."""
    setattr(vit, INPUT_TRANSFORM, transform)  # a plain attribute: not in the state dict
    return vit


class ScoreGate(nn.Module):
    """NoRGa's gate s + alpha * sigma(tau * s) on prefix scores, one (alpha, tau) per prompted layer."""

    def __init__(self, layers: int, activation: str = "tanh", alpha: float = 1.0, tau: float = 1.0):
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"unknown gate activation {activation!r}; expected one of {sorted(ACTIVATIONS)}")
        self.activation = activation
        self.alpha = nn.Parameter(torch.full((layers,), float(alpha)))
        self.tau = nn.Parameter(torch.full((layers,), float(tau)))

    def forward(self, scores: torch.Tensor, layer: int) -> torch.Tensor:
        return scores + self.alpha[layer] * ACTIVATIONS[self.activation](self.tau[layer] * scores)


def prefix_attention(attention: nn.Module, x: torch.Tensor, prefix: Prefix,
                     gate: Callable[[torch.Tensor], torch.Tensor] | None = None) -> torch.Tensor:
    """timm's `Attention` on tokens x (B, N, C), with prefix keys and values joined to the tokens'.

    `gate` maps the scaled prefix scores (B, H, N, L) before the softmax (NoRGa). Without it this is
    exactly attention over the concatenated keys and values."""
    keys, values = prefix
    batch, tokens, _ = x.shape
    heads, head_dim = attention.num_heads, attention.head_dim
    if keys.shape != values.shape or keys.shape[0] != batch or keys.shape[1] != heads or keys.shape[3] != head_dim:
        raise ValueError(f"prefix keys and values must both be (B={batch}, H={heads}, L, {head_dim}); got "
                         f"{tuple(keys.shape)} and {tuple(values.shape)}")
    if getattr(attention, "gate", None) is not None:
        raise ValueError("gated timm attention (GenLIP-style) is not supported with prefixes")
    qkv = attention.qkv(x).reshape(batch, tokens, 3, heads, head_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    q, k = attention.q_norm(q), attention.k_norm(k)
    token_scores = (q * attention.scale) @ k.transpose(-2, -1)  # (B, H, N, N)
    prefix_scores = (q @ keys.transpose(-2, -1)) * attention.scale  # (B, H, N, L)
    if gate is not None:
        prefix_scores = gate(prefix_scores)
    weights = attention.attn_drop(torch.cat([prefix_scores, token_scores], dim=-1).softmax(dim=-1))
    out = weights @ torch.cat([values, v], dim=2)
    out = attention.norm(out.transpose(1, 2).reshape(batch, tokens, attention.attn_dim))
    return attention.proj_drop(attention.proj(out))


class PromptedViT(nn.Module):
    """A timm ViT whose blocks can take per-sample prefixes (see the module docstring).

    Calling it (`forward`) is `features(images)`: the unprompted feature, for the learners that
    fine-tune or probe the backbone itself."""

    def __init__(self, vit: nn.Module):
        super().__init__()
        if isinstance(vit, PromptedViT):
            vit = vit.vit
        self.vit = vit
        self.depth = len(vit.blocks)

    @property
    def num_features(self) -> int:
        return self.vit.num_features

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.features(images)

    @property
    def heads(self) -> int:
        return self.vit.blocks[0].attn.num_heads

    @property
    def head_dim(self) -> int:
        return self.vit.blocks[0].attn.head_dim

    def features(self, images: torch.Tensor, prefixes: Mapping[int, Prefix] | None = None,
                 gate: ScoreGate | None = None, prompt_tokens: torch.Tensor | None = None) -> torch.Tensor:
        """The pre-logits feature (B, D); `prefixes` maps a block index to its (keys, values).

        `prompt_tokens` (B, P, D) are prompt tuning's input prompts (L2P, Wang et al. CVPR 2022, Sec. 4.2).
        They are inserted after the class token, behind the positional embedding. The feature is then the
        mean of the normed outputs at the prompts' positions, as L2P's classifier reads them."""
        prefixes = dict(prefixes or {})
        unknown = sorted(set(prefixes) - set(range(self.depth)))
        if unknown:
            raise ValueError(f"prefixes for blocks {unknown}; the ViT has blocks 0..{self.depth - 1}")
        vit = self.vit
        transform = getattr(vit, INPUT_TRANSFORM, None)
        if transform is not None:
            images = transform(images)
        x = vit.norm_pre(vit.patch_drop(vit._pos_embed(vit.patch_embed(images))))
        start = vit.num_prefix_tokens
        if prompt_tokens is not None:
            if prompt_tokens.shape[0] != x.shape[0] or prompt_tokens.shape[2] != x.shape[2]:
                raise ValueError(f"prompt tokens must be (B={x.shape[0]}, P, D={x.shape[2]}); got "
                                 f"{tuple(prompt_tokens.shape)}")
            x = torch.cat([x[:, :start], prompt_tokens, x[:, start:]], dim=1)
        for index, block in enumerate(vit.blocks):
            if index not in prefixes:
                x = block(x)
                continue
            layer_gate = (lambda scores, layer=index: gate(scores, layer)) if gate is not None else None
            x = x + block.drop_path1(block.ls1(prefix_attention(block.attn, block.norm1(x), prefixes[index],
                                                                layer_gate)))
            x = x + block.drop_path2(block.ls2(block.mlp(block.norm2(x))))
        x = vit.norm(x)
        if prompt_tokens is not None:
            return x[:, start:start + prompt_tokens.shape[1]].mean(dim=1)
        return vit.forward_head(x, pre_logits=True)
