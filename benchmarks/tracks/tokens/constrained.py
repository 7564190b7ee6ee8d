"""Tiny transformers whose heads are held in a chosen regime, and the free baseline.

The regimes are the paper's scenarios (Pham et al., NeurIPS 2025). We read its public code's
`definite_reparametrizations.py` for facts. Per head, the score matrix W (D x D) has a
positive-definite symmetric part. The symmetric part of A = sym(W) V has a fixed share of negative
eigenvalues (see `conditions`). That share is 0 for `pd` (divergent), 1/2 for `hd` (mixed) and 1
for `nd` (convergent). The score side is built as

    sym(W) = L_W diag(softplus(a)) L_W^T,   W = sym(W) + (T_W - T_W^T) / 2.

The value side is built as

    sym(A) = L_A diag(s * softplus(b)) L_A^T,   A = sym(A) + (T_A - T_A^T) / 2,   V = sym(W)^{-1} A.

Each L is unit lower-triangular. So by Sylvester's law of inertia sym(W) is positive definite, and
sym(A) has exactly the negative eigenvalues the signs s give. This holds whatever the training does.

We avoid one flaw of the public code. It constrains Q K^T = W and solves the key map from a query
map Q it assumes orthogonal. But the score it computes is x^T Q^T K x. That equals the constrained
matrix only while Q stays orthogonal, and Q drifts in training. Here the score is computed from W
itself, x_i^T W x_j / sqrt(D). So the constraint is on the matrix the score uses. `head_matrices`
returns exactly what the forward pass multiplies, and the tests check this after training.

The `absolute` encoding adds the fixed sinusoidal encoding to the token embeddings. The `rotary`
encoding rotates each position's token in the score, (R_i x_i)^T W (R_j x_j). This is RoPE in the
model space (`conditions.rotation`); the values stay unrotated. The `rotary-diag` encoding adds the
paper's refinement. It is the score term x_i^T diag(softplus(c)) x_j per head, with softplus(c)
initialised at 0.05.

The `free` regime is standard multi-head attention (W_q, W_k, W_v, O; RoPE on queries and keys).

Each block is pre-LayerNorm with residual connections: x + attention(LN(x)), then x + MLP(LN(x)).
The residual attention step is the Euler step of Eq. (1).
"""

from __future__ import annotations

import dataclasses
import math

import torch
import torch.nn.functional as F
from torch import nn

from benchmarks.tracks.tokens.dynamics import rotations

REGIME_NEGATIVE_SHARE = {"pd": 0.0, "hd": 0.5, "nd": 1.0}


def expected_regime(regime: str) -> str:
    """The regime (`conditions`) a trained regime's heads satisfy: `undecided` for free attention."""
    share = REGIME_NEGATIVE_SHARE.get(regime)
    return "undecided" if share is None else {0.0: "divergent", 1.0: "convergent"}.get(share, "mixed")
ENCODINGS = ("absolute", "rotary", "rotary-diag")


def _inverse_softplus(y: float) -> float:
    return math.log(math.expm1(y))


class Definite(nn.Module):
    """A symmetric matrix L diag(s * softplus(theta)) L^T, its first round(share * n) signs negative."""

    def __init__(self, size: int, negative_share: float, scale: float):
        super().__init__()
        self.lower = nn.Parameter(torch.zeros(size, size))
        self.theta = nn.Parameter(torch.full((size,), _inverse_softplus(scale)))
        signs = torch.ones(size)
        signs[:round(negative_share * size)] = -1
        self.register_buffer("signs", signs)

    def forward(self) -> torch.Tensor:
        n = self.lower.shape[0]
        lower = torch.tril(self.lower, -1) + torch.eye(n, dtype=self.lower.dtype, device=self.lower.device)
        return lower @ torch.diag(self.signs * F.softplus(self.theta)) @ lower.T


class ConstrainedHeads(nn.Module):
    """H heads with W and V in the regime (see the module docstring)."""

    def __init__(self, dim: int, heads: int, negative_share: float, generator: torch.Generator, scale: float = 1.0):
        super().__init__()
        self.score = nn.ModuleList(Definite(dim, 0.0, scale) for _ in range(heads))
        self.value = nn.ModuleList(Definite(dim, negative_share, scale / heads) for _ in range(heads))
        self.score_skew = nn.Parameter(torch.randn(heads, dim, dim, generator=generator) * (scale / dim))
        self.value_skew = nn.Parameter(torch.randn(heads, dim, dim, generator=generator) * (scale / dim / heads))

    def head_matrices(self) -> tuple[torch.Tensor, torch.Tensor]:
        """(W, V) per head, (H, D, D) each: what the forward pass multiplies."""

        def skew(t: torch.Tensor) -> torch.Tensor:
            return (t - t.transpose(1, 2)) / 2

        sym_w = torch.stack([m() for m in self.score])
        a = torch.stack([m() for m in self.value]) + skew(self.value_skew)
        return sym_w + skew(self.score_skew), torch.linalg.solve(sym_w, a)


class FreeHeads(nn.Module):
    """Standard multi-head attention maps, d_k = d_v = D / H."""

    def __init__(self, dim: int, heads: int):
        super().__init__()
        self.heads, self.head_dim = heads, dim // heads
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.out = nn.Linear(dim, dim, bias=False)

    def head_matrices(self) -> tuple[torch.Tensor, torch.Tensor]:
        q, k, v = self.qkv.weight.view(3, self.heads, self.head_dim, -1)
        o = self.out.weight.view(-1, self.heads, self.head_dim).transpose(0, 1)  # (H, D, d)
        return q.transpose(1, 2) @ k / math.sqrt(self.head_dim), o @ v


@dataclasses.dataclass(frozen=True)
class ModelConfig:
    dim: int = 32
    heads: int = 2
    layers: int = 2
    mlp: int = 64
    length: int = 64  # tokens per sequence


class RegimeTransformer(nn.Module):
    """Embedding -> blocks -> LayerNorm -> a head: next-token logits (causal) or class logits (mean pool)."""

    def __init__(self, config: ModelConfig, regime: str, encoding: str, inputs: int, outputs: int, causal: bool,
                 embed_tokens: bool, seed: int):
        super().__init__()
        if regime != "free" and regime not in REGIME_NEGATIVE_SHARE:
            raise ValueError(f"unknown regime {regime!r}; expected free or one of {sorted(REGIME_NEGATIVE_SHARE)}")
        if encoding not in ENCODINGS:
            raise ValueError(f"unknown encoding {encoding!r}; expected one of {ENCODINGS}")
        generator = torch.Generator().manual_seed(seed)
        self.config, self.regime, self.encoding, self.causal = config, regime, encoding, causal
        d = config.dim
        with torch.random.fork_rng(devices=[]):  # nn.Linear / nn.Embedding draw from the global generator
            torch.manual_seed(seed)  # seeded here, and the caller's global state is restored after
            self.embed = nn.Embedding(inputs, d) if embed_tokens else nn.Linear(inputs, d)
            self.attention = nn.ModuleList(
                FreeHeads(d, config.heads) if regime == "free"
                else ConstrainedHeads(d, config.heads, REGIME_NEGATIVE_SHARE[regime], generator)
                for _ in range(config.layers))
            self.mlps = nn.ModuleList(nn.Sequential(nn.LayerNorm(d), nn.Linear(d, config.mlp), nn.GELU(),
                                                    nn.Linear(config.mlp, d)) for _ in range(config.layers))
            self.norms = nn.ModuleList(nn.LayerNorm(d) for _ in range(config.layers))
            self.final = nn.LayerNorm(d)
            self.head = nn.Linear(d, outputs)
        self.diagonal = (nn.Parameter(torch.full((config.layers, config.heads, d), _inverse_softplus(0.05)))
                         if encoding == "rotary-diag" else None)
        from zoo.families.transformer_model import sinusoidal_encoding

        self.register_buffer("positions", sinusoidal_encoding(config.length, d), persistent=False)
        self.register_buffer("rotary", rotations(config.length, d).float() if encoding != "absolute" else
                             torch.empty(0), persistent=False)
        head_dim = d // config.heads
        self.register_buffer("rotary_heads", rotations(config.length, head_dim).float()
                             if encoding != "absolute" and regime == "free" else torch.empty(0), persistent=False)

    def _attend(self, layer: int, x: torch.Tensor) -> torch.Tensor:
        B, T, D = x.shape
        module = self.attention[layer]
        if isinstance(module, FreeHeads):
            q, k, v = module.qkv(x).view(B, T, 3, module.heads, module.head_dim).permute(2, 0, 3, 1, 4)
            if self.rotary_heads.numel():
                r = self.rotary_heads[:T]
                q, k = torch.einsum("tij,bhtj->bhti", r, q), torch.einsum("tij,bhtj->bhti", r, k)
            scores = q @ k.transpose(-1, -2) / math.sqrt(module.head_dim)
        else:
            w, v_map = module.head_matrices()  # (H, D, D)
            y = x if not self.rotary.numel() else torch.einsum("tij,btj->bti", self.rotary[:T], x)
            scores = torch.einsum("bsi,hij,btj->bhst", y, w, y) / math.sqrt(D)
            v = torch.einsum("hij,btj->bhti", v_map, x)  # V x_j per head
        if self.diagonal is not None:
            scores = scores + torch.einsum("bsi,hi,bti->bhst", x, F.softplus(self.diagonal[layer]), x) / math.sqrt(D)
        if self.causal:
            scores = scores.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
        mixed = torch.softmax(scores, dim=-1) @ v  # (B, H, T, d)
        if isinstance(module, FreeHeads):
            return module.out(mixed.transpose(1, 2).reshape(B, T, D))
        return mixed.sum(1)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens)
        if self.encoding == "absolute":
            x = x + self.positions[:x.shape[1]]
        for layer in range(self.config.layers):
            x = x + self._attend(layer, self.norms[layer](x))
            x = x + self.mlps[layer](x)
        x = self.final(x)
        return self.head(x if self.causal else x.mean(1))

    def head_matrices(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """Per layer, (W, V) of every head as the forward pass uses them.

        W is without the 1/sqrt scale."""
        return [module.head_matrices() for module in self.attention]
