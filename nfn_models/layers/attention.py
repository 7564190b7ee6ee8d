"""Transformer-NFN's equivariant and invariant layers for the weights of encoder blocks.

Tran et al. 2025, "Equivariant Neural Functional Networks for Transformers" (ICLR 2025), Sec. 4-5. These
give the equivariant layer E(U), the invariant layer I(U), and in the appendices their term-by-term
parameter sharing.

The group of one block is the paper's G_U (`zoo.symmetry.attention`). It permutes the heads (tau). It acts
on each head's W_Q, W_K by GL(d_k) (W_Q M^T, W_K M^{-1}), and on W_V, W_O by GL(d_v) (W_V N, N^{-1} W_O). It
permutes the model dimension after the attention (pi_O: the columns of W_O, the rows of W_A). It also
permutes the MLP's hidden units (pi_A). The layers see the GL factors only through two invariant D x D
products, summed over the heads:

    [W_Q W_K^T] = sum_i W_Q^(i) W_K^(i)T,        [W_V W_O] = sum_i W_V^(i) W_O^(i).

The sum makes them invariant to head permutations. The layers read them next to W_A, b_A, W_B, b_B.

Every tensor's axes have a kind, and the layers are written once for all kinds (`terms`).

Identity axes are the heads and the GL axes of W_Q, W_K, W_V, W_O. An output with such an axis reads only
the input with the same axis, index for index (W_Q -> W_Q, ...). That is what commutes with GL(d) and with
tau. Such inputs reach no other output.

Permuted axes are pi_O's model dimension and pi_A's hidden units. Each input axis is summed, or identified
with the output's axis of the same kind. An output axis that no input axis is identified with is broadcast.
The paper's terms are exactly these choices.

Fixed axes are the block's input and output model dimensions, which no group element moves. A parameter is
indexed by all of them, input and output alike. These are the paper's D x D and D^3 parameters, e.g. Phi[j,
p, q] for [W_Q W_K^T] -> b_B.

An output's bias is a parameter over its fixed axes, broadcast over its permuted ones. Identity axes get
none. Enumerating these choices reproduces the paper's layers term for term. W_Q, W_K and W_V get 1 term
each, W_O 2, W_A 13, b_A 10, W_B 10, b_B 7 (with the biases). The invariant layer gets 7. The two [W_Q
W_K^T] -> W_B, b_B terms hold D^3 channel pairs each. With residual connections (`residual=True`) pi_O is
not a symmetry. Its axis is fixed, and the same rules give that smaller group's layers.

Blocks are processed independently, with their own parameters; the paper's layers have no cross-block terms.
Every term of an output starts at N(0, 1 / fan-in), the fan-in counted over all of that output's terms.
Biases start at zero.
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import torch
from torch import nn

IDENTITY, PERMUTED, FIXED = "identity", "permuted", "fixed"
# axes: h heads, q/k/v/w the GL axes of W_Q/W_K/W_V/W_O, i/u the block's input/output model
# dimension, o the model dimension after the attention (pi_O), a the MLP's hidden units (pi_A)
HEAD_TENSORS = {"wq": "hiq", "wk": "hik", "wv": "hiv", "wo": "hwo"}
MLP_TENSORS = {"wa": "oa", "ba": "a", "wb": "au", "bb": "u"}
PRODUCTS = {"qk": "ii", "vo": "io"}
LAYER_INPUTS = {**HEAD_TENSORS, **PRODUCTS, **MLP_TENSORS}


def axis_kinds(residual: bool) -> dict[str, str]:
    return {**dict.fromkeys("hqkvw", IDENTITY), "i": FIXED, "u": FIXED, "o": FIXED if residual else PERMUTED,
            "a": PERMUTED}


def axis_sizes(num_heads: int, d_model: int, d_k: int, d_v: int, mlp_dim: int) -> dict[str, int]:
    return {"h": num_heads, "q": d_k, "k": d_k, "v": d_v, "w": d_v, "i": d_model, "u": d_model, "o": d_model,
            "a": mlp_dim}


@dataclasses.dataclass(frozen=True)
class Term:
    source: str  # the input tensor's name
    equation: str  # einsum of (parameter, input) -> (B, out channels, the output's non-broadcast axes)
    shape: tuple[int, ...]  # the parameter's: (out channels, in channels, fixed axes...)
    view: tuple[int, ...]  # the result's shape after the batch axis, 1 on broadcast axes
    fan_in: int  # input entries each output entry sums


def terms(source: str, source_axes: str, target_axes: str, kinds: dict[str, str], sizes: dict[str, int],
          in_channels: int, out_channels: int) -> list[Term]:
    """Every equivariant linear map from a tensor with `source_axes` to one with `target_axes`."""
    if any(kinds[a] == IDENTITY for a in target_axes) and sorted(source_axes) != sorted(target_axes):
        return []  # an identity axis is read only from the same tensor kind, index for index
    if any(kinds[a] == IDENTITY for a in source_axes) and sorted(source_axes) != sorted(target_axes):
        return []  # ... and an input with identity axes reaches only that output
    for axes in (source_axes, target_axes):
        repeated = [a for a in set(axes) if kinds[a] != FIXED and axes.count(a) > 1]
        if repeated:
            raise ValueError(f"axes {axes!r}: a permuted or identity axis kind appears twice ({repeated})")
    letters = iter("fghijklmnopqrstuvwxyz")
    src = [next(letters) for _ in source_axes]
    options = []
    for axis in target_axes:
        if kinds[axis] == FIXED:
            options.append(["fixed"])
        else:
            match = [k for k, a in enumerate(source_axes) if a == axis]
            options.append(match if kinds[axis] == IDENTITY else [None, *match])  # None: broadcast
    found = []
    for choice in itertools.product(*options):
        parameter = [src[k] for k, a in enumerate(source_axes) if kinds[a] == FIXED]
        parameter_sizes = [sizes[a] for a in source_axes if kinds[a] == FIXED]
        out, view = [], []
        for axis, option in zip(target_axes, choice):
            if option is None:
                view.append(1)
                continue
            if option == "fixed":
                letter = next(letters)
                parameter.append(letter)
                parameter_sizes.append(sizes[axis])
            else:
                letter = src[option]
            out.append(letter)
            view.append(sizes[axis])
        identified = {option for option in choice if isinstance(option, int)}  # source axes matched, not summed
        fan_in = in_channels * math.prod(sizes[a] for k, a in enumerate(source_axes) if k not in identified)
        equation = f"ec{''.join(parameter)},bc{''.join(src)}->be{''.join(out)}"
        found.append(Term(source, equation, (out_channels, in_channels, *parameter_sizes),
                          (out_channels, *view), fan_in))
    return found


class TermSum(nn.Module):
    """One output tensor: the sum of its terms over the inputs, plus its bias."""

    def __init__(self, target_axes: str, sources: dict[str, str], kinds: dict[str, str], sizes: dict[str, int],
                 in_channels: int, out_channels: int):
        super().__init__()
        self.terms = [t for name, axes in sources.items()
                      for t in terms(name, axes, target_axes, kinds, sizes, in_channels, out_channels)]
        if not self.terms:
            raise ValueError(f"no equivariant term reaches an output with axes {target_axes!r}")
        fan_in = sum(t.fan_in for t in self.terms)
        self.weights = nn.ParameterList(nn.Parameter(torch.randn(t.shape) / math.sqrt(fan_in)) for t in self.terms)
        self.shape = (out_channels, *(sizes[a] for a in target_axes))
        has_bias = all(kinds[a] != IDENTITY for a in target_axes)
        bias_shape = (out_channels, *(sizes[a] if kinds[a] == FIXED else 1 for a in target_axes))
        self.bias = nn.Parameter(torch.zeros(bias_shape)) if has_bias else None

    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        batch = next(iter(inputs.values())).shape[0]
        out = None if self.bias is None else self.bias.unsqueeze(0)
        for term, weight in zip(self.terms, self.weights):
            value = torch.einsum(term.equation, weight, inputs[term.source]).reshape(batch, *term.view)
            out = value if out is None else out + value
        return out.expand(batch, *self.shape)


def products(block: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The GL-invariant products, summed over the heads, beside the MLP tensors."""
    return {"qk": torch.einsum("bchpk,bchqk->bcpq", block["wq"], block["wk"]),
            "vo": torch.einsum("bchpk,bchkq->bcpq", block["wv"], block["wo"]),
            **{name: block[name] for name in MLP_TENSORS}}


class AttentionLinear(nn.Module):
    """The equivariant layer E: per block, C_in -> C_out channels of every block tensor."""

    def __init__(self, num_blocks: int, sizes: dict[str, int], in_channels: int, out_channels: int,
                 residual: bool = False):
        super().__init__()
        kinds = axis_kinds(residual)
        mlp_sources = {**PRODUCTS, **MLP_TENSORS}
        self.blocks = nn.ModuleList(
            nn.ModuleDict({**{name: TermSum(axes, {name: axes}, kinds, sizes, in_channels, out_channels)
                              for name, axes in HEAD_TENSORS.items()},
                           **{name: TermSum(axes, mlp_sources, kinds, sizes, in_channels, out_channels)
                              for name, axes in MLP_TENSORS.items()}})
            for _ in range(num_blocks))

    def forward(self, features: list[dict[str, torch.Tensor]]) -> list[dict[str, torch.Tensor]]:
        out = []
        for layer, block in zip(self.blocks, features):
            inputs = {**products(block), **{name: block[name] for name in HEAD_TENSORS}}
            out.append({name: layer[name](inputs) for name in (*HEAD_TENSORS, *MLP_TENSORS)})
        return out


class MLPActivation(nn.Module):
    """The nonlinearity between equivariant layers, on W_A, b_A, W_B, b_B only. On W_Q, W_K, W_V, W_O it
    would not commute with GL(d); the paper leaves them linear too."""

    def __init__(self, activation: nn.Module):
        super().__init__()
        self.activation = activation

    def forward(self, features: list[dict[str, torch.Tensor]]) -> list[dict[str, torch.Tensor]]:
        return [{name: self.activation(t) if name in MLP_TENSORS else t for name, t in block.items()}
                for block in features]


class AttentionInvariant(nn.Module):
    """The invariant layer I: per block, C_in channels -> C_out numbers, optionally LayerNorm'd. They are
    concatenated over the blocks: (B, num_blocks * C_out)."""

    def __init__(self, num_blocks: int, sizes: dict[str, int], in_channels: int, out_channels: int,
                 residual: bool = False, layer_norm: bool = True):
        super().__init__()
        kinds = axis_kinds(residual)
        self.blocks = nn.ModuleList(TermSum("", {**PRODUCTS, **MLP_TENSORS}, kinds, sizes, in_channels, out_channels)
                                    for _ in range(num_blocks))
        self.norms = nn.ModuleList((nn.LayerNorm(out_channels) if layer_norm else nn.Identity())
                                   for _ in range(num_blocks))

    def forward(self, features: list[dict[str, torch.Tensor]]) -> torch.Tensor:
        return torch.cat([norm(layer(products(block))) for layer, norm, block in
                          zip(self.blocks, self.norms, features)], dim=1)
