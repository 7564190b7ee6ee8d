"""The Small Transformer Zoo member (Tran et al. 2025): its architecture, modules and FLOPs.

The paper is "Equivariant Neural Functional Networks for Transformers" (ICLR 2025).
Its authors are Tran, Vo, The, Tran Huu, Nguyen-Nhat, Tran, Pham and Nguyen.
It comes with the Small Transformer Zoo and released code
(github.com/Fsoft-AIC/Transformer-NFN, `vision_task/` and `text_classification/`).

The member starts with an input stem.
Then come 2 encoder blocks of d_model 32, each with 2 heads of d_k = d_v = 16.
The Q/K/V/O linear maps have no bias.
Each block's MLP is 32 -> 64 -> 32 with ReLU.
A LayerNorm without scale or shift precedes each sublayer.
A final LayerNorm and mean pooling over tokens follow the blocks.
The head is Linear(32, 32), ReLU, Linear(32, classes).
Dropout follows the stem and each sublayer.

On MNIST the stem is a patch embedding Conv2d(1, 32, kernel 4, stride 4), giving 49 tokens.
The fixed sinusoidal positional encoding is added, and the member has 18,506 parameters.

On AG News the stem is frozen word vectors plus the positional encoding.
The vectors are MiniLM's input embeddings, PCA'd to 32 dims (`zoo.data.text`), and are not stored.
Texts are 64 WordPiece tokens, and the padding is masked out of attention and pooling.
(The released code masked nothing.)
The member has 17,764 parameters.

Residual connections are an option (`residual`).
They are OFF, as in the released zoo, whose skip connections are commented out.
The symmetry group depends on it.
Without residuals, the model dimension between sublayers can be permuted as well (`zoo.symmetry.attention`).

State-dict keys follow the released zoo (``encoder.0.attention.queries.weight``, ...).
So NFN code written for it reads these checkpoints.
The weights are exactly the trainable parameters, in forward order.
The positional encoding and word vectors are not stored.

The training recipe and the family are in `zoo.families.transformer`.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Callable, Literal

import torch
import torch.nn.functional as F
from torch import nn

from zoo.validation.domains import Classes, Real, Scale, Size
from zoo.validation.schema import SchemaError


@dataclasses.dataclass(frozen=True)
class TransformerArchitecture:
    input: Literal["image_patches", "word_embeddings"] = "image_patches"
    in_channels: Size = 1  # image_patches: image channels
    image_size: Size = 28  # image_patches: square images
    patch_size: Size = 4  # image_patches: conv kernel = stride, (28 / 4)^2 = 49 tokens
    pixel_mean: Real = 0.5  # image_patches: pixels in [0, 1] enter as (x - mean) / std, [-1, 1] as released
    pixel_std: Scale = 0.5
    max_length: Size = 64  # word_embeddings: tokens per text (~88% of AG News articles fit)
    word_embeddings: str = ""  # word_embeddings: the frozen vectors' source, see zoo.data.text
    word_embeddings_sha256: str = ""  # ... of the source table, to rebuild and check the input
    reduced_embeddings_sha256: str = ""  # ... of the PCA-reduced table the member reads
    tokenizer_sha256: str = ""  # ... of the WordPiece tokenizer file
    d_model: Size = 32
    num_blocks: Size = 2
    num_heads: Size = 2
    head_dim: Size = 16  # d_k = d_v
    mlp_dim: Size = 64
    num_classes: Classes = 10
    residual: bool = False  # off in the released zoo; changes the symmetry group

    def validate(self, where: str, key: str) -> None:
        if self.d_model % 2:
            raise SchemaError(where, f"{key}.d_model",
                              f"the sinusoidal encoding needs an even width, got {self.d_model}")
        if self.input == "image_patches" and self.image_size % self.patch_size:
            raise SchemaError(where, f"{key}.patch_size",
                              f"must divide image_size {self.image_size}, got {self.patch_size}")
        if self.input == "word_embeddings":
            for name in ("word_embeddings", "word_embeddings_sha256", "reduced_embeddings_sha256", "tokenizer_sha256"):
                if not getattr(self, name):
                    raise SchemaError(where, f"{key}.{name}",
                                      "required for input word_embeddings (see zoo/data/text.py)")

    @property
    def num_tokens(self) -> int:
        return (self.image_size // self.patch_size) ** 2 if self.input == "image_patches" else self.max_length


def sinusoidal_encoding(length: int, width: int) -> torch.Tensor:
    """Vaswani et al. 2017, Sec. 3.5: PE[t, 2i] = sin(t / 10000^(2i/width)), PE[t, 2i+1] = cos(...)."""
    position = torch.arange(length, dtype=torch.float64)[:, None]
    frequency = torch.exp(torch.arange(0, width, 2, dtype=torch.float64) * (-math.log(10000.0) / width))
    encoding = torch.zeros(length, width, dtype=torch.float64)
    encoding[:, 0::2], encoding[:, 1::2] = torch.sin(position * frequency), torch.cos(position * frequency)
    return encoding.float()


def _dropout(h: torch.Tensor, rate: float, training: bool, masks, layer: int) -> torch.Tensor:
    """h with the 0/1 keep mask `masks(layer, shape)` applied and divided by 1 - rate (training only)."""
    if not training or rate == 0:
        return h
    return h * masks(layer, tuple(h.shape)).to(h.device) / (1 - rate)


class PatchEmbedding(nn.Module):
    def __init__(self, arch: TransformerArchitecture):
        super().__init__()
        self.pixel_mean, self.pixel_std = arch.pixel_mean, arch.pixel_std
        self.conv1 = nn.Conv2d(arch.in_channels, arch.d_model, arch.patch_size, arch.patch_size)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, None]:
        x = (x - self.pixel_mean) / self.pixel_std
        return self.conv1(x).flatten(2).transpose(1, 2), None  # (B, C, H, W) -> (B, T, D); no padding


class WordEmbedding(nn.Module):
    """Frozen word vectors (a buffer, not a parameter), loaded and checked on first use."""

    def __init__(self, arch: TransformerArchitecture):
        super().__init__()
        self.arch = arch
        self.register_buffer("table", torch.empty(0, arch.d_model), persistent=False)

    def forward(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.table.numel() == 0:
            from zoo.data.text import checked_word_embeddings

            a = self.arch
            table = checked_word_embeddings(a.word_embeddings, a.d_model, source_sha256=a.word_embeddings_sha256,
                                            reduced_sha256=a.reduced_embeddings_sha256,
                                            tokenizer_sha256=a.tokenizer_sha256).table
            self.table = table.to(self.table.device, self.table.dtype)  # follows model.to() done before the first call
        from zoo.data.text import PAD_ID

        return F.embedding(tokens, self.table), tokens != PAD_ID  # (B, T, D), (B, T)


class SelfAttention(nn.Module):
    def __init__(self, arch: TransformerArchitecture):
        super().__init__()
        self.num_heads, self.head_dim = arch.num_heads, arch.head_dim
        inner = arch.num_heads * arch.head_dim
        self.queries = nn.Linear(arch.d_model, inner, bias=False)  # heads stacked along the output rows
        self.keys = nn.Linear(arch.d_model, inner, bias=False)
        self.values = nn.Linear(arch.d_model, inner, bias=False)
        self.out_projection = nn.Linear(inner, arch.d_model, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        batch, tokens, _ = x.shape
        q, k, v = (m(x).view(batch, tokens, self.num_heads, self.head_dim).transpose(1, 2)
                   for m in (self.queries, self.keys, self.values))  # (B, H, T, d)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, H, T, T)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, None, None, :], float("-inf"))  # padding is never attended to
        heads = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d_v)
        return self.out_projection(heads.transpose(1, 2).reshape(batch, tokens, -1))  # (B, T, D)


class EncoderBlock(nn.Module):
    def __init__(self, arch: TransformerArchitecture):
        super().__init__()
        self.residual = arch.residual
        self.attention = SelfAttention(arch)
        self.fc1 = nn.Linear(arch.d_model, arch.mlp_dim)
        self.fc2 = nn.Linear(arch.mlp_dim, arch.d_model)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, drop_attention: Callable,
                drop_mlp: Callable) -> torch.Tensor:
        width = (x.shape[-1],)
        h = drop_attention(self.attention(F.layer_norm(x, width), mask))
        x = x + h if self.residual else h
        h = drop_mlp(self.fc2(F.relu(self.fc1(F.layer_norm(x, width)))))
        return x + h if self.residual else h


class Classifier(nn.Module):
    def __init__(self, arch: TransformerArchitecture):
        super().__init__()
        self.fc1 = nn.Linear(arch.d_model, arch.d_model)
        self.fc2 = nn.Linear(arch.d_model, arch.num_classes)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if mask is None:
            pooled = x.mean(dim=1)
        else:  # the mean over the text's tokens only
            weights = mask.to(x.dtype)[..., None]
            pooled = (x * weights).sum(dim=1) / weights.sum(dim=1).clamp_min(1)
        return self.fc2(F.relu(self.fc1(pooled)))  # (B, D) -> (B, classes)


class SmallTransformer(nn.Module):
    def __init__(self, arch: TransformerArchitecture, dropout: float = 0.0):
        super().__init__()
        self.dropout = dropout
        self.embedding = PatchEmbedding(arch) if arch.input == "image_patches" else WordEmbedding(arch)
        self.register_buffer("positional_encoding", sinusoidal_encoding(arch.num_tokens, arch.d_model),
                             persistent=False)
        self.encoder = nn.ModuleList(EncoderBlock(arch) for _ in range(arch.num_blocks))
        self.classifier = Classifier(arch)

    def forward(self, x: torch.Tensor, masks=None) -> torch.Tensor:
        """Logits.

        In training mode with dropout, `masks(layer, shape)` gives 0/1 keep masks (`zoo.training.draws`).
        Layers are numbered as the population numbers them.
        Layer 0 is the stem; 2i + 1 and 2i + 2 are block i's attention and MLP outputs.
        """
        def drop(layer: int) -> Callable[[torch.Tensor], torch.Tensor]:
            return lambda h: _dropout(h, self.dropout, self.training, masks, layer)

        h, mask = self.embedding(x)  # (B, T, D)
        h = drop(0)(h + self.positional_encoding[:h.shape[1]])
        for i, block in enumerate(self.encoder):
            h = block(h, mask, drop(2 * i + 1), drop(2 * i + 2))
        return self.classifier(F.layer_norm(h, h.shape[-1:]), mask)


def forward_flops(a: TransformerArchitecture) -> int:
    """FLOPs (2 per multiply-add) of one example's forward pass: the matmuls and the patch conv.

    LayerNorms, softmax, pooling and biases are negligible.
    """
    tokens, inner = a.num_tokens, a.num_heads * a.head_dim
    stem = tokens * a.d_model * a.in_channels * a.patch_size ** 2 if a.input == "image_patches" else 0
    attention = 3 * tokens * a.d_model * inner + 2 * tokens * tokens * inner + tokens * inner * a.d_model
    mlp = 2 * tokens * a.d_model * a.mlp_dim
    head = a.d_model * a.d_model + a.d_model * a.num_classes
    return 2 * (stem + a.num_blocks * (attention + mlp) + head)
