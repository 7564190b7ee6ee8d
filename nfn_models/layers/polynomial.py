"""MAGEP-NFN layers: polynomial equivariant and invariant layers for the monomial group.

Vo, Tran, Tran-Huu, Nguyen, Tran, Nguyen-Nhat, Pham & Nguyen, "Equivariant Polynomial Functional Networks"
(ICML 2025), cited by section. Sec. 4 gives the stable polynomial terms and the equivariant layer built from
them. Sec. 5 gives the invariant layer. The group acts as in `zoo.symmetry.feedforward`. On each hidden axis
g_l = D_l P_l is a monomial matrix, and g_0 = g_L = I:

    W_s -> g_s W_s g_{s-1}^{-1},    b_s -> g_s b_s.

The terms. Products of consecutive weights telescope. For 0 <= t < s <= L:

    W_(s,t) = W_s W_{s-1} ... W_{t+1}                 -> g_s W_(s,t) g_t^{-1}     (n_s x n_t);
    [Wb]_(s,t) = W_(s,t) b_t            (t >= 1)      -> g_s [Wb]_(s,t)           (n_s).

Since g_0 and g_L are identities, a fixed matrix may sit between the two fixed axes:

    [bW]_(s,t) = b_s psi^T W_(L,t)                    -> g_s [bW]_(s,t) g_t^{-1}  (psi in R^{n_L});
    [WW]_(s,t) = W_(s,0) Psi W_(L,t)                  -> g_s [WW]_(s,t) g_t^{-1}  (Psi in R^{n_0 x n_L}).

For t = s the last two conjugate by g_s, so their traces are invariant. By the cyclic trace and W_(L,s)
W_(s,0) = W_(L,0), they equal cheaper forms, which we compute:

    tr(W_(s,0) Psi W_(L,s)) = <Psi^T, W_(L,0)>,      tr(b_s psi^T W_(L,s)) = psi . [Wb]_(L,s).

Every term is equivariant to any invertible diagonal D, not only to positive or sign ones. So the same layer
serves ReLU and tanh nets; only the nonlinearity between layers differs.

The equivariant layer (`PolynomialLinear`) maps each output entry from the terms that transform like it,
with channel-mixing matrices. A fixed axis's entries become channels, as in `nfn_models.layers.monomial`.
The first layer reads:

    W'_1[j, :], b'_1[j]   <- W_1, [WW]_(1,0), [bW]_(1,0) rows j;  b_1[j].

A middle layer (1 < s < L) reads:

    W'_s                  <- W_s, [WW]_(s,s-1), [bW]_(s,s-1);
    b'_s[j]               <- W_(s,0), [WW]_(s,0), [bW]_(s,0) rows j;  sum_t [Wb]_(s,t)[j];  b_s[j].

The last layer reads:

    W'_L[:, k]            <- W_L, [WW]_(L,L-1), [bW]_(L,L-1) columns k;
    b'_L                  <- W_(L,0), [WW]_(L,0), [bW]_(L,0), sum_t [Wb]_(L,t), b_L whole.

The last bias b'_L also reads the traces for s = 1 .. L-1, and a constant. One coefficient matrix is shared
over t for the [Wb] terms, as in the authors' code. The equivariant layer's psi/Psi are fixed random
buffers; the authors' reference keeps them frozen at randn / size. The invariant layer's are learned. Both
are exact, since the group does not act on them. The invariant layer (`PolynomialPool`) is a linear map,
with a constant, of b'_L's inputs: (B, C, ...) -> (B, out_channels).

The layers need dense weight matrices, since the products chain the unit axes. On a CNN, the model's first
layer folds the kernels away (`MonomialLinear(out_description=description.without_kernels())`). The paper
does the same with a Monomial-NFN layer.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from nfn_models.features import NetworkDescription, WeightSpaceFeatures
from nfn_models.layers.channel import ChannelLinear


def _xavier(*maps: ChannelLinear) -> None:
    """Normal(0, 2 / (fan_in + fan_out)) over the maps feeding one output (the preset's init). Biases start
    at zero: the constant on b'_L and the pool's."""
    fan = sum(m.in_features + m.out_features for m in maps)
    with torch.no_grad():
        for m in maps:
            m.weight.normal_(0.0, math.sqrt(2.0 / fan))
            if m.bias is not None:
                m.bias.zero_()


def _rows(x: torch.Tensor) -> torch.Tensor:
    """(B, C, n_s, n_0) -> (B, C n_0, n_s): row j's fixed-axis entries become channels."""
    return x.transpose(-1, -2).reshape(x.shape[0], -1, x.shape[2])


def _columns(x: torch.Tensor) -> torch.Tensor:
    """(B, C, n_L, n_t) -> (B, C n_L, n_t): column k's fixed-axis entries become channels."""
    return x.reshape(x.shape[0], -1, x.shape[3])


def _check_dense(description: NetworkDescription, what: str) -> None:
    if description.num_layers < 2:
        raise ValueError(f"{what} needs a hidden layer (at least two layers)")
    kernels = [layer.weight_name for layer in description.layers if layer.kernel]
    if kernels:
        raise ValueError(f"{what} multiplies weight matrices, but {', '.join(kernels)} have kernels; "
                         "map them away first (MonomialLinear(out_description=description.without_kernels()))")


class _Products:
    """The telescoping products of one feature stack, computed once per forward pass.

    W[s] (B, C, n_s, n_{s-1}) and b[s] (B, C, n_s), 1-based; channels are independent.
    """

    def __init__(self, features: WeightSpaceFeatures):
        self.L = L = features.description.num_layers
        self.W = {s: features.weights[s - 1] for s in range(1, L + 1)}
        self.b = {s: features.biases[s - 1] for s in range(1, L + 1)}
        self.P: dict[tuple[int, int], torch.Tensor] = {}
        for t in range(L):
            product = self.W[t + 1]
            self.P[(t + 1, t)] = product
            for s in range(t + 2, L + 1):
                product = self.W[s] @ product
                self.P[(s, t)] = product

    def Wb_sum(self, s: int) -> torch.Tensor:
        """sum_{t=1}^{s-1} W_(s,t) b_t: (B, C, n_s); zeros when s = 1."""
        total = torch.zeros_like(self.b[s])
        for t in range(1, s):
            total = total + (self.P[(s, t)] @ self.b[t].unsqueeze(-1)).squeeze(-1)
        return total

    def bW(self, s: int, t: int, psi: torch.Tensor) -> torch.Tensor:
        """b_s psi^T W_(L,t): psi (C, n_L) -> (B, C, n_s, n_t), as an outer product."""
        row = torch.einsum("cl,bclt->bct", psi, self.P[(self.L, t)])
        return self.b[s].unsqueeze(-1) * row.unsqueeze(-2)

    def WW(self, s: int, t: int, Psi: torch.Tensor) -> torch.Tensor:
        """W_(s,0) Psi W_(L,t): Psi (C, n_0, n_L) -> (B, C, n_s, n_t)."""
        return self.P[(s, 0)] @ (Psi.unsqueeze(0) @ self.P[(self.L, t)])

    def traces(self, Psis: torch.Tensor, psis: torch.Tensor) -> torch.Tensor:
        """tr([WW]_(s,s)) and tr([bW]_(s,s)) for s = 1 .. L-1: (B, 2 C (L-1)).

        Psis (L-1, C, n_0, n_L), psis (L-1, C, n_L). The traces are computed as tr(W_(s,0) Psi W_(L,s)) =
        <Psi^T, W_(L,0)> and tr(b_s psi^T W_(L,s)) = psi . W_(L,s) b_s.
        """
        L = self.L
        ww = torch.einsum("scil,bcli->bcs", Psis, self.P[(L, 0)])
        Wb = torch.stack([(self.P[(L, s)] @ self.b[s].unsqueeze(-1)).squeeze(-1) for s in range(1, L)], dim=2)
        bw = torch.einsum("scl,bcsl->bcs", psis, Wb)  # Wb (B, C, L-1, n_L)
        return torch.cat([ww.flatten(1), bw.flatten(1)], dim=1)


def _psi(channels: int, n_out: int) -> torch.Tensor:
    return torch.randn(channels, n_out) / (channels * n_out)


def _Psi(channels: int, n_in: int, n_out: int) -> torch.Tensor:
    return torch.randn(channels, n_in, n_out) / (channels * n_in * n_out)


class PolynomialLinear(nn.Module):
    """features (B, in_channels, ...) -> (B, out_channels, ...) on a dense network description. It is
    equivariant to hidden permutations with any invertible scalings (see the module docstring)."""

    def __init__(self, description: NetworkDescription, in_channels: int, out_channels: int):
        super().__init__()
        _check_dense(description, "PolynomialLinear")
        self.description, self.in_channels, self.out_channels = description, in_channels, out_channels
        L, n, C, C_out = description.num_layers, description.unit_sizes, in_channels, out_channels
        self.weight_maps, self.bias_maps = nn.ModuleList(), nn.ModuleList()
        for s in range(1, L + 1):
            if s == 1:
                weight = ChannelLinear(C * (3 * n[0] + 1), C_out * n[0], bias=False)  # rows of 3 terms, b_1
                bias = ChannelLinear(C * (3 * n[0] + 1), C_out, bias=False)
            elif s == L:
                weight = ChannelLinear(3 * C * n[L], C_out * n[L], bias=False)  # columns of 3 terms
                invariant = C * (3 * n[L] * n[0] + 2 * n[L] + 2 * (L - 1))
                bias = ChannelLinear(invariant, C_out * n[L], bias=True)  # the bias is the constant
            else:
                weight = ChannelLinear(3 * C, C_out, bias=False)
                bias = ChannelLinear(C * (3 * n[0] + 2), C_out, bias=False)  # rows of 3 terms, sum Wb, b_s
            _xavier(weight)
            _xavier(bias)
            self.weight_maps.append(weight)
            self.bias_maps.append(bias)
        # psi/Psi for [bW]_(s,t) and [WW]_(s,t) at the (s, t) each output reads, and the traces'
        for s in range(1, L + 1):
            for t in sorted({s - 1, 0}):
                self.register_buffer(f"psi_{s}_{t}", _psi(C, n[L]))
                self.register_buffer(f"Psi_{s}_{t}", _Psi(C, n[0], n[L]))
        self.register_buffer("trace_psi", torch.stack([_psi(C, n[L]) for _ in range(L - 1)]))
        self.register_buffer("trace_Psi", torch.stack([_Psi(C, n[0], n[L]) for _ in range(L - 1)]))

    def _terms(self, p: _Products, s: int, t: int) -> list[torch.Tensor]:
        """W_(s,t), [WW]_(s,t), [bW]_(s,t): each (B, C, n_s, n_t)."""
        return [p.P[(s, t)], p.WW(s, t, getattr(self, f"Psi_{s}_{t}")), p.bW(s, t, getattr(self, f"psi_{s}_{t}"))]

    def forward(self, features: WeightSpaceFeatures) -> WeightSpaceFeatures:
        if features.description != self.description:
            raise ValueError("features of another network description")
        p, L, batch = _Products(features), self.description.num_layers, features.batch_size
        weights, biases = [], []
        for s in range(1, L + 1):
            n_out, n_in = p.W[s].shape[-2:]
            weight_map, bias_map = self.weight_maps[s - 1], self.bias_maps[s - 1]
            if s == 1:
                x = torch.cat([*map(_rows, self._terms(p, 1, 0)), p.b[1]], dim=1)  # (B, C (3 n_0 + 1), n_1)
                weights.append(weight_map(x).view(batch, -1, n_in, n_out).transpose(-1, -2))
                biases.append(bias_map(x))
            elif s == L:
                x = torch.cat([_columns(term) for term in self._terms(p, L, L - 1)], dim=1)  # (B, 3 C n_L, n_{L-1})
                weights.append(weight_map(x).view(batch, -1, n_out, n_in))
                invariant = torch.cat([*(term.flatten(1) for term in self._terms(p, L, 0)), p.b[L].flatten(1),
                                       p.Wb_sum(L).flatten(1), p.traces(self.trace_Psi, self.trace_psi)], dim=1)
                biases.append(bias_map(invariant.unsqueeze(-1)).view(batch, -1, n_out))
            else:
                weights.append(weight_map(torch.cat(self._terms(p, s, s - 1), dim=1)))
                x = torch.cat([*map(_rows, self._terms(p, s, 0)), p.Wb_sum(s), p.b[s]], dim=1)
                biases.append(bias_map(x))
        return WeightSpaceFeatures(self.description, tuple(weights), tuple(biases))

    def extra_repr(self) -> str:
        return f"in_channels={self.in_channels}, out_channels={self.out_channels}"


class PolynomialPool(nn.Module):
    """features (B, C, ...) -> (B, out_channels): the invariant layer, with learned psi/Psi. It is a linear
    map, with a constant, of W_(L,0), [WW]_(L,0), [bW]_(L,0), sum_t [Wb]_(L,t), b_L and the traces."""

    def __init__(self, description: NetworkDescription, in_channels: int, out_channels: int):
        super().__init__()
        _check_dense(description, "PolynomialPool")
        self.description, self.in_channels, self.out_channels = description, in_channels, out_channels
        L, n, C = description.num_layers, description.unit_sizes, in_channels
        self.psi = nn.Parameter(_psi(C, n[L]))
        self.Psi = nn.Parameter(_Psi(C, n[0], n[L]))
        self.trace_psi = nn.Parameter(torch.stack([_psi(C, n[L]) for _ in range(L - 1)]))
        self.trace_Psi = nn.Parameter(torch.stack([_Psi(C, n[0], n[L]) for _ in range(L - 1)]))
        self.map = ChannelLinear(C * (3 * n[L] * n[0] + 2 * n[L] + 2 * (L - 1)), out_channels, bias=True)
        _xavier(self.map)
        with torch.no_grad():
            self.map.bias.uniform_()  # the constant tau, as the authors' rand init

    def forward(self, features: WeightSpaceFeatures) -> torch.Tensor:
        if features.description != self.description:
            raise ValueError("features of another network description")
        p, L = _Products(features), self.description.num_layers
        invariant = torch.cat([p.P[(L, 0)].flatten(1), p.WW(L, 0, self.Psi).flatten(1),
                               p.bW(L, 0, self.psi).flatten(1), p.b[L].flatten(1), p.Wb_sum(L).flatten(1),
                               p.traces(self.trace_Psi, self.trace_psi)], dim=1)
        return self.map(invariant.unsqueeze(-1)).squeeze(-1)  # (B, out_channels)

    @staticmethod
    def num_features(out_channels: int) -> int:
        return out_channels

    def extra_repr(self) -> str:
        return f"in_channels={self.in_channels}, out_channels={self.out_channels}"
