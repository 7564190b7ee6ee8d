"""The NP equivariant linear layer: every unit axis permuted (Zhou et al. 2023, Sec. 3).

Zhou, Yang, Burns, Cardace, Jiang, Sokota, Kolter, Finn, "Permutation Equivariant Neural Functionals"
(NeurIPS 2023), Sec. 3: the NP ("neural permutation") NF-Layer. It is equivariant to S_{n_0} x ... x
S_{n_L}, so the input and output units are permutable too. It is then equivariant a fortiori to the
hidden-unit group of the zoo's networks.

Layers are 0-based: layer i maps unit axis i to axis i + 1. Take shaped weights W_i (B, C f_i, n_{i+1}, n_i)
and biases b_i (B, C, n_{i+1}) (`WeightSpaceFeatures.shaped`). The linear maps act on channels. A weight's
output is

    W'_i[r, c] = A_i W_i[r, c] + P_i v_{i+1}[r] + Q_i v_i[c] + R_i s + bias terms.

A bias's output is

    b'_i[r] = E_i v_{i+1}[r] + F_i s + bias terms.

Here v_k is everything indexed by unit axis k alone. That is the mean of W_{k-1} over its inputs, the bias
b_{k-1} and the mean of W_k over its outputs, whichever exist. The vector s holds the global means of every
W_i and every b_i. Those are all the ways a permutation-equivariant linear map can read the weights (the
paper's parameter-sharing characterization).

A convolution's f_i = kh * kw filter positions are extra channels, as in the authors' `nfn` package. Each
term is its own `ChannelLinear` with its own bias. Biases of terms summed into one output are redundant. We
keep them so the parameter count equals the reference's.

The form is chosen per weight shape. A convolution's W_i (f_i > 1) is mixed by a 1x1 convolution of (B, C
f_i, n_{i+1}, n_i) as it is (`ChannelConv2d`: no copy, the bias fused). Its terms are summed in place.
Everything else goes through `nn.Linear` on channels-last views (`ChannelLinear`), faster on small tensors
(docs/performance.md, `make bench-nfn`). The concatenation orders of v_k follow `nfn==0.1.2`'s `NPLinear`.
So the tests can copy parameters across one to one.
"""

from __future__ import annotations

import torch
from torch import nn

from nfn_models.features import NetworkDescription, WeightSpaceFeatures
from nfn_models.layers.channel import ChannelConv2d, ChannelLinear, init_jointly

# Pieces of v_k, in the order a term concatenates them (the reference's order).
BY_OUT_ORDER = ("in_mean", "bias", "out_mean")  # v_{i+1}, read by W'_i's rows and by b'_i
BY_IN_ORDER = ("out_mean", "in_mean", "bias")  # v_i, read by W'_i's columns


def _axis_pieces(description: NetworkDescription, axis: int, channels: int) -> dict[str, int]:
    """The channel widths of the pieces of v_axis that exist."""
    f, L = description.filter_sizes, description.num_layers
    pieces = {}
    if axis >= 1:
        pieces["in_mean"] = channels * f[axis - 1]
        pieces["bias"] = channels
    if axis < L:
        pieces["out_mean"] = channels * f[axis]
    return pieces


def unit_mean(x: torch.Tensor, dim: int | tuple[int, ...]) -> torch.Tensor:
    """`x.mean(dim)` as a sum divided by the count, which gives the same bits on the CPU. Its gradient
    reaches `x` as a broadcast view. Autograd adds that into `x`'s other gradients in place. Mean's backward
    would materialize a full-size temporary first."""
    dims = (dim,) if isinstance(dim, int) else dim
    count = 1
    for d in dims:
        count *= x.shape[d]
    return x.sum(dim=dims) / count


def sum_terms(first: torch.Tensor, *others: torch.Tensor) -> torch.Tensor:
    """first + others[0] + others[1] + ..., left to right (the same bits). The sum is added into `first` in
    place when it is a fresh tensor (a 1x1 convolution's output). That spares the sum's full-size
    temporaries. A view (`ChannelLinear`'s output) is not changed, since autograd would copy its base back."""
    if first._base is not None:
        first = first + others[0]
        others = others[1:]
    for other in others:
        first.add_(other)
    return first


def axis_vectors(weights: tuple[torch.Tensor, ...], biases: tuple[torch.Tensor, ...],
                 axis: int) -> dict[str, torch.Tensor]:
    """The pieces of v_axis: each (B, channels, n_axis)."""
    pieces = {}
    if axis >= 1:
        pieces["in_mean"] = unit_mean(weights[axis - 1], -1)  # mean over inputs of W_{axis-1}
        pieces["bias"] = biases[axis - 1]
    if axis < len(weights):
        pieces["out_mean"] = unit_mean(weights[axis], -2)  # mean over outputs of W_axis
    return pieces


def _cat(pieces: dict[str, torch.Tensor], order: tuple[str, ...]) -> torch.Tensor:
    """The pieces concatenated along channels, (B, ., n), stored channels-last. The `ChannelLinear`s that
    read it see a contiguous (B, n, .) and share it, with no copy of their own."""
    return torch.cat([pieces[name].movedim(1, -1) for name in order if name in pieces], dim=-1).movedim(-1, 1)


class NPLinear(nn.Module):
    """features (B, in_channels, ...) -> features (B, out_channels, ...), NP-equivariant."""

    def __init__(self, description: NetworkDescription, in_channels: int, out_channels: int):
        super().__init__()
        self.description, self.in_channels, self.out_channels = description, in_channels, out_channels
        f, L = description.filter_sizes, description.num_layers
        global_width = in_channels * (sum(f) + L)
        self.terms = nn.ModuleList()
        for i in range(L):
            by_out = sum(_axis_pieces(description, i + 1, in_channels).values())
            by_in = sum(_axis_pieces(description, i, in_channels).values())
            terms = nn.ModuleDict({
                "weight_self": (ChannelConv2d if f[i] > 1 else ChannelLinear)(in_channels * f[i], out_channels * f[i]),
                "weight_global": ChannelLinear(global_width, out_channels * f[i]),
                "weight_by_out": ChannelLinear(by_out, out_channels * f[i]),  # broadcast over columns
                "weight_by_in": ChannelLinear(by_in, out_channels * f[i]),  # broadcast over rows
                "bias_by_out": ChannelLinear(by_out, out_channels),
                "bias_global": ChannelLinear(global_width, out_channels),
            })
            init_jointly(*(terms[name] for name in ("weight_self", "weight_global", "weight_by_out", "weight_by_in")))
            init_jointly(terms["bias_by_out"], terms["bias_global"])
            self.terms.append(terms)

    def forward(self, features: WeightSpaceFeatures) -> WeightSpaceFeatures:
        weights, biases = features.shaped(), features.biases  # (B, C f_i, n_{i+1}, n_i), (B, C, n_{i+1})
        L = len(weights)
        means = [unit_mean(w, (-2, -1)) for w in weights] + [b.mean(dim=-1) for b in biases]
        s = torch.cat(means, dim=1)  # (B, C (sum f_i + L))
        vectors = [axis_vectors(weights, biases, axis) for axis in range(L + 1)]
        out_weights, out_biases = [], []
        for i, terms in enumerate(self.terms):
            v_out = _cat(vectors[i + 1], BY_OUT_ORDER)  # (B, ., n_{i+1})
            v_in = _cat(vectors[i], BY_IN_ORDER)  # (B, ., n_i)
            out_weights.append(sum_terms(terms["weight_self"](weights[i]),  # (B, O f_i, n_{i+1}, n_i)
                                         terms["weight_global"](s)[:, :, None, None],
                                         terms["weight_by_out"](v_out)[:, :, :, None],
                                         terms["weight_by_in"](v_in)[:, :, None, :]))
            out_biases.append(terms["bias_by_out"](v_out) + terms["bias_global"](s)[:, :, None])  # (B, O, n_{i+1})
        return WeightSpaceFeatures.from_shaped(self.description, tuple(out_weights), tuple(out_biases))

    def extra_repr(self) -> str:
        return f"in_channels={self.in_channels}, out_channels={self.out_channels}"
