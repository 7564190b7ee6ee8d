"""The HNP equivariant linear layer: only hidden unit axes permuted (Zhou et al. 2023, Sec. 3).

Zhou et al., "Permutation Equivariant Neural Functionals" (NeurIPS 2023), Sec. 3 and Appendix: the HNP
("hidden neuron permutation") NF-Layer. It is equivariant to S_{n_1} x ... x S_{n_{L-1}} only. The input
axis 0 and output axis L are fixed, so whatever they index stays un-pooled. W_0's input units and W_{L-1}'s
output units become channels of the vectors on the first and last hidden axes. The last bias b_{L-1} is read
whole.

We use the notation of `nfn_models.layers.np`: shaped W_i (B, C f_i, n_{i+1}, n_i), b_i (B, C, n_{i+1}).
W'_0[r] is row r with its n_0 inputs as channels. W'_{L-1}[:, c] is column c with its n_L outputs as
channels. The first layer's output is

    W'_0[r] = P_0 u_1[r] + R_0 s,        b'_0[r] = E_0 u_1[r] + F_0 s.

A middle layer's output is

    W'_i[r, c] = A_i W_i[r, c] + P_i u_{i+1}[r] + Q_i u_i[c] + R_i s,
    b'_i[r] = E_i u_{i+1}[r] + F_i s.

The last layer's output is

    W'_{L-1}[:, c] = Q_{L-1} u_{L-1}[c] + R_{L-1} s,        b'_{L-1} = F_{L-1} s.

For hidden axis k, u_k gathers the NP pieces of v_k: the mean of W_{k-1} over inputs, b_{k-1}, and the mean
of W_k over outputs. Next to a fixed axis it also holds the whole neighbouring weight. That is W_0 as (C f_0
n_0) channels on axis 1 ("in_full"), and W_{L-1} as (C f_{L-1} n_L) channels on axis L-1 ("out_full"). The
vector s holds the global means of every W_i and b_i. It also holds the mean of W_0 over outputs (C f_0
n_0), the mean of W_{L-1} over inputs (C f_{L-1} n_L) and b_{L-1} whole (C n_L).

The pieces each term reads, and their order, follow the authors' `nfn==0.1.2` `HNPLinear`. So the tests can
copy its parameters one to one. That includes two quirks we keep on purpose, since a change would break the
cross-check. Some means are read next to the whole tensor they average (redundant, harmless). The last
layer's weight term does not read b_{L-2} (a legal but omitted equivariant term).
"""

from __future__ import annotations

import torch
from torch import nn

from nfn_models.features import NetworkDescription, WeightSpaceFeatures
from nfn_models.layers.channel import ChannelConv2d, ChannelLinear, init_jointly
from nfn_models.layers.np import axis_vectors, sum_terms, unit_mean


def _term_orders(num_layers: int) -> dict[str, tuple[str, ...]]:
    """Which pieces of u_k each kind of term reads, in order (see the module docstring)."""
    L = num_layers
    return {
        "first": ("in_full", "out_mean", "bias", *(("out_full",) if L == 2 else ())),
        "last": ("out_full", "in_mean", *(("in_full",) if L == 2 else ())),
        "by_in": ("out_mean", "in_mean", "bias", "in_full"),  # in_full exists on axis 1 only
        "by_out": ("in_mean", "bias", "out_mean", "out_full"),  # out_full on axis L-1 only
    }


def hidden_axis_vectors(weights: tuple[torch.Tensor, ...], biases: tuple[torch.Tensor, ...],
                        axis: int) -> dict[str, torch.Tensor]:
    """The pieces of u_axis for a hidden axis: each (B, channels, n_axis)."""
    L = len(weights)
    pieces = axis_vectors(weights, biases, axis)
    if axis == 1:
        w = weights[0]  # (B, C f, n_1, n_0) -> (B, C f n_0, n_1)
        pieces["in_full"] = w.transpose(-1, -2).reshape(w.shape[0], -1, w.shape[2])
    if axis == L - 1:
        w = weights[L - 1]  # (B, C f, n_L, n_{L-1}) -> (B, C f n_L, n_{L-1})
        pieces["out_full"] = w.reshape(w.shape[0], -1, w.shape[3])
    return pieces


def _widths(description: NetworkDescription, axis: int, channels: int) -> dict[str, int]:
    """Channel widths of the pieces of u_axis (mirrors `hidden_axis_vectors`)."""
    f, n, L = description.filter_sizes, description.unit_sizes, description.num_layers
    widths = {"in_mean": channels * f[axis - 1], "bias": channels, "out_mean": channels * f[axis]}
    if axis == 1:
        widths["in_full"] = channels * f[0] * n[0]
    if axis == L - 1:
        widths["out_full"] = channels * f[L - 1] * n[L]
    return widths


def _cat(pieces: dict[str, torch.Tensor], order: tuple[str, ...]) -> torch.Tensor:
    """The pieces concatenated along channels, (B, ., n), stored channels-last. The `ChannelLinear`s that
    read it see a contiguous (B, n, .) and share it, with no copy of their own."""
    return torch.cat([pieces[name].movedim(1, -1) for name in order if name in pieces], dim=-1).movedim(-1, 1)


class HNPLinear(nn.Module):
    """features (B, in_channels, ...) -> features (B, out_channels, ...), HNP-equivariant."""

    def __init__(self, description: NetworkDescription, in_channels: int, out_channels: int):
        super().__init__()
        L = description.num_layers
        if L < 2:
            raise ValueError("HNP needs a hidden layer (at least two layers); use NPLinear for one layer")
        self.description, self.in_channels, self.out_channels = description, in_channels, out_channels
        f, n = description.filter_sizes, description.unit_sizes
        self.orders = _term_orders(L)
        global_width = in_channels * (sum(f) + L + f[0] * n[0] + f[-1] * n[-1] + n[-1])

        def width(axis: int, kind: str) -> int:
            widths = _widths(description, axis, in_channels)
            return sum(widths[name] for name in self.orders[kind] if name in widths)

        self.terms = nn.ModuleList()
        for i in range(L):
            o = out_channels
            if i == 0:
                terms = nn.ModuleDict({
                    "weight_by_out": ChannelLinear(width(1, "first"), o * f[0] * n[0]),
                    "weight_global": ChannelLinear(global_width, o * f[0] * n[0]),
                    "bias_by_out": ChannelLinear(width(1, "first"), o),
                    "bias_global": ChannelLinear(global_width, o)})
                init_jointly(terms["weight_by_out"], terms["weight_global"])
            elif i == L - 1:
                terms = nn.ModuleDict({
                    "weight_by_in": ChannelLinear(width(L - 1, "last"), o * f[i] * n[L]),
                    "weight_global": ChannelLinear(global_width, o * f[i] * n[L]),
                    "bias_global": ChannelLinear(global_width, o * n[L])})
                init_jointly(terms["weight_by_in"], terms["weight_global"])
                init_jointly(terms["bias_global"])
            else:
                terms = nn.ModuleDict({
                    "weight_self": (ChannelConv2d if f[i] > 1 else ChannelLinear)(in_channels * f[i], o * f[i]),
                    "weight_global": ChannelLinear(global_width, o * f[i]),
                    "weight_by_out": ChannelLinear(width(i + 1, "by_out"), o * f[i]),
                    "weight_by_in": ChannelLinear(width(i, "by_in"), o * f[i]),
                    "bias_by_out": ChannelLinear(width(i + 1, "by_out"), o),
                    "bias_global": ChannelLinear(global_width, o)})
                init_jointly(*(terms[k] for k in ("weight_self", "weight_global", "weight_by_out", "weight_by_in")))
            if "bias_by_out" in terms:
                init_jointly(terms["bias_by_out"], terms["bias_global"])
            self.terms.append(terms)

    def forward(self, features: WeightSpaceFeatures) -> WeightSpaceFeatures:
        weights, biases = features.shaped(), features.biases  # (B, C f_i, n_{i+1}, n_i), (B, C, n_{i+1})
        L, batch = len(weights), features.batch_size
        means = [unit_mean(w, (-2, -1)) for w in weights] + [b.mean(dim=-1) for b in biases]
        s = torch.cat(means + [unit_mean(weights[0], -2).flatten(1),  # (B, C f_0 n_0)
                               unit_mean(weights[-1], -1).flatten(1),  # (B, C f_{L-1} n_L)
                               biases[-1].flatten(1)], dim=1)  # (B, C n_L)
        u = {axis: hidden_axis_vectors(weights, biases, axis) for axis in range(1, L)}
        out_weights, out_biases = [], []
        for i, terms in enumerate(self.terms):
            n_out, n_in = weights[i].shape[-2:]
            if i == 0:
                u_1 = _cat(u[1], self.orders["first"])  # (B, ., n_1)
                z = terms["weight_by_out"](u_1) + terms["weight_global"](s)[:, :, None]  # (B, O f n_0, n_1)
                out_weights.append(z.view(batch, -1, n_in, n_out).transpose(-1, -2))  # (B, O f, n_1, n_0)
                out_biases.append(terms["bias_by_out"](u_1) + terms["bias_global"](s)[:, :, None])
            elif i == L - 1:
                u_last = _cat(u[L - 1], self.orders["last"])  # (B, ., n_{L-1})
                z = terms["weight_by_in"](u_last) + terms["weight_global"](s)[:, :, None]  # (B, O f n_L, n_{L-1})
                out_weights.append(z.view(batch, -1, n_out, n_in))
                out_biases.append(terms["bias_global"](s).view(batch, -1, n_out))  # (B, O, n_L)
            else:
                v_out, v_in = _cat(u[i + 1], self.orders["by_out"]), _cat(u[i], self.orders["by_in"])
                out_weights.append(sum_terms(terms["weight_self"](weights[i]),  # (B, O f_i, n_{i+1}, n_i)
                                             terms["weight_global"](s)[:, :, None, None],
                                             terms["weight_by_out"](v_out)[:, :, :, None],
                                             terms["weight_by_in"](v_in)[:, :, None, :]))
                out_biases.append(terms["bias_by_out"](v_out) + terms["bias_global"](s)[:, :, None])
        return WeightSpaceFeatures.from_shaped(self.description, tuple(out_weights), tuple(out_biases))

    def extra_repr(self) -> str:
        return f"in_channels={self.in_channels}, out_channels={self.out_channels}"
