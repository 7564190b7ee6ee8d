"""NG-GNN: a PNA graph network on the neural graph of a checkpoint, with an invariant readout.

Kofinas et al., "Graph Neural Networks for Learning Equivariant Representations of Neural Networks" (ICLR
2024). Sec. 3 defines the neural graph (`nfn_models.graphs`). Neurons are nodes, biases are node features,
and weights and flattened kernels are edge features. The input neurons, each hidden layer and the output
neurons get learned positional embeddings. Sec. 4 (NG-GNN) has three steps:

1. Node and edge encoders. Each scalar (a bias, or a kernel vector) goes to random Fourier features [cos 2
   pi B v, sin 2 pi B v]. B ~ N(0, sigma^2) is fixed, as in the authors' `GaussianEncoding` (sigma 3, 128
   frequencies). Two linear maps follow, plus the node's positional embedding. These and the readout MLP
   live in `nfn_models.layers.neural_graph`, shared with NG-T. Some networks mix convolutions and dense
   layers. Then the dense layers' edges (their one weight) have their own encoder (the authors'
   `linear_as_conv: False` for the CNN zoo).

2. `num_layers` PNA layers with FiLM edge modulation and edge updates (`nfn_models.layers.pna`). LayerNorm,
   SiLU and dropout come between them, none after the last.

3. The readout. The output neurons' node features are concatenated in order ("cat" over the last layer).
   Then an MLP d -> d -> out_features with ReLUs reads them.

With `output="weights"` (the authors' INR editing model, their `dense_gnn.GNNParams`) there is no readout.
Each neuron's final features give its bias, and each forward edge's give its weight (a kernel vector on a
CNN). MLPs d -> d -> 1 do this (`WeightHead`), and `NeuralGraphLayout.to_weights` reads them back into the
weight space. The task scales the delta. It is equivariant to hidden-neuron permutations, checked in float64
(`EXACTNESS_DTYPE` below).

Every step is equivariant to permutations of a hidden layer's neurons. They share their positional
embedding, and message passing does not see node order. The readout reads only the output neurons, which no
symmetry moves. So the output is invariant to hidden-neuron permutations ("permutation"), exactly up to
float summation order. It is not invariant to ReLU networks' positive scalings or tanh/sine networks' sign
flips, since the encoders see raw weights. `benchmarks.check_model` checks both.

We checked it once against the authors' code (mkofinas/neural-graphs, `nn/gnn.py`'s `PNA`), with our
parameters copied across. The backbone is the same function to 3e-15 in float64 once both LayerNorms' eps is
0. PyG's graph LayerNorm divides by std + eps without a batch vector, and by sqrt(var + eps) with one.

Where ours differs from theirs (`nn/gnn.py`, `nn/graph_constructor.py`, `nn/dynamic_graph_constructor.py`):

(1) LayerNorm normalises each graph (PyG's graph-mode LayerNorm, given the batch vector). Theirs is called
without it and normalises over the whole minibatch. So there a member's prediction depends on the other
members of its batch.

(2) PNA's degree histogram is the graph's own in-degrees, reverse edges included when present. Their INR
code counts forward edges only, so the amplification scaler's normaliser differs.

(3) No activation-function embedding (their `use_act_embed`, for a zoo mixing activations). Ours have one
activation per weight space. No per-layer weight standardisation (their INR `stats`).

(4) The weight output reads the first layer's biases from the first hidden neurons, since the input neurons
carry none. Their `graph_to_wb` takes the biases from node 0 on. Their editing config encodes raw scalars
linearly (`sin_emb: False`); ours keeps the Fourier encoders.

(5) Probe features for SIREN members (`probe_features: K`; their `*_probe_64.sh` scripts use 64). They are
`nfn_models.layers.neural_graph.INRProbeFeatures`, added to the encoded biases as theirs are.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from nfn_models.graphs import NeuralGraphLayout
from nfn_models.layers import ACTIVATIONS
from nfn_models.layers.neural_graph import (PROBE_ARCHITECTURE_FIELDS, FourierEncoder, ProbeFeatureFields,
                                            WeightHead, positional_embedding, probe_features, readout_mlp)
from nfn_models.registry import check_weight_space, register_model, weight_space_kind
from nfn_models.stack import check_output
from nfn_models.transformer_graph import TRANSFORMER_ARCHITECTURE_FIELDS, TransformerGraphFields, graph_layout
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightBatch, WeightSpace


@dataclasses.dataclass(frozen=True)
class NGGNNConfig(ProbeFeatureFields, TransformerGraphFields):
    hidden_dim: int = 256  # d_hid of nodes and edges: 256 on the CNN zoo (the authors' cnn_zoo_pna.sh)
    num_layers: int = 4  # PNA layers (the authors' pna.yaml)
    fourier_features: int = 128  # frequencies of the input encoders (their sin_emb_dim)
    fourier_scale: float = 3.0  # std of the frequencies (their inp_factor)
    activation: str = "silu"  # between PNA layers and in the edge updates (their act: silu)
    dropout: float = 0.0  # after each PNA layer but the last: 0 on the CNN zoo, 0.2 on INRs
    reverse_edges: bool = False  # add reversed edges (their rev_edge_features): off for CNNs, on for INRs
    out_features: int = 1  # one scalar per checkpoint for regression (10 classes for INR classification)
    output: str = "invariant"  # "weights": each node's and edge's final features -> a weight delta (INR editing)

    def validate(self, where: str, key: str) -> None:
        prefix = f"{key}." if key else ""
        check_output(where, key, self.output)
        for name in ("hidden_dim", "num_layers", "fourier_features", "out_features"):
            if getattr(self, name) < 1:
                raise SchemaError(where, f"{prefix}{name}", f"expected a positive integer, got {getattr(self, name)}")
        if not self.fourier_scale > 0:
            raise SchemaError(where, f"{prefix}fourier_scale", f"expected a positive number, got {self.fourier_scale}")
        if self.activation not in ACTIVATIONS:
            raise SchemaError(where, f"{prefix}activation",
                              f"expected one of {sorted(ACTIVATIONS)}, got {self.activation!r}")
        if not 0.0 <= self.dropout < 1.0:
            raise SchemaError(where, f"{prefix}dropout", f"expected a probability in [0, 1), got {self.dropout}")
        if self.probe_features < 0:
            raise SchemaError(where, f"{prefix}probe_features", f"expected 0 or more, got {self.probe_features}")


@register_model("ng_gnn")
class NGGNN(nn.Module):
    """WeightBatch -> neural graphs -> encoders -> PNA x num_layers -> output neurons -> MLP -> (B, out_features)."""

    Config = NGGNNConfig
    weight_spaces = ("feedforward", "transformer")  # `nfn_models.graphs`, `nfn_models.transformer_graph`
    outputs = ("invariant", "weights")
    # The weight output's equivariance is checked in float64 (`benchmarks.check_model`): in float32
    # PNA's std aggregation (E[x^2] - E[x]^2, clamped at 1e-5, of the first hidden layer's two
    # messages) turns the summation-order rounding of a permuted graph into relative gaps up to 7e-4
    # on the first layer's biases; in float64 they are 1e-13.
    EXACTNESS_DTYPE = torch.float64
    # At initialisation the output hardly depends on the input (~1e-4 across random members): the
    # checks move every parameter by N(0, 0.5^2) first, so that an unclaimed group visibly moves it.
    EXACTNESS_PARAMETER_NOISE = 0.5
    # a SIREN member's, read by probe features only; a transformer member's heads and residuals
    ARCHITECTURE_FIELDS = PROBE_ARCHITECTURE_FIELDS + TRANSFORMER_ARCHITECTURE_FIELDS
    # The authors' scripts (mkofinas/neural-graphs): CNN generalization on the Small CNN Zoo
    # (cnn_zoo_pna.sh): d_hid 256, 4 PNA layers, no reverse edges, no dropout (the defaults);
    # INR classification (mnist_cls_pna.sh): d_hid 32, reverse edges, dropout 0.2, 10 classes.
    PRESETS = {"generalization": {},
               # d 32: the CPU budget's width (paper: 256; timings in docs/performance.md)
               "generalization-budget": {"hidden_dim": 32},
               "inr-classification": {"hidden_dim": 32, "reverse_edges": True, "dropout": 0.2, "out_features": 10},
               # their *_probe_64.sh: the same with 64 learned probe coordinates
               "inr-classification-probes": {**{"hidden_dim": 32, "reverse_edges": True, "dropout": 0.2,
                                                "out_features": 10}, "probe_features": 64},
               "inr-classification-budget": {"hidden_dim": 32, "reverse_edges": True, "dropout": 0.2,
                                             "out_features": 10},  # already small: the same
               # INR editing (mnist_dilation_gnn.sh with style_editing's pna.yaml): d_hid 128, reverse
               # edges, dropout 0.2, a weight output; budget: d 32 as for classification
               "inr-editing": {"hidden_dim": 128, "reverse_edges": True, "dropout": 0.2, "output": "weights"},
               "inr-editing-budget": {"hidden_dim": 32, "reverse_edges": True, "dropout": 0.2, "output": "weights"}}

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__()
        from nfn_models.layers.pna import EdgeModulatedPNAConv, EdgeUpdate  # imports torch_geometric

        self.weight_space = weight_space
        self.config = config = NGGNNConfig(**hparams)
        self.layout = graph_layout(weight_space, config.reverse_edges, config.num_heads, config.residual)
        d = config.hidden_dim
        self.node_encoder = FourierEncoder(1, config.fourier_features, config.fourier_scale, d)
        self.edge_encoder = FourierEncoder(self.layout.edge_features, config.fourier_features, config.fourier_scale, d)
        # dense layers among convolutions: their own encoder of their weight, [w] or [w, w', w + w']
        self.dense_layers = list(self.layout.dense_edge_layers)
        mixed = bool(self.dense_layers) and len(self.dense_layers) < self.layout.num_edge_layers
        height, width = self.layout.kernel_size
        centre = NeuralGraphLayout.centre_entry((height, width))  # where a 1 x 1 kernel sits
        blocks = 3 if config.reverse_edges else 1
        self.register_buffer("dense_entries", torch.tensor([b * height * width + centre for b in range(blocks)]),
                             persistent=False)
        self.dense_edge_encoder = (FourierEncoder(blocks, config.fourier_features, config.fourier_scale, d)
                                   if mixed else None)
        self.positions = positional_embedding(self.layout.num_positions, d)
        self.probes = probe_features(weight_space, config, d)  # None unless probe_features > 0
        histogram = self.layout.in_degree_histogram
        self.convs = nn.ModuleList(EdgeModulatedPNAConv(d, d, histogram) for _ in range(config.num_layers))
        self.edge_updates = nn.ModuleList(EdgeUpdate(d, d, ACTIVATIONS[config.activation]())
                                          for _ in range(config.num_layers - 1))
        self.norms = nn.ModuleList(_graph_layer_norm(d) for _ in range(config.num_layers - 1))
        self.activation = ACTIVATIONS[config.activation]()
        self.dropout = nn.Dropout(config.dropout)
        # the output neurons' features, and on transformer members (`pool_nodes`) every node's mean
        self.pool_nodes = config.pool_nodes and weight_space_kind(weight_space) == "transformer"
        readout = (self.layout.num_outputs + self.pool_nodes) * d
        if config.output == "weights":
            self.head, self.weight_head = None, WeightHead(self.layout, d, d)
        else:
            self.head, self.weight_head = readout_mlp(readout, d, config.out_features, hidden_layers=2), None

    @property
    def symmetries(self) -> tuple[str, ...]:
        """Node relabellings: hidden-neuron permutations of CNNs and SIRENs, and a transformer's neuron
        relabellings (`nfn_models.transformer_graph`). With output="weights" the output is equivariant to
        them."""
        return ("permutation",) if weight_space_kind(self.weight_space) == "feedforward" else ("attention-permutation",)

    def encode(self, graphs, probes: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Node (B * N, d) and edge (B * E, d) features of the batched neural graphs (probe features (B, N, d))."""
        added = None if probes is None else probes.reshape(-1, probes.shape[-1])
        nodes = self.node_encoder(graphs.x, added) + self.positions(graphs.node_position)
        if self.dense_edge_encoder is None:
            return nodes, self.edge_encoder(graphs.edge_attr)
        # each edge through its own encoder only (a transformer's graph: 512 kernel edges of 18,848)
        dense = torch.isin(graphs.edge_layer, torch.tensor(self.dense_layers, device=nodes.device))
        edges = nodes.new_empty(len(graphs.edge_attr), nodes.shape[-1])
        edges[~dense] = self.edge_encoder(graphs.edge_attr[~dense])
        edges[dense] = self.dense_edge_encoder(graphs.edge_attr[dense][:, self.dense_entries])
        return nodes, edges

    def forward(self, weights: WeightBatch) -> torch.Tensor | WeightBatch:
        check_weight_space(self.weight_space, weights)
        probes = None if self.probes is None else self.probes(weights.tensors)
        graphs = self.layout.batch(weights)
        if self.weight_head is None:
            return self.forward_graphs(graphs, probes)
        nodes, edges = self.backbone(graphs, probes)  # edges in the layout's order: forward ones first
        forward_edges = edges.view(len(weights), self.layout.num_edges, -1)[:, :self.layout.num_forward_edges]
        return self.weight_head(self.weight_space, nodes, forward_edges)

    def forward_graphs(self, graphs, probes: torch.Tensor | None = None) -> torch.Tensor:
        """The prediction for batched neural graphs of this architecture (`NeuralGraphLayout.batch`), in any
        edge order: (B, out_features). Probe features (B, N, d) join if any."""
        nodes, _ = self.backbone(graphs, probes)
        readout = nodes[:, self.layout.output_nodes.to(nodes.device)]  # (B, n_out, d)
        if self.pool_nodes:
            readout = torch.cat([readout, nodes.mean(1, keepdim=True)], dim=1)  # (B, n_out + 1, d)
        return self.head(readout.flatten(1))  # (B, out_features)

    def backbone(self, graphs, probes: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoders and PNA layers: node features (B, N, d) and edge features (B * E, d) in the graphs' edge
        order. The last layer updates nodes only (the authors' `final_edge_update: False`)."""
        from nfn_models.layers.pna import DegreeBuckets  # loaded by the constructor already

        members = graphs.num_graphs
        x, edge_attr = self.encode(graphs, probes)  # (B * N, d), (B * E, d)
        buckets = DegreeBuckets.of(graphs.edge_index, x.shape[0])  # the edges by target, for every layer
        for i, conv in enumerate(self.convs):
            x = conv(x, graphs.edge_index, edge_attr, buckets)
            if i == len(self.convs) - 1:
                break
            x = self.dropout(self.activation(self.norms[i](x, graphs.batch, members)))
            edge_attr = self.edge_updates[i](x, graphs.edge_index, edge_attr)
        return x.view(members, self.layout.num_nodes, -1), edge_attr


def _graph_layer_norm(channels: int) -> nn.Module:
    import nfn_models.layers.quiet_geometric  # noqa: F401 (before any torch_geometric import)
    from torch_geometric.nn.norm import LayerNorm

    return LayerNorm(channels, mode="graph")
