"""ScaleGMN's message passing on neural graphs: scale/sign-invariant and -equivariant blocks, and GMN's.

Kalogeropoulos, Bouritsas and Panagakis, "Scale Equivariant Graph Metanetworks" (NeurIPS 2024), Sec. 5 (see
`nfn_models.scalegmn` on the section numbers). A hidden neuron's representation h (d,) must be equivariant
to the neuron's multiplier q. That is a positive factor for ReLU networks, a sign for tanh and sine ones:
h(q . w) = q h(w). The building blocks are below; rho and phi are MLPs, and Gamma is linear without bias.

    Scale:  canon(x) = x / ||x||  (0 at 0), invariant to x -> q x for q > 0.
    Sign:   symm(x)  = rho(x) + rho(-x), invariant to x -> -x.
    ScaleInv(x) = phi(canon(x))  or  phi(symm(x)).
    ScaleEq(x)  = Gamma x  (.)  ScaleInv(x), equivariant.

One layer of the forward ScaleGMN works on edges j -> i, with weight W[i, j] and feature e_ij. The message
is (e_ij h_j scales with q_i only)

    m_ij  = ScaleEq(Gamma_e e_ij (.) Gamma_x h_j).

The node update is

    h_i'  = ScaleEq([h_i, sum_j m_ij]).

Between layers the edges are updated, with Inv canon or symm (no phi):

    e_ij' = Gamma e_ij (.) MLP([Inv(h_j), Inv(h_i)]).

Only hidden neurons are scaled. No symmetry moves the input and output neurons. There the message and update
are a plain MLP of the same input (the authors' `mlp_on_io`), or Gamma x (.) MLP(x) without it. Every input
and output neuron carries its own positional embedding, so the output neurons' features are invariant. Each
Gamma starts at N(0, 4 / fan-in) (`gamma`), not torch's default (see there and `nfn_models.scalegmn`).

GMN (Lim et al., "Graph Metanetworks for Processing Diverse Neural Architectures", ICLR 2024) is ScaleGMN's
"permutation" mode:

    m_ij = MLP([e_ij, h_j]),    h_i' = MLP([h_i, sum_j m_ij]),    e_ij' = MLP([e_ij, h_j, h_i]).

Every MLP here is Linear -> LayerNorm -> SiLU -> Linear (the authors' `mlp_args` in every config). This
module imports `torch_geometric` at import time. Only `nfn_models.scalegmn` imports it, inside its
constructor.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
import nfn_models.layers.quiet_geometric  # noqa: F401  (before any torch_geometric import)
from torch_geometric.nn.conv import MessagePassing

MODES = ("permutation", "scale", "sign")


def mlp(in_features: int, hidden: int, out_features: int) -> nn.Sequential:
    """Linear -> LayerNorm -> SiLU -> Linear: every MLP of the authors' configs."""
    return nn.Sequential(nn.Linear(in_features, hidden), nn.LayerNorm(hidden), nn.SiLU(),
                         nn.Linear(hidden, out_features))


def edge_and_node_linear(linear: nn.Linear, edges: torch.Tensor, *nodes: torch.Tensor) -> torch.Tensor:
    """linear(cat([edges, *gathered])) for per-edge features (E, c) and per-node blocks gathered to the
    edges. Each node block is given as (x (N, c'), index (E,)). The node blocks' maps run once per node,
    then are gathered, instead of once per edge (the same function)."""
    blocks = linear.weight.split([edges.shape[-1]] + [x.shape[-1] for x, _ in nodes], dim=1)
    out = F.linear(edges, blocks[0], linear.bias)
    for block, (x, index) in zip(blocks[1:], nodes):
        out = out + F.linear(x, block)[index]
    return out


def gamma(in_features: int, out_features: int) -> nn.Linear:
    """A linear map without bias (it commutes with q), initialised N(0, 4 / in_features).

    With torch's default (the authors') initialisation each product Gamma x (.) phi(.) shrinks the features
    about fivefold. After 4 layers the output barely depends on the input weights (1e-5 at d 128). Twice the
    unit-variance scale keeps their size through the layers.
    """
    linear = nn.Linear(in_features, out_features, bias=False)
    nn.init.normal_(linear.weight, std=2.0 / in_features ** 0.5)
    return linear


def canonicalise_scale(x: torch.Tensor) -> torch.Tensor:
    """x / ||x|| over the last axis, exactly invariant to x -> q x (q > 0); 0 where x is 0.

    It divides by the largest |entry| first, so denormal x keeps its direction; its squares would underflow
    to 0. No eps is added. The authors' x / (||x|| + 1e-10) is not exactly invariant where ||x|| is small.
    """
    peak = x.abs().amax(dim=-1, keepdim=True)
    unit = x / torch.where(peak > 0, peak, torch.ones_like(peak))  # largest entry +-1, or all 0
    return unit / torch.linalg.vector_norm(unit, dim=-1, keepdim=True).clamp_min(1.0)  # the norm is >= 1 or 0


class Invariant(nn.Module):
    """x (M, d_in) -> canon(x) or symm(x) (M, d_in), then phi (M, d_out) when `out_features` is given."""

    def __init__(self, in_features: int, hidden: int, mode: str, out_features: int | None = None):
        super().__init__()
        self.mode = mode
        self.rho = mlp(in_features, hidden, in_features) if mode == "sign" else None
        self.phi = mlp(in_features, hidden, out_features) if out_features is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        invariant = canonicalise_scale(x) if self.mode == "scale" else self.rho(x) + self.rho(-x)
        return self.phi(invariant) if self.phi is not None else invariant


class Equivariant(nn.Module):
    """ScaleEq on hidden neurons, a plain MLP (`io_mlp`) or Gamma x (.) MLP(x) on input/output ones.

    With `io_only` the hidden branch is left out and hidden rows are 0. That is for the last layer, whose
    hidden neurons nothing reads: their parameters would get no gradient.
    """

    def __init__(self, in_features: int, out_features: int, mode: str, io_mlp: bool, io_only: bool = False):
        super().__init__()
        self.gamma = gamma(in_features, out_features) if not (io_only and io_mlp) else None
        self.invariant = Invariant(in_features, out_features, mode, out_features) if not io_only else None
        self.io = mlp(in_features, out_features, out_features)
        self.io_mlp = io_mlp

    def forward(self, x: torch.Tensor, hidden: torch.Tensor) -> torch.Tensor:
        """x (M, d_in), hidden (M,) bool -> (M, d_out); each branch runs on its own rows only."""
        io_rows = x[~hidden]
        io = self.io(io_rows) if self.io_mlp else self.gamma(io_rows) * self.io(io_rows)
        out = io.new_zeros(x.shape[0], io.shape[-1]).index_put((~hidden,), io)
        if self.invariant is not None:
            rows = x[hidden]
            out = out.index_put((hidden,), self.gamma(rows) * self.invariant(rows))
        return out


class EdgeUpdate(nn.Module):
    """e_ij' = Gamma e_ij (.) MLP([Inv(h_j), Inv(h_i)]) (scale, sign); MLP([e_ij, h_j, h_i]) (permutation)."""

    def __init__(self, channels: int, mode: str):
        super().__init__()
        self.mode = mode
        if mode == "permutation":
            self.phi = mlp(3 * channels, channels, channels)
        else:
            self.gamma = gamma(channels, channels)
            self.invariant = Invariant(channels, channels, mode)
            self.phi = mlp(2 * channels, channels, channels)

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor) -> torch.Tensor:
        if self.mode == "permutation":  # phi([e_ij, h_j, h_i]), its first map split by block
            first = edge_and_node_linear(self.phi[0], edge_attr, (x, edge_index[0]), (x, edge_index[1]))
            return self.phi[1:](first)
        invariant = self.invariant(x)  # (N, d): per node, then gathered per edge
        both = torch.cat([invariant[edge_index[0]], invariant[edge_index[1]]], dim=-1)  # (E, 2 d)
        return self.gamma(edge_attr) * self.phi(both)


class ScaleGMNConv(MessagePassing):
    """One forward ScaleGMN layer (GMN's in mode "permutation"): messages summed at each target."""

    def __init__(self, channels: int, mode: str, io_mlp: bool, last: bool):
        super().__init__(aggr="add", node_dim=0)
        if mode not in MODES:
            raise ValueError(f"ScaleGMN's mode must be one of {MODES}, got {mode!r}")
        self.mode = mode
        if mode == "permutation":
            self.message_fn = mlp(2 * channels, channels, channels)
            self.update_fn = mlp(2 * channels, channels, channels)
        else:
            self.gamma_x = gamma(channels, channels)
            self.gamma_e = gamma(channels, channels)
            self.message_fn = Equivariant(channels, channels, mode, io_mlp, io_only=last)
            self.update_fn = Equivariant(2 * channels, channels, mode, io_mlp, io_only=last)
        self.edge_update_fn = EdgeUpdate(channels, mode) if not last else None

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor,
                hidden: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (N, d), edge_attr (E, d), hidden (N,) bool -> new x (N, d) and edge_attr (E, d)."""
        if self.mode == "permutation":  # MLP([e_ij, h_j]): h_j's block of its first map once per node
            sent = F.linear(x, self.message_fn[0].weight[:, edge_attr.shape[-1]:])
        else:
            sent = self.gamma_x(x)  # Gamma_x per node, gathered per edge
        aggregated = self.propagate(edge_index, x=sent, edge_attr=edge_attr, hidden=hidden)  # (N, d)
        both = torch.cat([x, aggregated], dim=-1)
        new_x = self.update_fn(both) if self.mode == "permutation" else self.update_fn(both, hidden)
        new_edges = edge_attr if self.edge_update_fn is None else self.edge_update_fn(x, edge_index, edge_attr)
        return new_x, new_edges

    def message(self, x_j: torch.Tensor, edge_attr: torch.Tensor, hidden_i: torch.Tensor) -> torch.Tensor:
        if self.mode == "permutation":  # x_j: h_j through its block already (`forward`)
            first = self.message_fn[0]
            return self.message_fn[1:](F.linear(edge_attr, first.weight[:, :edge_attr.shape[-1]], first.bias) + x_j)
        return self.message_fn(self.gamma_e(edge_attr) * x_j, hidden_i)  # (E, d), scales with q_i
