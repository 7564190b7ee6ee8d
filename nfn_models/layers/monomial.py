"""Monomial-NFN layers: equivariant to hidden-unit permutations with scalings or sign flips.

Tran, Vo, Tran-Huu, Nguyen & Nguyen, "Equivariant Neural Functional Networks for Monomial Matrix Groups"
(NeurIPS 2024). Sec. 4 gives the G-equivariant linear layers, Sec. 5 the G-invariant layers. G is
permutations x positive diagonals (ReLU nets) or permutations x sign diagonals (sin and tanh nets). We cite
by section, not by equation number. The group acts as in `zoo.symmetry.feedforward`:

    W_l -> D_l P_l W_l P_{l-1}^T D_{l-1}^{-1},    b_l -> D_l P_l b_l,    P_0 = D_0 = P_L = D_L = I.

Derivation. An equivariant linear map may only send an input entry to an output entry with the same
character of the diagonal subgroup. Entry W_l[j, k] carries d_l(j) / d_{l-1}(k), and b_l[j] carries d_l(j).
For independent positive d these monomials coincide only where a fixed axis removes a factor. W_1[j, :] and
b_1[j] all carry d_1(j), since axis 0 is fixed. W_L[:, k] all carry 1 / d_{L-1}(k). b_L carries 1, so it may
also receive a constant. Every mean over a hidden axis mixes characters and is excluded. So is every
constant except on b_L. Permutation equivariance then ties the coefficients across hidden indices.

Take shaped W_l (B, C f_l, n_l, n_{l-1}), with filter positions folded into the channels. All of them share
one character. A, B, E, F, G and H are channel-mixing matrices without bias. The first layer reads W_1's row
j (C f_1 n_0 channels):

    W'_1[j, :] = A_1 W_1[j, :] + B_1 b_1[j],      b'_1[j] = E_1 W_1[j, :] + F_1 b_1[j].

A middle layer (1 < l < L) maps each entry alone:

    W'_l[j, k] = A_l W_l[j, k],                   b'_l[j] = F_l b_l[j].

The last layer reads W_L's column k (C f_L n_L channels) and b_L whole, with a constant tau:

    W'_L[:, k] = A_L W_L[:, k],                   b'_L    = F_L b_L + tau.

These are the terms of the paper's layer for the scaling group (Sec. 4). They match the authors' reference
`HNPSLinear` term for term. With sign matrices D^{-1} = D. Then W_L[:, k] and b_{L-1}[k] share a character,
since 1 / d_{L-1}(k) = d_{L-1}(k). The paper's sign-flip layer (Sec. 4, reference `HNPS_SirenLinear`) adds
exactly those two cross terms:

    W'_L[:, k] += G_L b_{L-1}[k],        b'_{L-1}[k] += H_L W_L[:, k].

For L = 2 the sign group would also allow W_1 <-> W_2 couplings through d_1. The paper does not use them,
and neither do we. The layer has far fewer parameters than NP or HNP, whose count grows with the hidden-axis
summaries. Here every middle layer costs (C f_l)(O f_l) + C O.

The invariant layer (`MonomialPool`, Sec. 5) works per weight entry. Its feature vector, W_l[:, j, k] or
b_l[:, j], is normalized to unit L2 norm. That map has degree 0, so it removes the positive factor
d_l(j)/d_{l-1}(k). Learned vectors then scale and shift it per channel. The result is averaged as HNP's pool
does (Zhou et al. 2023). Middle weights are averaged over both axes, W_1 and W_L over the hidden axis only.
Hidden biases are averaged over units; b_L, already invariant, is kept whole.

The authors' pool uses `F.normalize(eps=1e-12)`. That is not scale invariant once a norm is near or below
1e-12. Real zoo members trained with Adam or RMSprop hold denormal weights, ~1e-45. So we divide by the
max-abs first, then by the norm, with no epsilon. The first step is exact and maps any finite nonzero vector
into [-1, 1]. A zero vector maps to zero.

This pool serves the scaling group. For the sign group the model applies |.| (the paper's `S_tanh_abs_gen`),
which makes every feature sign invariant. It then pools as HNP does (`nfn_models.monomial_nfn.GROUP_POOLS`).
"""

from __future__ import annotations


import torch
from torch import nn

from nfn_models.features import NetworkDescription, WeightSpaceFeatures
from nfn_models.layers.channel import ChannelLinear, init_jointly
from nfn_models.layers.pools import HNPPool


def _map(in_features: int, out_features: int, bias: bool = False) -> ChannelLinear:
    """A channel-mixing map; no bias unless the output may hold a constant (only b_L)."""
    return ChannelLinear(in_features, out_features, bias=bias)


def _rows(weight: torch.Tensor) -> torch.Tensor:
    """Shaped W_1 (B, C f, n_1, n_0) -> (B, C f n_0, n_1): row j's inputs become channels."""
    return weight.transpose(-1, -2).reshape(weight.shape[0], -1, weight.shape[2])


def _columns(weight: torch.Tensor) -> torch.Tensor:
    """Shaped W_L (B, C f, n_L, n_{L-1}) -> (B, C f n_L, n_{L-1}): column k's outputs as channels."""
    return weight.reshape(weight.shape[0], -1, weight.shape[3])


class MonomialLinear(nn.Module):
    """features (B, in_channels, ...) -> (B, out_channels, ...), equivariant to `group`.

    Group "scale" is permutations x positive scalings (ReLU nets). Group "sign" is permutations x sign flips
    (tanh and sine nets); it adds the W_L <-> b_{L-1} terms. `out_description` defaults to the input's. It
    may drop the kernels; the maps then take the folded filter positions to O channels per entry. That is
    the authors' `HNPSLinear(in_spec, out_spec)`, which MAGEP-NFN's first layer is.
    """

    GROUPS = ("scale", "sign")

    def __init__(self, description: NetworkDescription, in_channels: int, out_channels: int,
                 group: str = "scale", out_description: NetworkDescription | None = None):
        super().__init__()
        if group not in self.GROUPS:
            raise ValueError(f"group must be one of {self.GROUPS}, got {group!r}")
        L = description.num_layers
        if L < 2:
            raise ValueError("Monomial-NFN needs a hidden layer (at least two layers)")
        out_description = out_description or description
        if out_description.unit_sizes != description.unit_sizes:
            raise ValueError(f"out_description has units {out_description.unit_sizes}, "
                             f"the input {description.unit_sizes}; only the kernels may differ")
        self.description, self.out_description, self.group = description, out_description, group
        self.in_channels, self.out_channels = in_channels, out_channels
        f, n, g = description.filter_sizes, description.unit_sizes, out_description.filter_sizes
        C, C_out = in_channels, out_channels  # C and O in the shape comments
        self.terms = nn.ModuleList()
        for i in range(L):
            if i == 0:
                terms = nn.ModuleDict({
                    "weight_from_weight": _map(C * f[0] * n[0], C_out * g[0] * n[0]),
                    "weight_from_bias": _map(C, C_out * g[0] * n[0]),
                    "bias_from_weight": _map(C * f[0] * n[0], C_out),
                    "bias_from_bias": _map(C, C_out)})
            elif i == L - 1:
                terms = nn.ModuleDict({
                    "weight_from_weight": _map(C * f[i] * n[L], C_out * g[i] * n[L]),
                    "bias_from_bias": _map(C * n[L], C_out * n[L], bias=True)})  # the bias is tau
                if group == "sign":
                    terms["weight_from_previous_bias"] = _map(C, C_out * g[i] * n[L])
            else:
                terms = nn.ModuleDict({
                    "weight_from_weight": _map(C * f[i], C_out * g[i]),
                    "bias_from_bias": _map(C, C_out)})
            self.terms.append(terms)
        if group == "sign":  # b_{L-1} reads W_L's columns (on layer 1's bias when L = 2)
            self.terms[L - 2]["bias_from_next_weight"] = _map(C * f[L - 1] * n[L], C_out)
        for terms in self.terms:
            init_jointly(*(terms[k] for k in terms if k.startswith("weight")))
            init_jointly(*(terms[k] for k in terms if k.startswith("bias")))

    def forward(self, features: WeightSpaceFeatures) -> WeightSpaceFeatures:
        weights, biases = features.shaped(), features.biases  # (B, C f_i, n_{i+1}, n_i), (B, C, n_{i+1})
        L, batch = len(weights), features.batch_size
        out_weights, out_biases = [], []
        for i, terms in enumerate(self.terms):
            n_out, n_in = weights[i].shape[-2:]
            if i == 0:
                rows = _rows(weights[0])  # (B, C f n_0, n_1)
                z = terms["weight_from_weight"](rows) + terms["weight_from_bias"](biases[0])  # (B, O f n_0, n_1)
                out_weights.append(z.view(batch, -1, n_in, n_out).transpose(-1, -2))  # (B, O f, n_1, n_0)
                bias = terms["bias_from_weight"](rows) + terms["bias_from_bias"](biases[0])  # (B, O, n_1)
            elif i == L - 1:
                z = terms["weight_from_weight"](_columns(weights[i]))  # (B, O f n_L, n_{L-1})
                if "weight_from_previous_bias" in terms:
                    z = z + terms["weight_from_previous_bias"](biases[i - 1])
                out_weights.append(z.view(batch, -1, n_out, n_in))
                bias = terms["bias_from_bias"](biases[i].flatten(1)[:, :, None]).view(batch, -1, n_out)  # (B, O, n_L)
            else:
                out_weights.append(terms["weight_from_weight"](weights[i]))  # (B, O f_i, n_{i+1}, n_i)
                bias = terms["bias_from_bias"](biases[i])  # (B, O, n_{i+1})
            if "bias_from_next_weight" in terms:
                bias = bias + terms["bias_from_next_weight"](_columns(weights[L - 1]))
            out_biases.append(bias)
        return WeightSpaceFeatures.from_shaped(self.out_description, tuple(out_weights), tuple(out_biases))

    def extra_repr(self) -> str:
        return f"in_channels={self.in_channels}, out_channels={self.out_channels}, group={self.group!r}"


class _UnitNormalize(torch.autograd.Function):
    """x / ||x|| with its gradient written out, so that tiny x cannot turn it into NaN.

    The true gradient is (g - u (u . g)) / ||x||, with u = x / ||x||. It is huge where ||x|| is tiny, as for
    members holding denormal-sized weights. Autograd's own chain through x / peak squares the peak. There it
    divides by 0, which gave NaN while training on the demo zoo. Here the gradient is (g - u (u . g)) / (||x
    / peak||) / peak. It is exact wherever float32 can hold it and saturates at the largest finite value
    elsewhere. The forward value, which the symmetry claim is about, is untouched.
    """

    @staticmethod
    def forward(ctx, x: torch.Tensor, dim: int) -> torch.Tensor:
        peak = x.abs().amax(dim=dim, keepdim=True)
        nonzero = peak > 0
        peak = torch.where(nonzero, peak, torch.ones_like(peak))
        scaled = x / peak  # in [-1, 1]
        norm = scaled.norm(dim=dim, keepdim=True)  # in [1, sqrt(n)] where nonzero
        norm = torch.where(nonzero, norm, torch.ones_like(norm))
        unit = scaled / norm
        ctx.dim = dim
        ctx.save_for_backward(unit, peak, norm, nonzero)
        return unit

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        unit, peak, norm, nonzero = ctx.saved_tensors
        tangent = grad - unit * (unit * grad).sum(dim=ctx.dim, keepdim=True)
        largest = torch.finfo(grad.dtype).max
        result = (tangent / norm / peak).nan_to_num(nan=0.0, posinf=largest, neginf=-largest)
        return torch.where(nonzero, result, torch.zeros_like(result)), None


def unit_normalize(x: torch.Tensor, dim: int) -> torch.Tensor:
    """x / ||x|| along `dim`, exactly degree 0 for every finite x, denormals included; 0 -> 0.

    Dividing by the max-abs first keeps the squares from underflowing. A vector of 1e-45s has a float32 norm
    of 0. It needs no epsilon, so x and c x (c > 0) give the same result up to rounding for any c. Its
    gradient is `_UnitNormalize`'s, finite for any x.
    """
    return _UnitNormalize.apply(x, dim)


class _ChannelAffine(nn.Module):
    """Per-channel scale and shift of a (B, C, ...) tensor (shared across entries: permutation safe)."""

    def __init__(self, channels: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(channels))
        self.bias = nn.Parameter(torch.randn(channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = (1, -1) + (1,) * (x.ndim - 2)
        return x * self.weight.view(shape) + self.bias.view(shape)


class MonomialPool(nn.Module):
    """features (B, C, ...) -> (B, C * D'), invariant to hidden permutations and positive scalings.

    The layout and D' are `HNPPool`'s. W_1 is averaged over its hidden outputs (C f_1 n_0), W_L over its
    hidden inputs (C f_L n_L). The bias b_L is kept whole (C n_L), and the rest is averaged over both axes.
    """

    def __init__(self, description: NetworkDescription, channels: int):
        super().__init__()
        if description.num_layers < 2:
            raise ValueError("Monomial-NFN needs a hidden layer (at least two layers)")
        self.description = description
        f = description.filter_sizes
        self.weight_affine = nn.ModuleList(_ChannelAffine(channels * f_i) for f_i in f)
        self.bias_affine = nn.ModuleList(_ChannelAffine(channels) for _ in f[:-1])  # b_L is not normalized

    @staticmethod
    def num_features(description: NetworkDescription, channels: int) -> int:
        return HNPPool.num_features(description, channels)  # the same pooled layout as HNP's

    def forward(self, features: WeightSpaceFeatures) -> torch.Tensor:
        batch, L = features.batch_size, self.description.num_layers
        out = []
        for i, (weight, bias) in enumerate(zip(features.shaped(), features.biases)):
            weight = self.weight_affine[i](unit_normalize(weight, dim=1))  # (B, C f_i, n_out, n_in)
            if i == 0:
                pooled = weight.mean(dim=2)  # (B, C f, n_0)
            elif i == L - 1:
                pooled = weight.mean(dim=3)  # (B, C f, n_L)
            else:
                pooled = weight.mean(dim=(2, 3))  # (B, C f)
            out.append(pooled.reshape(batch, -1))
            if i == L - 1:
                out.append(bias.reshape(batch, -1))  # (B, C n_L): invariant as it is
            else:
                out.append(self.bias_affine[i](unit_normalize(bias, dim=1)).mean(dim=2))  # (B, C)
        return torch.cat(out, dim=1)
