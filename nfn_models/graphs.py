"""The neural graph of a feedforward checkpoint, batched for a population without a Python loop.

Kofinas et al., "Graph Neural Networks for Learning Equivariant Representations of Neural Networks" (ICLR
2024), Sec. 3. A network is a graph whose nodes are its neurons and whose edges are its weights. Take the
unit axes i of `nfn_models.features.NetworkDescription` (0: the inputs, L: the outputs). Each axis has one
node per unit. Layer i's weight W[o, j] is the edge from node j of axis i to node o of axis i + 1. The bias
b[o] is node o's feature. The input nodes have no bias and get 0.

A convolution's kernel W[o, j, :, :] is its edge's feature vector, flattened row-major (kh * kw). Kernels of
different sizes are zero-padded to the largest height and width, centred. This is the authors'
`pad_and_flatten_kernel`, except that we pad the height by the height's difference and the width by the
width's. Theirs pads the width by the height's, which is the same for their zoos' square kernels. A dense
layer is a 1 x 1 kernel (their `linear_as_conv` layout). The Small CNN's global average pooling makes the
last convolution's channels the dense layer's inputs. So it needs no extra nodes (their `flattening_method:
null`).

The graph is the same for every member of one architecture. So a population of B members is one disjoint
`torch_geometric.data.Batch`, built by offsetting a single `edge_index` (no loop over members). Node n of
member b is node b * N + n, and edge e of member b is edge b * E + e.

Positional features (Sec. 3, "node and edge features"). The hidden neurons of one layer are interchangeable
(the permutation symmetry); the input and output neurons are not. `node_position` says which learned
embedding a node gets, as the authors' `pos_embed_layout` does. Input neuron k gets k. Every neuron of
hidden axis l gets n_0 + l - 1. Output neuron k gets n_0 + L - 1 + k. `num_positions` counts them all. A
model adds the embeddings; the graph carries only the indices.

With `reverse_edges` (the authors' `rev_edge_features`, their INR setting) every edge is also present
reversed. An edge's feature is then [w(u -> v), w(v -> u), w(u -> v) + w(v -> u)]. A forward edge carries
[w, 0, w], its reverse [0, w, w].

Transformer members have their own layout, with the same interface (`nfn_models.transformer_graph`).
"""

from __future__ import annotations

import dataclasses
import functools

import torch
import torch.nn.functional as F

from nfn_models.features import NetworkDescription
from zoo.weightspace import WeightBatch, WeightSpace


@dataclasses.dataclass(frozen=True)
class NeuralGraphLayout:
    """Where each unit and weight of an architecture sits in its neural graph (one member)."""

    description: NetworkDescription
    reverse_edges: bool = False

    @property
    def node_offsets(self) -> tuple[int, ...]:
        """The first node of each unit axis, and the node count last."""
        offsets = [0]
        for size in self.description.unit_sizes:
            offsets.append(offsets[-1] + size)
        return tuple(offsets)

    @property
    def num_nodes(self) -> int:
        return self.node_offsets[-1]

    @property
    def num_forward_edges(self) -> int:
        return sum(layer.n_out * layer.n_in for layer in self.description.layers)

    @property
    def num_edges(self) -> int:
        return self.num_forward_edges * (2 if self.reverse_edges else 1)

    @property
    def kernel_size(self) -> tuple[int, int]:
        """The largest kernel height and width over the layers (1 x 1 for dense layers)."""
        kernels = [layer.kernel or (1, 1) for layer in self.description.layers]
        return max(k[0] for k in kernels), max(k[1] for k in kernels)

    @property
    def edge_features(self) -> int:
        """Entries of an edge's feature vector: kh * kw, times 3 with reverse edges."""
        return self.kernel_size[0] * self.kernel_size[1] * (3 if self.reverse_edges else 1)

    @property
    def num_positions(self) -> int:
        """Distinct positional embeddings: one per input neuron, per hidden axis, per output neuron."""
        sizes = self.description.unit_sizes
        return sizes[0] + len(sizes) - 2 + sizes[-1]

    @property
    def output_nodes(self) -> torch.Tensor:
        """The nodes of the output axis (an invariant readout reads these), in order."""
        return torch.arange(self.node_offsets[-2], self.node_offsets[-1])

    @functools.cached_property
    def edge_index(self) -> torch.Tensor:
        """(2, E) source and target nodes; forward edges layer by layer, W[o, j] at o * n_in + j."""
        offsets, parts = self.node_offsets, []
        for i, layer in enumerate(self.description.layers):
            outputs = torch.arange(layer.n_out).repeat_interleave(layer.n_in) + offsets[i + 1]  # (o * n_in,)
            inputs = torch.arange(layer.n_in).repeat(layer.n_out) + offsets[i]
            parts.append(torch.stack([inputs, outputs]))
        forward = torch.cat(parts, dim=1)
        return torch.cat([forward, forward.flip(0)], dim=1) if self.reverse_edges else forward

    @functools.cached_property
    def edge_layer(self) -> torch.Tensor:
        """(E,) the layer each edge's weight belongs to (a model may project dense and conv edges apart)."""
        forward = torch.cat([torch.full((layer.n_out * layer.n_in,), i, dtype=torch.long)
                             for i, layer in enumerate(self.description.layers)])
        return forward.repeat(2) if self.reverse_edges else forward

    @functools.cached_property
    def node_position(self) -> torch.Tensor:
        """(N,) each node's positional-embedding index (see the module docstring)."""
        sizes = self.description.unit_sizes
        hidden = [torch.full((size,), sizes[0] + axis - 1, dtype=torch.long)
                  for axis, size in enumerate(sizes[1:-1], start=1)]
        outputs = torch.arange(sizes[-1]) + sizes[0] + len(sizes) - 2
        return torch.cat([torch.arange(sizes[0]), *hidden, outputs])

    @functools.cached_property
    def in_degree_histogram(self) -> torch.Tensor:
        """counts[d]: nodes with d incoming edges (the same for every member; PNA's `deg`)."""
        degrees = torch.bincount(self.edge_index[1], minlength=self.num_nodes)
        return torch.bincount(degrees)

    @property
    def num_inputs(self) -> int:
        """The input neurons: the first nodes, positions 0 .. num_inputs - 1."""
        return self.description.unit_sizes[0]

    @property
    def num_outputs(self) -> int:
        return self.description.unit_sizes[-1]

    @property
    def num_edge_layers(self) -> int:
        return len(self.description.layers)

    @property
    def dense_edge_layers(self) -> tuple[int, ...]:
        """The layers (`edge_layer` values) whose weights are dense, not convolutions."""
        return tuple(i for i, layer in enumerate(self.description.layers) if not layer.kernel)

    @staticmethod
    def pad_kernel(weight: torch.Tensor, kernel_size: tuple[int, int]) -> torch.Tensor:
        """(B, o, i, *kernel) -> (B, o * i, kh * kw): centred zero padding to `kernel_size`, flattened."""
        batch, n_out, n_in = weight.shape[:3]
        if weight.ndim not in (3, 5):
            raise ValueError(f"a neural graph reads dense and 2-d convolution weights; got shape {tuple(weight.shape)}")
        kernel = weight.reshape(batch, n_out, n_in, 1, 1) if weight.ndim == 3 else weight
        height, width = kernel_size
        dh, dw = height - kernel.shape[3], width - kernel.shape[4]
        kernel = F.pad(kernel, (dw // 2, dw - dw // 2, dh // 2, dh - dh // 2))  # F.pad: last dim first
        return kernel.reshape(batch, n_out * n_in, height * width)

    @staticmethod
    def centre_entry(kernel_size: tuple[int, int]) -> int:
        """Where `pad_kernel` puts a 1 x 1 kernel in the flattened kh * kw vector. For an even size that is
        above and left of the middle: the padding's smaller half goes first."""
        height, width = kernel_size
        return ((height - 1) // 2) * width + (width - 1) // 2

    @staticmethod
    def crop_kernel(block: torch.Tensor, n_out: int, n_in: int, kernel_size: tuple[int, int],
                    kernel: tuple[int, int] | None) -> torch.Tensor:
        """The inverse of `pad_kernel`: (B, o * i, kh * kw) -> (B, o, i, *kernel), or (B, o, i) for a dense map."""
        height, width = kernel_size
        kh, kw = kernel or (1, 1)
        top, left = (height - kh) // 2, (width - kw) // 2
        cropped = block.reshape(-1, n_out, n_in, height, width)[..., top:top + kh, left:left + kw]
        return cropped if kernel else cropped.reshape(-1, n_out, n_in)

    def padded_kernel(self, weight: torch.Tensor) -> torch.Tensor:
        """(B, o, i, *kernel) -> (B, o * i, kh * kw): centred zero padding to `kernel_size`, flattened."""
        return self.pad_kernel(weight, self.kernel_size)

    def features(self, weights: WeightBatch) -> tuple[torch.Tensor, torch.Tensor]:
        """Node features (B, N, 1) (biases; 0 on inputs) and edge features (B, E, `edge_features`)."""
        tensors = dict(zip(weights.space.names, weights.tensors))
        layers = self.description.layers
        first = tensors[layers[0].bias_name]
        inputs = first.new_zeros(len(weights), self.description.unit_sizes[0])
        nodes = torch.cat([inputs, *(tensors[layer.bias_name] for layer in layers)], dim=1).unsqueeze(-1)
        edges = torch.cat([self.padded_kernel(tensors[layer.weight_name]) for layer in layers], dim=1)  # (B, E_f, f)
        return nodes, (reverse_edge_features(edges) if self.reverse_edges else edges)

    def to_weights(self, space: WeightSpace, nodes: torch.Tensor, edges: torch.Tensor) -> WeightBatch:
        """The inverse of `features`: per-node values (B, N) and per-edge kernel vectors (B, E_f, kh * kw)
        -> `WeightBatch`.

        The result is a `WeightBatch` of `space`. Biases come from the non-input nodes. Each weight comes
        from its forward edge, with the centred padding cropped. An equivariant model's node and edge
        outputs become a weight-space output this way (Kofinas et al. 2024, Sec. 5.3's INR editing).
        """
        offsets, tensors, start = self.node_offsets, {}, 0
        for i, layer in enumerate(self.description.layers):
            tensors[layer.bias_name] = nodes[:, offsets[i + 1]:offsets[i + 2]]
            count = layer.n_out * layer.n_in
            tensors[layer.weight_name] = self.crop_kernel(edges[:, start:start + count], layer.n_out, layer.n_in,
                                                          self.kernel_size, layer.kernel)
            start += count
        return WeightBatch(space, tuple(tensors[name].contiguous() for name in space.names))

    def batch(self, weights: WeightBatch):
        """The members' neural graphs as one disjoint `torch_geometric` batch (`batch_graphs`)."""
        return batch_graphs(self, weights)


def reverse_edge_features(edges: torch.Tensor) -> torch.Tensor:
    """Forward edges' features (B, E_f, f) -> (B, 2 E_f, 3 f), in `edge_index` order. Each forward edge
    becomes [w, 0, w], then each reversed one [0, w, w] (the authors' `rev_edge_features`)."""
    zeros = torch.zeros_like(edges)
    return torch.cat([torch.cat([edges, zeros, edges], dim=-1), torch.cat([zeros, edges, edges], dim=-1)], dim=1)


def batch_graphs(layout, weights: WeightBatch):
    """A layout's graphs of a batch of members as one disjoint `torch_geometric.data.Batch`.

    There is no per-member loop: the one `edge_index` is offset by each member's first node. Attributes: x
    (B * N, 1), edge_index (2, B * E), edge_attr (B * E, f), batch (B * N,), ptr (B + 1,), node_position (B
    * N,), edge_layer (B * E,).
    """
    import nfn_models.layers.quiet_geometric  # noqa: F401  (the graph library stays out of the package import)
    from torch_geometric.data import Batch

    nodes, edges = layout.features(weights)
    members, device, count = len(weights), nodes.device, layout.num_nodes
    shift = (torch.arange(members, device=device) * count).view(members, 1, 1)
    edge_index = (layout.edge_index.to(device).unsqueeze(0) + shift).permute(1, 0, 2).reshape(2, -1)
    return Batch(x=nodes.reshape(members * count, -1), edge_index=edge_index,
                 edge_attr=edges.reshape(members * layout.num_edges, -1),
                 batch=torch.arange(members, device=device).repeat_interleave(count),
                 ptr=torch.arange(members + 1, device=device) * count,
                 node_position=layout.node_position.to(device).repeat(members),
                 edge_layer=layout.edge_layer.to(device).repeat(members))


def neural_graphs(weights: WeightBatch, reverse_edges: bool = False):
    """The neural graphs of a batch of same-architecture feedforward members (see `NeuralGraphLayout.batch`)."""
    layout = NeuralGraphLayout(NetworkDescription.from_weight_space(weights.space), reverse_edges)
    return layout.batch(weights)
