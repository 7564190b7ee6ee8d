"""The neural graph of a Small Transformer Zoo member: neurons as nodes, weights as edges.

Kofinas et al., "Graph Neural Networks for Learning Equivariant Representations of Neural Networks" (ICLR
2024), Sec. 3 and its appendix on other layers. Lim et al., "Graph Metanetworks for Processing Diverse
Neural Architectures" (ICLR 2024), Sec. 3, on parameter graphs of multi-head attention. An attention layer's
linear maps are layers of the graph. The query, key and value maps are edges from the model-dimension
neurons to per-head query, key and value neurons. The out-projection's edges leave the value neurons. What
the layer computes without weights is drawn as edges of a fixed weight 1. A residual connection is the
identity: an edge i -> i from a stream neuron to the same neuron after the sublayer (Kofinas et al.'s
residual edges). Here the attention product itself gets two edge sets too.

(1) q_{h,i} -> k_{h,i} for every head h and i < d_k. The score q_h . k_h pairs a head's i-th query and key
neurons.

(2) k_{h,i} -> v_{h,j} for all i < d_k, j < d_v. Head h's softmax of its scores weighs its values.

Neither paper fixes these two edge sets in code we could read. Neural Graphs' code builds MLP and CNN graphs
only. So they are our choice, made so that the graph's node relabellings are exactly the members' neuron
relabellings (`zoo.symmetry.attention` with `permutations_only`). Heads move with their query, key and value
neurons. A head's query and key neurons move together, its value neurons apart. The MLP units move freely,
and so do the attention's output features without residuals.

Nodes, in order:

(1) The patch embedding's input channels (image members). Word-embedding members read frozen vectors, so
their first stream has no inputs.

(2) The first stream: d_model neurons, the conv's output channels, with biases as features.

(3) Per block: query, key and value neurons (heads stacked), the attention's outputs, the MLP units (fc1's
biases) and the block's outputs (fc2's biases).

(4) The classifier's hidden units and its outputs.

Positional embeddings: a neuron that no symmetry moves gets its own. These are the inputs and the outputs.
So is every stream that the positional encoding, a residual sum or the block-output interface fixes. Each
group the relabellings permute shares one. These groups are a block's query, key and value neurons and MLP
units. So are the attention outputs without residuals, and the classifier's hidden units. The block outputs
get their own positions although they could be permuted (`permute_block_outputs`). That symmetry is outside
the claimed group.

Edge features are kernel vectors as in `nfn_models.graphs`. The patch embedding's are p x p kernels. Every
other weight, and the fixed edges' 1, sits at the centre of a p x p zero vector.
"""

from __future__ import annotations

import dataclasses
import functools
import re

import torch

from nfn_models.graphs import NeuralGraphLayout, batch_graphs, reverse_edge_features
from zoo.weightspace import WeightBatch, WeightSpace

_QUERIES = re.compile(r"^encoder\.(\d+)\.attention\.queries\.weight$")


@dataclasses.dataclass(frozen=True)
class TransformerGraphFields:
    """The config fields a graph model needs on transformer members: what their shapes do not show. The
    harness fills them from the zoo (`ARCHITECTURE_FIELDS`)."""
    num_heads: int = 2  # the members' attention heads
    residual: bool = False  # whether the members have residual connections (the released zoo: no)
    # The readout also reads the mean of every node's final features: a transformer's graph is
    # deeper (2 node layers per sublayer) than the 4 message-passing layers reach from its outputs,
    # whose features alone would not see the attention at all. Read on transformer members only.
    pool_nodes: bool = True


TRANSFORMER_ARCHITECTURE_FIELDS = ("num_heads", "residual")


@dataclasses.dataclass(frozen=True)
class Connection:
    """One weight tensor of the member as a block of edges from `n_in` source to `n_out` target nodes."""
    weight_name: str
    bias_name: str | None
    source: int  # first source node
    target: int  # first target node
    n_out: int
    n_in: int
    kernel: tuple[int, int] | None  # a convolution's (kh, kw); None for a dense map


@dataclasses.dataclass(frozen=True)
class GraphPlan:
    """The graph of one architecture: its weights' edge blocks, the fixed edges and the nodes' positions."""
    connections: tuple[Connection, ...]  # in weight-space order
    fixed_edges: tuple[torch.Tensor, ...]  # (2, e) source and target nodes each, weight 1
    node_position: torch.Tensor  # (N,)
    num_positions: int
    first_output: int  # the first output neuron's node


@dataclasses.dataclass(frozen=True)
class TransformerGraphLayout:
    """Where each neuron and weight of a transformer member sits in its neural graph (module docstring)."""

    space: WeightSpace
    num_heads: int
    residual: bool = False
    reverse_edges: bool = False

    def __post_init__(self) -> None:
        shapes = dict(zip(self.space.names, (t.shape for t in self.space.tensors)))
        missing = [name for b in range(self.num_blocks) for name in self._block_names(b).values()
                   if name not in shapes] + [n for n in ("classifier.fc1.weight", "classifier.fc2.weight")
                                             if n not in shapes]
        if self.num_blocks == 0 or missing:
            raise ValueError(f"not a transformer member's weight space: missing {missing or 'encoder blocks'}")
        inner = shapes[self._block_names(0)["queries"]][0]
        if inner % self.num_heads or shapes[self._block_names(0)["values"]][0] % self.num_heads:
            raise ValueError(f"num_heads {self.num_heads} does not divide the members' query width {inner}; "
                             "set num_heads to the zoo's architecture")

    @functools.cached_property
    def num_blocks(self) -> int:
        return sum(1 for name in self.space.names if _QUERIES.match(name))

    @staticmethod
    def _block_names(block: int) -> dict[str, str]:
        prefix = f"encoder.{block}."
        return {"queries": f"{prefix}attention.queries.weight", "keys": f"{prefix}attention.keys.weight",
                "values": f"{prefix}attention.values.weight", "out": f"{prefix}attention.out_projection.weight",
                "fc1": f"{prefix}fc1.weight", "fc2": f"{prefix}fc2.weight"}

    @functools.cached_property
    def _plan(self) -> GraphPlan:
        shapes = dict(zip(self.space.names, (tuple(t.shape) for t in self.space.tensors)))
        connections: dict[str, Connection] = {}
        fixed: list[torch.Tensor] = []
        positions: list[torch.Tensor] = []
        count = 0

        def group(size: int, shared: bool) -> int:
            """Appends `size` nodes, one position each or one shared; returns the group's first node."""
            nonlocal count
            first = sum(len(p) for p in positions)
            positions.append(torch.full((size,), count) if shared else torch.arange(count, count + size))
            count += 1 if shared else size
            return first

        def connect(weight: str, source: int, target: int, bias: str | None = None) -> None:
            shape = shapes[weight]
            connections[weight] = Connection(weight, bias if bias in shapes else None, source, target, shape[0],
                                             shape[1], tuple(shape[2:]) if len(shape) == 4 else None)

        def identity(source: int, target: int, size: int) -> None:
            fixed.append(torch.stack([torch.arange(size) + source, torch.arange(size) + target]))

        d_model = shapes[self._block_names(0)["queries"]][1]
        conv = next((n for n in self.space.names if n.startswith("embedding.") and len(shapes[n]) == 4), None)
        if conv is not None:
            inputs = group(shapes[conv][1], shared=False)
            stream = group(d_model, shared=False)
            connect(conv, inputs, stream, conv[:-len("weight")] + "bias")
        else:  # word embeddings: frozen vectors enter the first stream
            stream = group(d_model, shared=False)
        for b in range(self.num_blocks):
            names = self._block_names(b)
            inner_k, inner_v = shapes[names["queries"]][0], shapes[names["values"]][0]
            d_k, d_v = inner_k // self.num_heads, inner_v // self.num_heads
            queries, keys, values = group(inner_k, True), group(inner_k, True), group(inner_v, True)
            attended = group(d_model, shared=not self.residual)
            for key, first in (("queries", queries), ("keys", keys), ("values", values)):
                connect(names[key], stream, first)
            connect(names["out"], values, attended)
            identity(queries, keys, inner_k)  # the score pairs q_{h,i} with k_{h,i}
            heads = torch.arange(self.num_heads)
            k_nodes = (heads.view(-1, 1, 1) * d_k + torch.arange(d_k).view(1, -1, 1)).expand(-1, -1, d_v)
            v_nodes = (heads.view(-1, 1, 1) * d_v + torch.arange(d_v).view(1, 1, -1)).expand(-1, d_k, -1)
            fixed.append(torch.stack([k_nodes.reshape(-1) + keys, v_nodes.reshape(-1) + values]))
            if self.residual:
                identity(stream, attended, d_model)
            units = group(shapes[names["fc1"]][0], shared=True)
            outputs = group(d_model, shared=False)
            connect(names["fc1"], attended, units, f"encoder.{b}.fc1.bias")
            connect(names["fc2"], units, outputs, f"encoder.{b}.fc2.bias")
            if self.residual:
                identity(attended, outputs, d_model)
            stream = outputs
        hidden = group(shapes["classifier.fc1.weight"][0], shared=True)
        connect("classifier.fc1.weight", stream, hidden, "classifier.fc1.bias")
        last = group(shapes["classifier.fc2.weight"][0], shared=False)
        connect("classifier.fc2.weight", hidden, last, "classifier.fc2.bias")
        unread = [n for n in self.space.names if n not in connections
                  and n not in {c.bias_name for c in connections.values()}]
        if unread:
            raise ValueError(f"the transformer graph has no place for the tensors {unread}")
        ordered = tuple(connections[n] for n in self.space.names if n in connections)
        return GraphPlan(ordered, tuple(fixed), torch.cat(positions), count, last)

    @property
    def connections(self) -> tuple[Connection, ...]:
        return self._plan.connections

    @property
    def num_nodes(self) -> int:
        return len(self._plan.node_position)

    @property
    def num_positions(self) -> int:
        return self._plan.num_positions

    @property
    def node_position(self) -> torch.Tensor:
        return self._plan.node_position

    @property
    def num_inputs(self) -> int:
        """The patch embedding's input channels (the first nodes); 0 for word-embedding members."""
        first = self.connections[0]
        return first.n_in if first.kernel else 0

    @property
    def num_outputs(self) -> int:
        return self.num_nodes - self._plan.first_output

    @property
    def output_nodes(self) -> torch.Tensor:
        return torch.arange(self._plan.first_output, self.num_nodes)

    @property
    def num_weight_edges(self) -> int:
        return sum(c.n_out * c.n_in for c in self.connections)

    @property
    def num_forward_edges(self) -> int:
        """The weights' edges, then the fixed-weight ones."""
        return self.num_weight_edges + sum(block.shape[1] for block in self._plan.fixed_edges)

    @property
    def num_edges(self) -> int:
        return self.num_forward_edges * (2 if self.reverse_edges else 1)

    @property
    def kernel_size(self) -> tuple[int, int]:
        kernels = [c.kernel for c in self.connections if c.kernel]
        return (max(k[0] for k in kernels), max(k[1] for k in kernels)) if kernels else (1, 1)

    @property
    def edge_features(self) -> int:
        return self.kernel_size[0] * self.kernel_size[1] * (3 if self.reverse_edges else 1)

    @property
    def dense_edge_layers(self) -> tuple[int, ...]:
        """The edge layers holding dense weights (every one but a convolution; the fixed edges are the last)."""
        return tuple(i for i, c in enumerate(self.connections) if not c.kernel) + (len(self.connections),)

    @property
    def num_edge_layers(self) -> int:
        return len(self.connections) + 1

    @functools.cached_property
    def edge_index(self) -> torch.Tensor:
        """(2, E): each weight's edges (W[o, j] at o * n_in + j), then the fixed ones, then reversed if asked."""
        parts = [torch.stack([torch.arange(c.n_in).repeat(c.n_out) + c.source,
                              torch.arange(c.n_out).repeat_interleave(c.n_in) + c.target]) for c in self.connections]
        forward = torch.cat(parts + list(self._plan.fixed_edges), dim=1)
        return torch.cat([forward, forward.flip(0)], dim=1) if self.reverse_edges else forward

    @functools.cached_property
    def edge_layer(self) -> torch.Tensor:
        sizes = [c.n_out * c.n_in for c in self.connections] + [self.num_forward_edges - self.num_weight_edges]
        forward = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
        return forward.repeat(2) if self.reverse_edges else forward

    @functools.cached_property
    def in_degree_histogram(self) -> torch.Tensor:
        return torch.bincount(torch.bincount(self.edge_index[1], minlength=self.num_nodes))

    def features(self, weights: WeightBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Node features (B, N, 1) (biases; 0 where a neuron has none) and edge features (B, E, f)."""
        tensors = dict(zip(weights.space.names, weights.tensors))
        first = weights.tensors[0]
        nodes = first.new_zeros(len(weights), self.num_nodes)
        for c in self.connections:
            if c.bias_name is not None:
                nodes[:, c.target:c.target + c.n_out] = tensors[c.bias_name]
        height, width = self.kernel_size
        ones = first.new_zeros(len(weights), self.num_forward_edges - self.num_weight_edges, height * width)
        ones[..., NeuralGraphLayout.centre_entry(self.kernel_size)] = 1.0
        weights_on_edges = [NeuralGraphLayout.pad_kernel(tensors[c.weight_name], self.kernel_size)
                            for c in self.connections]
        edges = torch.cat(weights_on_edges + [ones], dim=1)
        return nodes.unsqueeze(-1), (reverse_edge_features(edges) if self.reverse_edges else edges)

    def to_weights(self, space: WeightSpace, nodes: torch.Tensor, edges: torch.Tensor) -> WeightBatch:
        """One value per node (B, N) and a kernel vector per forward edge (B, >= E_w, kh * kw) ->
        `WeightBatch`.

        The result is a `WeightBatch` of `space`. Each weight comes from its edges and each bias from its
        neurons. The fixed edges' values are dropped.
        """
        tensors, start = {}, 0
        for c in self.connections:
            count = c.n_out * c.n_in
            tensors[c.weight_name] = NeuralGraphLayout.crop_kernel(edges[:, start:start + count], c.n_out, c.n_in,
                                                                   self.kernel_size, c.kernel)
            start += count
            if c.bias_name is not None:
                tensors[c.bias_name] = nodes[:, c.target:c.target + c.n_out]
        return WeightBatch(space, tuple(tensors[name].contiguous() for name in space.names))

    def batch(self, weights: WeightBatch):
        """The members' graphs as one disjoint `torch_geometric` batch (`nfn_models.graphs.batch_graphs`)."""
        return batch_graphs(self, weights)


def graph_layout(weight_space: WeightSpace, reverse_edges: bool = False, num_heads: int = 2,
                 residual: bool = False) -> NeuralGraphLayout | TransformerGraphLayout:
    """The neural-graph layout of a member: layered for CNNs and MLPs/SIRENs, the attention graph for transformers."""
    from nfn_models.attention_space import is_attention_space
    from nfn_models.features import NetworkDescription

    if is_attention_space(weight_space):
        return TransformerGraphLayout(weight_space, num_heads, residual, reverse_edges)
    return NeuralGraphLayout(NetworkDescription.from_weight_space(weight_space), reverse_edges)
