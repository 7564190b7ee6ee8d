"""ScaleGMN: a graph metanetwork on the neural graph, invariant to permutations and to scalings or sign flips.

Kalogeropoulos, Bouritsas and Panagakis, "Scale Equivariant Graph Metanetworks" (NeurIPS 2024; arXiv
2406.10685). We cite its section numbers from memory; they are not re-checked against the text.

Sec. 4: a network keeps its function when hidden neuron i of layer l is scaled by q. That means W_l[i, :] and
b_l[i] times q, and W_{l+1}[:, i] divided by q. The activation decides which q are allowed: q > 0 for ReLU, q =
+-1 for tanh and sine.

Sec. 5 (ScaleGMN), the forward variant, runs on the neural graph of `nfn_models.graphs`. Neurons are nodes,
biases are node features, weights and flattened kernels are edge features. Input neurons are set to 1, as in the
authors' graphs. The model has three steps:

1. Initial features. Each bias and kernel vector goes through a linear map without bias, which commutes with q.
   Positional embeddings multiply the hidden neurons' features, so q passes through. They are added to the input
   and output neurons' features, which no symmetry moves. With `edge_positions` (the authors' INR configs) edge
   embeddings are multiplied in too.

2. `num_layers` ScaleGMN layers (`nfn_models.layers.scalegmn`). Each has the scale-equivariant message, update
   and edge update: Sec. 5's ScaleEq = Gamma x (.) ScaleInv(x). Optional linear skips and dropout follow each
   layer.

3. The readout. The output neurons' features are concatenated in order, then go through an MLP (the authors'
   `readout_range: last_layer`).

With `output="weights"` (their `ScaleGMN_equiv`, the INR editing model) every layer updates hidden neurons and
edges. Then linear maps without bias give each neuron's bias and each forward edge's weight. Hidden features
scale with q_i and edge features with q_i / q_j, as the weights do. So the delta is equivariant. In mode "scale"
the layers read canonicalised members (below), whose delta ignores the scaling. `from_canonical_scale` puts it
back at each member's scale, which makes it equivariant. A test leaves that step out as the control. Theirs ends
in a layer of width 1; ours ends in d-wide layers, then the maps.

`mode` picks the group; every mode is also invariant to hidden-neuron permutations. Mode "scale" uses x / ||x||
canonicalisation: exactly invariant to positive per-neuron scalings (ReLU networks). Mode "sign" uses rho(x) +
rho(-x) symmetrisation: exactly invariant to sign flips (tanh and SIREN networks). Mode "permutation" is GMN
(Lim et al., ICLR 2024), with plain MLPs and additive positional embeddings.

The claim does not depend on the members' activation. A "scale" model is invariant to positive scalings of any
member, though they keep the function of ReLU members only. So pick the mode that matches the zoo. The presets
follow the authors: `generalization` is "scale", for ReLU CNN zoos. `inr-classification` is "sign", for SIRENs.
Set `mode: sign` on a tanh zoo.

There is no input normalisation. Dividing the weights by dataset statistics (their `normalize` option) breaks
scale equivariance (the authors' issue #4). Instead, mode "scale" first brings the members
to a canonical scale (`canonical_scale`). Layer by layer, each hidden neuron's incoming weights and bias are
divided by their norm. The norm moves onto its outgoing weights. Entries below 1e-30 of their neuron's scale are
set to 0. In exact arithmetic this changes nothing, since ScaleGMN is scale invariant. In float32 it keeps the
claim exact on members with denormal weights. There the scaling itself rounds a denormal bias to 0. The edge
update's x / ||x|| of that neuron's only feature then moves the output by 1e-3. A test shows this as a negative
control.

We checked this module once against the authors' code (jkalogero/scalegmn, `src/scalegmn/`, MIT). Their
`ScaleGMN` and ours, with every parameter copied across, agree to 1e-13 or better in float64. That covers each
mode on SIRENs and Small CNNs; docs/models.md lists the figures. A copy with one weight moved disagrees. Where
ours differs from theirs:

(1) The scale canonicalisation x / ||x|| has no eps (theirs adds 1e-10 to the norm). It divides by max |x|
first, so denormal features keep their direction. This gives exact invariance.

(2) In mode "scale" the members are canonicalised first (above).

(3) The linear maps Gamma (no bias) start at N(0, 4 / fan-in), not torch's default. With the default, on the
CIFAR-10 config at d 128, the features shrink about fivefold a layer. The input then barely reaches the readout:
two random members' outputs differ by 4e-5.

(4) The last layer's hidden-neuron branches are left out. Only the output neurons are read after it, so theirs
get no gradient.

(5) Edge positions of the last layer go by output neuron, in our edge order. Their `get_edge_types` lists that
layer's types target-major, but their `edge_index` is source-major. With more than one output neuron their types
go to other edges. Their configs with edge positions have one output neuron, where both agree.

(6) Input and output neurons share one MLP (their `num_mlps: 2`). We do not build their `num_mlps: 3` or
`readout_range: full_graph` (a DeepSets readout over hidden neurons). Nor do we build the bidirectional variant,
the `hetero` mode, `sign_symmetrization: False` or their `update_as_act` sine update.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from nfn_models.features import NetworkDescription
from nfn_models.registry import check_weight_space, register_model, weight_space_kind
from nfn_models.stack import check_output
from nfn_models.transformer_graph import TRANSFORMER_ARCHITECTURE_FIELDS, TransformerGraphFields, graph_layout
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightBatch, WeightSpace

FLOOR = 1e-30  # canonical entries below this are 0: far below float32's normal range's relative precision
MODES = ("permutation", "scale", "sign")  # as `nfn_models.layers.scalegmn.MODES` (which imports torch_geometric)


@dataclasses.dataclass(frozen=True)
class ScaleGMNConfig(TransformerGraphFields):
    mode: str = "scale"  # the group: "scale" (ReLU zoos), "sign" (tanh, SIREN zoos), "permutation" (GMN)
    hidden_dim: int = 128  # d_hid of nodes and edges (the authors' CIFAR-10-GS and MNIST INR configs)
    num_layers: int = 4  # message-passing layers (every config of theirs)
    io_mlp: bool = True  # input/output neurons get a plain MLP (their mlp_on_io: CNN configs on, INR off)
    skip_connections: bool = False  # a linear skip around each layer (their gnn_skip_connections: INR on)
    edge_positions: bool = False  # positional embeddings on the edges too (their edge_pos_embed: INR on)
    dropout: float = 0.0  # after each layer: 0 on CNNs, 0.2 on INRs
    out_features: int = 1  # one scalar per checkpoint for regression (10 classes for INR classification)
    output: str = "invariant"  # "weights": each node's and edge's final features -> a weight delta (INR editing)

    def validate(self, where: str, key: str) -> None:
        prefix = f"{key}." if key else ""
        check_output(where, key, self.output)
        if self.mode not in MODES:
            raise SchemaError(where, f"{prefix}mode", f"expected one of {list(MODES)}, got {self.mode!r}")
        for name in ("hidden_dim", "num_layers", "out_features"):
            if getattr(self, name) < 1:
                raise SchemaError(where, f"{prefix}{name}", f"expected a positive integer, got {getattr(self, name)}")
        if not 0.0 <= self.dropout < 1.0:
            raise SchemaError(where, f"{prefix}dropout", f"expected a probability in [0, 1), got {self.dropout}")


def edge_positions(description: NetworkDescription) -> torch.Tensor:
    """(E,) each forward edge's positional-embedding index, in `NeuralGraphLayout.edge_index` order. A
    first-layer edge goes by its input neuron, and a last-layer edge by its output neuron. A middle layer's
    edges share one index per layer (the authors' `get_edge_types`)."""
    layers, parts, offset = description.layers, [], 0
    for i, layer in enumerate(layers):
        if i == 0:  # W[o, j] at o * n_in + j: by j
            parts.append(torch.arange(layer.n_in).repeat(layer.n_out) + offset)
            offset += layer.n_in
        elif i < len(layers) - 1:
            parts.append(torch.full((layer.n_out * layer.n_in,), offset, dtype=torch.long))
            offset += 1
        else:  # by o
            parts.append(torch.arange(layer.n_out).repeat_interleave(layer.n_in) + offset)
    return torch.cat(parts)


def canonical_scale(weights: WeightBatch, description: NetworkDescription, floor: float = FLOOR) -> WeightBatch:
    """The members at a canonical positive scale. Layer by layer, each hidden neuron's incoming weights and
    bias are divided by their norm. The norm moves onto its outgoing weights, which keeps a ReLU member's
    function. Then entries below `floor` in size are set to 0. Every hidden neuron of the result has norm 1
    (or is all 0), so the floor is relative to its neuron's scale. A positive scaling changes the result by
    rounding only. A denormal weight that the scaling itself rounded away is 0 on both sides."""
    return canonical_scale_and_norms(weights, description, floor)[0]


def canonical_scale_and_norms(weights: WeightBatch, description: NetworkDescription,
                              floor: float = FLOOR) -> tuple[WeightBatch, list[torch.Tensor]]:
    """`canonical_scale`, and the norm each hidden layer's neurons were divided by. The norms are (B, o) per
    hidden layer, 1 where a neuron is all 0. A positive scaling q of neuron i multiplies its norm by q."""
    tensors = dict(zip(weights.space.names, weights.tensors))
    layers, carried, norms = description.layers, None, []
    for i, layer in enumerate(layers):
        weight, bias = tensors[layer.weight_name], tensors[layer.bias_name]  # (B, o, i, *k), (B, o)
        kernel_axes = (1,) * len(layer.kernel)
        if carried is not None:  # the previous layer's norms, onto this layer's inputs
            weight = weight * carried.view(*carried.shape[:1], 1, -1, *kernel_axes)
        if i < len(layers) - 1:
            incoming = torch.cat([weight.flatten(2), bias.unsqueeze(-1)], dim=-1)  # (B, o, i * k + 1)
            peak = incoming.abs().amax(dim=-1)  # norm = peak * ||incoming / peak||: no underflow
            safe_peak = torch.where(peak > 0, peak, torch.ones_like(peak))
            norm = safe_peak * torch.linalg.vector_norm(incoming / safe_peak.unsqueeze(-1), dim=-1)
            carried = torch.where(norm > 0, norm, torch.ones_like(norm))  # (B, o)
            norms.append(carried)
            weight = weight / carried.view(*carried.shape, 1, *kernel_axes)
            bias = bias / carried
        tensors[layer.weight_name] = torch.where(weight.abs() < floor, torch.zeros_like(weight), weight)
        tensors[layer.bias_name] = torch.where(bias.abs() < floor, torch.zeros_like(bias), bias)
    return WeightBatch(weights.space, tuple(tensors[name] for name in weights.space.names)), norms


def from_canonical_scale(delta: WeightBatch, description: NetworkDescription, norms: list[torch.Tensor]) -> WeightBatch:
    """A weight-space output computed on `canonical_scale`d members, back at the members' own scale. W_l[i,
    j] is multiplied by n_l[i] / n_{l-1}[j] and b_l[i] by n_l[i]. That inverts the canonicalisation's
    rescaling, the floor aside. So a delta invariant to the members' scalings becomes equivariant."""
    tensors = dict(zip(delta.space.names, delta.tensors))
    for i, layer in enumerate(description.layers):
        weight, bias = tensors[layer.weight_name], tensors[layer.bias_name]
        kernel_axes = (1,) * len(layer.kernel)
        if i < len(norms):
            weight = weight * norms[i].view(*norms[i].shape, 1, *kernel_axes)
            bias = bias * norms[i]
        if i > 0:
            weight = weight / norms[i - 1].view(norms[i - 1].shape[0], 1, -1, *kernel_axes)
        tensors[layer.weight_name], tensors[layer.bias_name] = weight, bias
    return WeightBatch(delta.space, tuple(tensors[name] for name in delta.space.names))


@register_model("scalegmn")
class ScaleGMN(nn.Module):
    """WeightBatch -> neural graphs -> projections and positions -> ScaleGMN layers -> output neurons -> MLP."""

    Config = ScaleGMNConfig
    weight_spaces = ("feedforward", "transformer")  # transformers in mode "permutation" (GMN) only
    outputs = ("invariant", "weights")
    ARCHITECTURE_FIELDS = TRANSFORMER_ARCHITECTURE_FIELDS  # a transformer member's heads and residuals
    GROUP_FIELD = "mode"  # the config field naming the group (`benchmarks.check_model` sets it per space)
    # The authors' configs (jkalogero/scalegmn, configs/): CIFAR-10-GS ReLU generalization
    # (cifar10/scalegmn_relu.yml): mode scale, d_hid 128, 4 layers, mlp_on_io, no skips, no edge
    # positions, no dropout (the defaults); MNIST INR classification (mnist_cls/scalegmn.yml): mode
    # sign, d_hid 128, skips, edge positions, dropout 0.2, 10 classes. The budget variants: d 32, the
    # CPU budget's width (the suite's INR classifiers each run one; timings in docs/performance.md).
    PRESETS = {"generalization": {},
               "generalization-budget": {"hidden_dim": 32},  # d 32: the CPU budget's width (paper: 128)
               "inr-classification": {"mode": "sign", "io_mlp": False, "skip_connections": True,
                                      "edge_positions": True, "dropout": 0.2, "out_features": 10},
               "inr-classification-budget": {"mode": "sign", "hidden_dim": 32, "io_mlp": False,
                                             "skip_connections": True, "edge_positions": True, "dropout": 0.2,
                                             "out_features": 10},
               # MNIST INR editing (mnist_editing/scalegmn.yml): mode sign, d_hid 128, 10 layers, skips,
               # node positions only, mlp_on_io, dropout 0.1, a weight output; budget: d 32, 4 layers
               "inr-editing": {"mode": "sign", "num_layers": 10, "skip_connections": True, "dropout": 0.1,
                               "output": "weights"},
               "inr-editing-budget": {"mode": "sign", "hidden_dim": 32, "skip_connections": True, "dropout": 0.1,
                                      "output": "weights"},
               # GMN on transformer members (no config of theirs: the CNN one in mode permutation, at d 32)
               "transformer-generalization-budget": {"mode": "permutation", "hidden_dim": 32}}

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__()
        from nfn_models.layers.scalegmn import ScaleGMNConv, mlp  # imports torch_geometric

        self.weight_space = weight_space
        self.config = config = ScaleGMNConfig(**hparams)
        config.validate(f"model {type(self).__name__}", "")
        self.transformer = weight_space_kind(weight_space) == "transformer"
        if self.transformer and (config.mode != "permutation" or config.edge_positions):
            raise ValueError(f"ScaleGMN reads transformer members in mode 'permutation' (GMN) without edge "
                             f"positions; got mode {config.mode!r}, edge_positions {config.edge_positions} (its "
                             "scalings, sign flips and edge types are those of feedforward layers)")
        self.layout = graph_layout(weight_space, False, config.num_heads, config.residual)
        d, n_in, n_out = config.hidden_dim, self.layout.num_inputs, self.layout.num_outputs
        self.node_projection = nn.Linear(1, d, bias=False)
        self.edge_projection = nn.Linear(self.layout.edge_features, d, bias=False)
        self.positions = nn.Embedding(self.layout.num_positions, d)
        nn.init.normal_(self.positions.weight)  # the authors' torch.randn parameter
        hidden = torch.zeros(self.layout.num_nodes, dtype=torch.bool)
        hidden[n_in:self.layout.num_nodes - n_out] = True
        self.register_buffer("hidden", hidden, persistent=False)  # (N,)
        if config.edge_positions:
            self.register_buffer("edge_position", edge_positions(self.layout.description), persistent=False)
            self.edge_embedding = nn.Embedding(int(self.edge_position.max()) + 1, d)
            nn.init.normal_(self.edge_embedding.weight)
        weights_out = config.output == "weights"  # then the last layer updates hidden neurons and edges too
        self.convs = nn.ModuleList(ScaleGMNConv(d, config.mode, config.io_mlp,
                                                last=i == config.num_layers - 1 and not weights_out)
                                   for i in range(config.num_layers))
        self.skips = nn.ModuleList(nn.Linear(d, d, bias=False) for _ in range(config.num_layers)
                                   ) if config.skip_connections else None
        self.dropout = nn.Dropout(config.dropout)
        height, width = self.layout.kernel_size
        # the weight output: linear maps without bias, which commute with q (the authors' last layer of width 1)
        # the output neurons' features, and on transformer members (`pool_nodes`) every node's mean
        self.pool_nodes = config.pool_nodes and self.transformer
        self.head = None if weights_out else mlp((n_out + self.pool_nodes) * d, d, config.out_features)
        self.node_out = nn.Linear(d, 1, bias=False) if weights_out else None
        self.edge_out = nn.Linear(d, height * width, bias=False) if weights_out else None

    @property
    def symmetries(self) -> tuple[str, ...]:
        """Hidden-neuron permutations always; with them the mode's scalings or sign flips. On transformer
        members (mode "permutation"): their neuron relabellings."""
        if self.transformer:
            return ("attention-permutation",)
        return ("permutation",) if self.config.mode == "permutation" else ("permutation", self.config.mode)

    def encode(self, graphs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Node (B * N, d) and edge (B * E, d) features, and which nodes are hidden (B * N,)."""
        members = graphs.num_graphs
        hidden = self.hidden.repeat(members)  # (B * N,)
        inputs = (graphs.node_position < self.layout.num_inputs).unsqueeze(-1)
        values = torch.where(inputs, torch.ones_like(graphs.x), graphs.x)  # input neurons: 1
        nodes, positions = self.node_projection(values), self.positions(graphs.node_position)
        additive = self.config.mode == "permutation"
        nodes = nodes + positions if additive else torch.where(hidden.unsqueeze(-1), nodes * positions,
                                                               nodes + positions)
        edges = self.edge_projection(graphs.edge_attr)
        if self.config.edge_positions:
            embedded = self.edge_embedding(self.edge_position.repeat(members))
            edges = edges + embedded if additive else edges * embedded
        return nodes, edges, hidden

    def forward(self, weights: WeightBatch) -> torch.Tensor | WeightBatch:
        check_weight_space(self.weight_space, weights)
        norms = None
        if self.config.mode == "scale":
            description = self.layout.description
            weights, norms = canonical_scale_and_norms(weights, description)
        if self.head is not None:
            return self.forward_graphs(self.layout.batch(weights))
        nodes, edges = self.backbone(self.layout.batch(weights))  # (B, N, d), (B * E, d)
        edges = edges.view(len(weights), self.layout.num_edges, -1)
        delta = self.layout.to_weights(self.weight_space, self.node_out(nodes).squeeze(-1), self.edge_out(edges))
        return delta if norms is None else from_canonical_scale(delta, description, norms)

    def forward_graphs(self, graphs) -> torch.Tensor:
        """The prediction for batched neural graphs of this architecture (`NeuralGraphLayout.batch`,
        forward edges in its order): (B, out_features)."""
        nodes, _ = self.backbone(graphs)
        readout = nodes[:, self.layout.output_nodes.to(nodes.device)]  # (B, n_out, d)
        if self.pool_nodes:
            readout = torch.cat([readout, nodes.mean(1, keepdim=True)], dim=1)  # (B, n_out + 1, d)
        return self.head(readout.flatten(1))  # (B, out_features)

    def backbone(self, graphs) -> tuple[torch.Tensor, torch.Tensor]:
        """Projections, positions and the ScaleGMN layers: node (B, N, d) and edge (B * E, d) features."""
        x, edge_attr, hidden = self.encode(graphs)  # (B * N, d), (B * E, d), (B * N,)
        for i, conv in enumerate(self.convs):
            updated, edge_attr = conv(x, graphs.edge_index, edge_attr, hidden)
            x = self.dropout(updated + self.skips[i](x) if self.skips is not None else updated)
        return x.view(graphs.num_graphs, self.layout.num_nodes, -1), edge_attr
