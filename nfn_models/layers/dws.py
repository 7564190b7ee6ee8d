"""The DWS layer: every linear map of an MLP's weight space equivariant to hidden-unit permutations.

Navon, Shamsian, Achituve, Fetaya, Chechik & Maron, "Equivariant Architectures for Learning in Deep Weight
Spaces" (ICML 2023), Sec. 4-5 and Appendix. The weight space is V = (W_0..W_{L-1}, b_0..b_{L-1}). The group
G = S_{n_1} x ... x S_{n_{L-1}} permutes the hidden axes; the input axis 0 and output axis L are fixed. An
equivariant linear map L: V -> V' splits into four blocks. They are weight-to-weight, bias-to-weight,
weight-to-bias and bias-to-bias, each a sum over (source, target) tensor pairs.

The paper characterizes one pair's block. Each hidden axis the two tensors share is either kept ("the same
unit") or pooled and broadcast. Every hidden axis only the source has is pooled. Every one only the target
has is broadcast. The fixed axes' units are feature channels.

Take shaped W_i (B, C f_i, n_{i+1}, n_i) and b_i (B, C, n_{i+1}) from `nfn_models.features`. Layers are
0-based: layer i maps axis i to axis i + 1. Let T be a target tensor and K a set of its hidden axes kept.
Each source S that has the axes K is averaged over its other hidden axes:

    T'[K] += Lin_{T,K}( concat over S of mean_{hidden axes of S not in K} S ).

So each target has three kinds of term: both axes kept, one, or none. Each is split by its sources' kind,
which gives the four blocks. A weight gets every kind of term:

    W'_i[r, c] = A_i W_i[r, c] + P_i u_{i+1}[r] + Q_i u_i[c] + R_i s + c_i.

A bias keeps at most its one axis:

    b'_i[r] = E_i u_{i+1}[r] + F_i s + d_i.

Here u_k concatenates every source indexed by hidden axis k, pooled to it. That is the mean of W_{k-1} over
its inputs, b_{k-1}, and the mean of W_k over its outputs. When k = 1 the first is whole (n_0 channels).
When k = L - 1 the last is whole (n_L channels). The vector s concatenates every source pooled over all its
hidden axes. W_0 is kept over its n_0 inputs, W_{L-1} over its n_L outputs, and b_{L-1} whole.

On the first and last layers an axis is fixed. Its units are channels of the target, and the missing terms
drop. W'_0 has no Q or A term, W'_{L-1} no P or A term, and b'_{L-1} only F s + d. The terms are the whole
basis (`tests/nfn_models/test_dwsnet.py`). The tests build the dense map of a tiny MLP's layer. They check
that it commutes with every hidden permutation, and that the layer's maps span the commutant.

How this differs from the authors' code (AvivNavon/DWSNets, `nn/layers/`). Pooling is the mean, as in the
paper's linear layer. Their MNIST script uses max pooling and set-attention (SAB) blocks. Those make the
layer nonlinear and are not implemented here. The sources of one term form one concatenated `ChannelLinear`
per block. That is the same function class as their per-pair blocks, with one bias per target tensor. They
divide the summed blocks by 2L. We instead initialize the terms feeding one target jointly
(Uniform(+-1/sqrt(fan-in)), `nfn_models.layers.channel`).

HNP (`nfn_models.layers.hnp`) spans the same group's maps but keeps `nfn`'s two quirks. This layer reads
every term once. A convolution's filter positions are extra channels, as NP and HNP treat them. That is an
extension: the paper defines the layer for MLPs.
"""

from __future__ import annotations


import torch
from torch import nn

from nfn_models.features import NetworkDescription, WeightSpaceFeatures
from nfn_models.layers.channel import ChannelLinear, init_jointly

BLOCKS = ("weight_to_weight", "bias_to_weight", "weight_to_bias", "bias_to_bias")


def _source_widths(description: NetworkDescription, channels: int) -> dict[str, dict]:
    """Channel widths of the pooled sources, by kind ("weight"/"bias") and what they keep."""
    f, n, L = description.filter_sizes, description.unit_sizes, description.num_layers
    weight_global = channels * (f[0] * n[0] + sum(f[1:-1]) + f[-1] * n[L])
    bias_global = channels * (L - 1 + n[L])
    weight_axis = {k: channels * (f[k - 1] * (n[0] if k == 1 else 1) + f[k] * (n[L] if k == L - 1 else 1))
                   for k in range(1, L)}
    return {"weight": {"global": weight_global, **weight_axis}, "bias": {"global": bias_global,
                                                                        **{k: channels for k in range(1, L)}}}


def pooled_sources(weights: tuple[torch.Tensor, ...], biases: tuple[torch.Tensor, ...]) -> dict[str, dict]:
    """Every source pooled to each set of hidden axes it can keep: "global" (B, D), axis k (B, D_k, n_k)."""
    L, batch = len(weights), weights[0].shape[0]
    first, last = weights[0], weights[-1]  # (B, C f_0, n_1, n_0), (B, C f, n_L, n_{L-1})
    weight_global = [first.mean(dim=-2).flatten(1), *(w.mean(dim=(-2, -1)) for w in weights[1:-1]),
                     last.mean(dim=-1).flatten(1)]
    bias_global = [b.mean(dim=-1) for b in biases[:-1]] + [biases[-1].flatten(1)]
    weight_axis = {}
    for k in range(1, L):
        into = weights[k - 1]  # its rows are axis k
        into = into.transpose(-1, -2).reshape(batch, -1, into.shape[-2]) if k == 1 else into.mean(dim=-1)
        out_of = weights[k]  # its columns are axis k
        out_of = out_of.reshape(batch, -1, out_of.shape[-1]) if k == L - 1 else out_of.mean(dim=-2)
        weight_axis[k] = torch.cat([into, out_of], dim=1)  # (B, ., n_k)
    return {"weight": {"global": torch.cat(weight_global, dim=1), **weight_axis},
            "bias": {"global": torch.cat(bias_global, dim=1), **{k: biases[k - 1] for k in range(1, L)}}}


class DWSLinear(nn.Module):
    """features (B, in_channels, ...) -> features (B, out_channels, ...), equivariant to hidden permutations."""

    def __init__(self, description: NetworkDescription, in_channels: int, out_channels: int):
        super().__init__()
        L = description.num_layers
        if L < 2:
            raise ValueError("a DWS layer needs a hidden layer (at least two layers); with none there is "
                             "no permutation to be equivariant to")
        self.description, self.in_channels, self.out_channels = description, in_channels, out_channels
        f, n = description.filter_sizes, description.unit_sizes
        widths = _source_widths(description, in_channels)
        for block in BLOCKS:
            self.add_module(block, nn.ModuleList())
        for i in range(L):
            # target channels: W_0's n_0 inputs and W_{L-1}'s n_L outputs are channels (fixed axes)
            weight_out = out_channels * f[i] * (n[0] if i == 0 else 1) * (n[L] if i == L - 1 else 1)
            bias_out = out_channels * (n[L] if i == L - 1 else 1)
            weight_axes = {"by_out": i + 1, "by_in": i}  # the hidden axes W_i keeps: rows, columns
            weight_axes = {name: k for name, k in weight_axes.items() if 1 <= k <= L - 1}
            bias_axes = {"by_out": i + 1} if i + 1 <= L - 1 else {}
            for block, axes, out in (("weight_to_weight", weight_axes, weight_out),
                                     ("bias_to_weight", weight_axes, weight_out),
                                     ("weight_to_bias", bias_axes, bias_out),
                                     ("bias_to_bias", bias_axes, bias_out)):
                source = widths[block.split("_to_")[0]]
                # one bias per target tensor, carried by its weight-sourced global term
                terms = {"global": ChannelLinear(source["global"], out, bias=block.startswith("weight_"))}
                terms.update({name: ChannelLinear(source[k], out, bias=False) for name, k in axes.items()})
                if block == "weight_to_weight" and len(axes) == 2:
                    terms["self"] = ChannelLinear(in_channels * f[i], out, bias=False)
                getattr(self, block).append(nn.ModuleDict(terms))
        for i in range(L):
            self._init_target(self.weight_to_weight[i], self.bias_to_weight[i])
            self._init_target(self.weight_to_bias[i], self.bias_to_bias[i])

    @staticmethod
    def _init_target(*blocks: nn.ModuleDict) -> None:
        """Uniform(+-1/sqrt(fan-in)), the fan-in summed over every term feeding the target tensor."""
        init_jointly(*(m for block in blocks for m in block.values()))

    @staticmethod
    def _target(blocks: tuple[nn.ModuleDict, nn.ModuleDict], sources: dict[str, dict], axes: dict[str, int],
                self_input: torch.Tensor | None) -> torch.Tensor:
        """Sums a target's terms: global (B, O), by_out (B, O, n_r) on rows, and by_in (B, O, n_c) on
        columns."""
        total = None
        for block, kind in zip(blocks, ("weight", "bias")):
            pooled = sources[kind]
            out = block["global"](pooled["global"])  # (B, O)
            two_axes = len(axes) == 2
            out = out[:, :, None, None] if two_axes else out[:, :, None]
            if "by_out" in block:
                term = block["by_out"](pooled[axes["by_out"]])  # (B, O, n_{i+1})
                out = out + (term[:, :, :, None] if two_axes else term)
            if "by_in" in block:
                term = block["by_in"](pooled[axes["by_in"]])  # (B, O, n_i)
                out = out + (term[:, :, None, :] if two_axes else term)
            if "self" in block:
                out = out + block["self"](self_input)  # (B, O, n_{i+1}, n_i)
            total = out if total is None else total + out
        return total

    def forward(self, features: WeightSpaceFeatures) -> WeightSpaceFeatures:
        weights, biases = features.shaped(), features.biases  # (B, C f_i, n_{i+1}, n_i), (B, C, n_{i+1})
        L, batch = len(weights), features.batch_size
        sources = pooled_sources(weights, biases)
        out_weights, out_biases = [], []
        for i in range(L):
            n_out, n_in = weights[i].shape[-2:]
            axes = {name: k for name, k in (("by_out", i + 1), ("by_in", i)) if 1 <= k <= L - 1}
            w = self._target((self.weight_to_weight[i], self.bias_to_weight[i]), sources, axes, weights[i])
            if i == 0:  # (B, O f n_0, n_1): its inputs were channels
                w = w.reshape(batch, -1, n_in, n_out).transpose(-1, -2)
            elif i == L - 1:  # (B, O f n_L, n_{L-1}): its outputs were channels
                w = w.reshape(batch, -1, n_out, n_in)
            out_weights.append(w)  # (B, O f_i, n_{i+1}, n_i)
            b_axes = {"by_out": i + 1} if i + 1 <= L - 1 else {}
            b = self._target((self.weight_to_bias[i], self.bias_to_bias[i]), sources, b_axes, None)
            out_biases.append(b.reshape(batch, -1, n_out))  # (B, O, n_{i+1})
        return WeightSpaceFeatures.from_shaped(self.description, tuple(out_weights), tuple(out_biases))

    def extra_repr(self) -> str:
        return f"in_channels={self.in_channels}, out_channels={self.out_channels}"
