"""Relational attention over a dense graph whose edge features update the nodes and are updated in turn.

Kofinas et al., "Graph Neural Networks for Learning Equivariant Representations of Neural Networks" (ICLR
2024), Sec. 4 (NG-T), after the relational transformer of Diao & Loynd (ICLR 2023). Every ordered pair of
nodes (i, j) carries an edge feature e_ij. For a neural graph that is the weight i -> j, row = source. Pairs
without a weight carry the encoding of a zero vector. Node i attends to every node j through e_ij.

Per head h, of width d_h = d_attn / heads, the edge shifts queries and keys (no biases):

    q_ij = W_Q x_i + W_Q^e e_ij,        k_ij = W_K x_j + W_K^e e_ij.

The edge modulates the value:

    v_ij = (W_V x_j) * (W_V^m e_ij) + W_V^a e_ij.

The attention and its output are

    a_ij = softmax_j(q_ij . k_ij / sqrt(d_attn)),        attn_i = W_O [sum_j a_ij v_ij]_heads + b_O.

The nodes then pass a post-LayerNorm transformer block (GELU, dropout p, W_1 without bias):

    x_i  <- LN(x_i + dropout(lin(attn_i))),        x_i  <- LN(x_i + dropout(W_2 GELU(W_1 x_i))).

Then the edges are updated (W_3 without bias):

    e_ij <- LN(e_ij + dropout(lin_1 GELU(lin_e [e_ij, e_ji] + lin_s x_i + lin_t x_j))),
    e_ij <- LN(e_ij + dropout(W_4 GELU(W_3 e_ij))).

The edge update is skipped where nothing reads the edges afterwards (NG-T's last layer). The softmax scale
is 1 / sqrt(d_attn), the whole attention width, as in the authors' code. Vaswani et al. use the per-head
width instead. Every linear map is Xavier-uniform with zero bias (their `Linear`). Attention runs over all N
nodes, with no mask, so a layer costs O(B N^2 d) memory. That is fine for the neural graphs of the Small CNN
Zoo (59 nodes) and of SIRENs (67).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def xavier_linear(in_features: int, out_features: int, bias: bool = True) -> nn.Linear:
    """A linear map with Xavier-uniform weights and zero bias."""
    linear = nn.Linear(in_features, out_features, bias=bias)
    nn.init.xavier_uniform_(linear.weight)
    if bias:
        nn.init.zeros_(linear.bias)
    return linear


def feedforward(channels: int, hidden: int, dropout: float) -> nn.Sequential:
    """W_2 GELU(W_1 v), W_1 without bias, then dropout."""
    return nn.Sequential(xavier_linear(channels, hidden, bias=False), nn.GELU(), xavier_linear(hidden, channels),
                         nn.Dropout(dropout))


class RelationalAttention(nn.Module):
    """Multi-head attention of every node to every node, queries, keys and values shifted by e_ij."""

    def __init__(self, node_dim: int, edge_dim: int, attention_dim: int, num_heads: int):
        super().__init__()
        if attention_dim % num_heads:
            raise ValueError(f"attention_dim {attention_dim} must be a multiple of num_heads {num_heads}")
        self.num_heads, self.scale = num_heads, attention_dim ** -0.5
        self.node_qkv = xavier_linear(node_dim, 3 * attention_dim, bias=False)  # -> W_Q, W_K, W_V
        self.edge_qkv = xavier_linear(edge_dim, 4 * attention_dim, bias=False)  # -> W_Q^e, W_K^e, W_V^a, W_V^m
        self.out = xavier_linear(attention_dim, node_dim)

    def forward(self, x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """x (B, N, d), e (B, N, N, d_e) -> (B, N, d)."""
        batch, n, _ = x.shape
        q, k, v = self.node_qkv(x).view(batch, n, 3, self.num_heads, -1).unbind(2)  # (B, N, H, d_h) each
        # one map per role from row blocks of the one weight: no (B, N, N, 4 d_attn) tensor to split
        # and, backwards, to concatenate again (the largest tensors of a step)
        q_e, k_e, v_add, v_mul = (F.linear(e, block).view(batch, n, n, self.num_heads, -1)
                                  for block in self.edge_qkv.weight.chunk(4))  # (B, N, N, H, d_h) each
        query = q.unsqueeze(2) + q_e  # (B, i, j, H, d_h): x_i's query
        key = k.unsqueeze(1) + k_e  # x_j's key
        value = v.unsqueeze(1) * v_mul + v_add  # x_j's value
        weights = torch.softmax(self.scale * (query * key).sum(-1), dim=2)  # (B, i, j, H), over j
        attended = torch.einsum("bijh,bijhc->bihc", weights, value)  # (B, N, H, d_h)
        return self.out(attended.reshape(batch, n, -1))


class EdgeUpdate(nn.Module):
    """e_ij <- LN(e_ij + MLP([e_ij, e_ji], x_i, x_j)); e_ij <- LN(e_ij + FF(e_ij))."""

    def __init__(self, node_dim: int, edge_dim: int, hidden: int, dropout: float):
        super().__init__()
        self.lin_e = xavier_linear(2 * edge_dim, hidden)  # reads the edge and its reverse
        self.lin_s = xavier_linear(node_dim, hidden)  # the source node (the row)
        self.lin_t = xavier_linear(node_dim, hidden)  # the target node (the column)
        self.lin_1 = xavier_linear(hidden, edge_dim)
        self.dropout = nn.Dropout(dropout)
        self.norm0 = nn.LayerNorm(edge_dim)
        self.feedforward = feedforward(edge_dim, hidden, dropout)
        self.norm1 = nn.LayerNorm(edge_dim)

    def forward(self, x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """x (B, N, d), e (B, N, N, d_e) -> (B, N, N, d_e)."""
        # lin_e [e_ij, e_ji] as two maps, the second's output transposed: no (B, N, N, 2 d_e) copy
        forward_block, reverse_block = self.lin_e.weight.chunk(2, dim=1)
        hidden = (F.linear(e, forward_block, self.lin_e.bias) + F.linear(e, reverse_block).transpose(1, 2)
                  + self.lin_s(x).unsqueeze(2) + self.lin_t(x).unsqueeze(1))  # (B, N, N, hidden)
        e = self.norm0(e + self.dropout(self.lin_1(F.gelu(hidden))))
        return self.norm1(e + self.feedforward(e))


class RelationalTransformerLayer(nn.Module):
    """One NG-T layer: relational attention and a feedforward on nodes, then (optionally) the edge update."""

    def __init__(self, node_dim: int, edge_dim: int, attention_dim: int, node_hidden: int, edge_hidden: int,
                 num_heads: int, dropout: float = 0.0, update_edges: bool = True):
        super().__init__()
        self.attention = RelationalAttention(node_dim, edge_dim, attention_dim, num_heads)
        self.lin = xavier_linear(node_dim, node_dim)
        self.dropout = nn.Dropout(dropout)
        self.norm0 = nn.LayerNorm(node_dim)
        self.feedforward = feedforward(node_dim, node_hidden, dropout)
        self.norm1 = nn.LayerNorm(node_dim)
        self.edge_update = EdgeUpdate(node_dim, edge_dim, edge_hidden, dropout) if update_edges else None

    def forward(self, x: torch.Tensor, e: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """x (B, N, d), e (B, N, N, d_e) -> the updated (x, e)."""
        x = self.norm0(x + self.dropout(self.lin(self.attention(x, e))))
        x = self.norm1(x + self.feedforward(x))
        return x, (e if self.edge_update is None else self.edge_update(x, e))
