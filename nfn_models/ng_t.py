"""NG-T: a relational transformer on the dense neural graph of a checkpoint, with an invariant readout.

Kofinas et al., "Graph Neural Networks for Learning Equivariant Representations of Neural Networks" (ICLR
2024). Sec. 3 defines the neural graph (`nfn_models.graphs`). Neurons are nodes, biases are node features,
and weights and flattened kernels are edge features. The input neurons, each hidden layer and the output
neurons get positional embeddings. Here the graph is dense, as in the authors' dense `batch_to_graphs`.
Every ordered pair of nodes (i, j) holds the feature of the weight i -> j, or zeros where there is none. A
dense layer is a 1 x 1 kernel centred in the largest one (their `linear_as_conv: True`, as in their NG-T
script).

Sec. 4 (NG-T) has three steps:

1. The encoders NG-GNN uses (`nfn_models.layers.neural_graph`). Random Fourier features encode each bias and
   each pair's edge vector. Zero vectors are included, so every non-edge gets the same learned code. Two
   linear maps follow, plus the node's positional embedding. The Fourier scale sigma is 1 (the authors'
   `inp_factor` of their RT configs; NG-GNN's is 3).

2. `num_layers` relational-transformer layers (`nfn_models.layers.relational_transformer`). Every node
   attends to every node; the edge features shift queries and keys and modulate values. Edge updates read
   [e_ij, e_ji], x_i and x_j. Each step is followed by a feedforward and post-LayerNorm. The last layer
   updates no edges, since the readout reads nodes only.

3. The readout. The output neurons' features are concatenated in order, then go through an MLP. It has
   `readout_layers` hidden layers of `readout_dim` with ReLUs. That is two on the CNN zoo (their
   `DynamicRelationalTransformer`) and one on INRs (their `RelationalTransformer`).

With `output="weights"` (their INR editing model, `RelationalTransformerParams`) every layer updates the
edges. Each neuron's final features give its bias, and each forward edge's its weight
(`nfn_models.layers.neural_graph.WeightHead`, MLPs d -> d -> 1). That output is equivariant to hidden-neuron
permutations.

Presets (`PRESETS`, the widths in `NGTConfig`): `generalization` has 1,806,977 parameters on the Small CNN.
`inr-classification` has 376,586 on SIRENs 2-32-32-1. Their `-budget` forms (the suites') set d_node 32,
like NG-GNN's and ScaleGMN's INR budget presets: 101,514 parameters.

A hidden-neuron permutation of the weights relabels the nodes of one hidden layer. Those nodes share their
positional embedding. Attention and edge updates are equivariant to relabelling nodes (a softmax and a sum
over all j). The readout reads only the output neurons, which no symmetry moves. So the output is invariant
to hidden-neuron permutations ("permutation"), exactly up to float summation order. It is not invariant to
ReLU networks' positive scalings or tanh/sine networks' sign flips. The encoders read raw weights
(`benchmarks.check_model`).

We checked it once against the authors' code (mkofinas/neural-graphs). That is their `RTLayer` and
`RelationalTransformer` in `nn/relational_transformer.py`, with `nn/graph_constructor.py`. Our parameters
were copied across, each perturbed off its initial value, in float64. Four RT layers at the CNN widths on
Small CNN graphs give their node and edge features to 1.1e-14 (features of size ~3). The whole INR-preset
model on SIRENs 2-32-32-1 gives their logits to 3.3e-15, with the same 376,586 parameters. Their CNN model
(`DynamicRelationalTransformer`, PyG batches) was not run. It differs from the static one only in the
graph's construction and the readout's depth (`readout_layers`).

Where ours differs:

(1) Parameter layout only. Their fused q/k/v projections split into heads first (rows (head, q|k|v, d_h)).
Ours split into q/k/v first (rows (q|k|v, head, d_h)). A row permutation maps one to the other, with the
same Xavier-uniform distribution.

(2) The dense graph comes from `NeuralGraphLayout`, one architecture per model. Their CNN variant densifies
PyG batches (`dynamic_graph_constructor`), for zoos of mixed architectures.

(3) No activation-function embedding (their `use_act_embed`, for a zoo mixing activations). Ours have one
activation per weight space. No per-layer weight standardisation (their INR `stats`). No CLS token (their
`use_cls_token` is off in every NG-T script). `modulate_v` is always on, as in every script.

(4) Their CNN-zoo script trains a sigmoid output with BCE. Here the task's `loss` decides. The
generalization task's `loss: bce` is theirs; its default, `mse`, regresses the raw output.

(5) Probe features for SIREN members (`probe_features: K`; their `*_probe_64.sh` scripts use 64). They are
`nfn_models.layers.neural_graph.INRProbeFeatures`, added to the encoded biases as theirs are.
"""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from nfn_models.features import NetworkDescription
from nfn_models.graphs import NeuralGraphLayout
from nfn_models.layers.neural_graph import (PROBE_ARCHITECTURE_FIELDS, FourierEncoder, ProbeFeatureFields,
                                            WeightHead, positional_embedding, probe_features, readout_mlp)
from nfn_models.layers.relational_transformer import RelationalTransformerLayer
from nfn_models.registry import check_weight_space, register_model
from nfn_models.stack import check_output
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightBatch, WeightSpace


@dataclasses.dataclass(frozen=True)
class NGTConfig(ProbeFeatureFields):
    hidden_dim: int = 128  # d_node: 128 on the CNN zoo (the authors' cnn_zoo_rt.sh), 64 on INRs
    edge_dim: int | None = None  # d_edge; None: hidden_dim // 2 (64 and 32 in both of their settings)
    attention_dim: int | None = None  # d_attn (query/key/value width); None: 2 * hidden_dim (256, 128)
    node_mlp_dim: int | None = None  # the nodes' feedforward width; None: 2 * hidden_dim (256, 128)
    edge_mlp_dim: int | None = None  # the edge update's width; None: hidden_dim (128, 64)
    readout_dim: int | None = None  # the readout MLP's width; None: 2 * hidden_dim (256, 128)
    readout_layers: int = 2  # hidden layers of the readout MLP: 2 on the CNN zoo, 1 on INRs
    num_layers: int = 4  # relational-transformer layers (both settings)
    num_heads: int = 8  # attention heads (both settings)
    fourier_features: int = 128  # frequencies of the input encoders (their sin_emb_dim)
    fourier_scale: float = 1.0  # std of the frequencies (their inp_factor: 1 in the RT configs)
    dropout: float = 0.0  # in every layer's residual branches: 0 on the CNN zoo, 0.2 on INRs
    reverse_edges: bool = False  # edge features [w(i->j), w(j->i), sum]: off in both RT settings
    out_features: int = 1  # one scalar per checkpoint for regression (10 classes for INR classification)
    output: str = "invariant"  # "weights": each node's and edge's final features -> a weight delta (INR editing)

    @property
    def widths(self) -> dict[str, int]:
        """The resolved widths: d_node, d_edge, d_attn, the feedforwards' and the readout's."""
        d = self.hidden_dim
        chosen = {"edge_dim": self.edge_dim, "attention_dim": self.attention_dim, "node_mlp_dim": self.node_mlp_dim,
                  "edge_mlp_dim": self.edge_mlp_dim, "readout_dim": self.readout_dim}
        ratio = {"edge_dim": max(d // 2, 1), "attention_dim": 2 * d, "node_mlp_dim": 2 * d, "edge_mlp_dim": d,
                 "readout_dim": 2 * d}
        return {"hidden_dim": d, **{k: ratio[k] if v is None else v for k, v in chosen.items()}}

    def validate(self, where: str, key: str) -> None:
        prefix = f"{key}." if key else ""
        check_output(where, key, self.output)
        sizes = ("hidden_dim", "edge_dim", "attention_dim", "node_mlp_dim", "edge_mlp_dim", "readout_dim",
                 "num_layers", "num_heads", "fourier_features", "out_features")
        for name in sizes:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise SchemaError(where, f"{prefix}{name}", f"expected a positive integer, got {value}")
        if self.readout_layers < 0:
            raise SchemaError(where, f"{prefix}readout_layers", f"expected 0 or more, got {self.readout_layers}")
        attention = self.widths["attention_dim"]
        if attention % self.num_heads:
            raise SchemaError(where, f"{prefix}attention_dim", f"expected a multiple of num_heads {self.num_heads}, "
                              f"got {attention} (set attention_dim or num_heads)")
        if not self.fourier_scale > 0:
            raise SchemaError(where, f"{prefix}fourier_scale", f"expected a positive number, got {self.fourier_scale}")
        if not 0.0 <= self.dropout < 1.0:
            raise SchemaError(where, f"{prefix}dropout", f"expected a probability in [0, 1), got {self.dropout}")
        if self.probe_features < 0:
            raise SchemaError(where, f"{prefix}probe_features", f"expected 0 or more, got {self.probe_features}")


def dense_neural_graph(layout: NeuralGraphLayout, weights: WeightBatch) -> tuple[torch.Tensor, torch.Tensor]:
    """Node features (B, N, 1) and the dense edge features (B, N, N, f): [b, i, j] is edge i -> j, 0 if none."""
    nodes, edges = layout.features(weights)  # (B, N, 1), (B, E, f)
    source, target = layout.edge_index.to(nodes.device)
    dense = edges.new_zeros(len(weights), layout.num_nodes, layout.num_nodes, edges.shape[-1])
    dense[:, source, target] = edges
    return nodes, dense


@register_model("ng_t")
class NGT(nn.Module):
    """WeightBatch -> dense neural graphs -> encoders -> RT layers x num_layers -> output neurons -> MLP."""

    Config = NGTConfig
    # not transformers: their graphs (`nfn_models.transformer_graph`) have 523 nodes, and dense attention
    # over 523^2 pairs holds 1.1 GB a query/key/value tensor for 16 members at d_node 32 (docs/models.md)
    weight_spaces = ("feedforward",)
    symmetries = ("permutation",)  # with output="weights": equivariant to it
    outputs = ("invariant", "weights")
    ARCHITECTURE_FIELDS = PROBE_ARCHITECTURE_FIELDS  # a SIREN member's, read by probe features only
    # The authors' scripts (mkofinas/neural-graphs): CNN generalization on the Small CNN Zoo
    # (cnn_zoo_rt.sh): d_node 128, d_edge 64, d_attn = d_node_hid = d_out_hid 256, d_edge_hid 128, 4 layers,
    # 8 heads, no dropout, readout with two hidden layers (the defaults); INR classification
    # (mnist_cls_rt.sh with rtransformer.yaml): d_node 64, d_edge 32, 128 / 128 / 64 / 128, dropout 0.2,
    # readout with one hidden layer, 10 classes.
    PRESETS = {"generalization": {},
               # d_node 32 (d_edge 16): a quarter of the CNN widths, the CPU budget's
               "generalization-budget": {"hidden_dim": 32},
               "inr-classification": {"hidden_dim": 64, "dropout": 0.2, "readout_layers": 1, "out_features": 10},
               # their *_probe_64.sh: the same with 64 learned probe coordinates
               "inr-classification-probes": {**{"hidden_dim": 64, "dropout": 0.2, "readout_layers": 1,
                                                "out_features": 10}, "probe_features": 64},
               # d_node 32 (d_edge 16), half the INR widths: the CPU budget's (timings in docs/performance.md)
               "inr-classification-budget": {"hidden_dim": 32, "dropout": 0.2, "readout_layers": 1,
                                             "out_features": 10},
               # INR editing (mnist_dilation_rt.sh with style_editing's rtransformer.yaml): the INR widths,
               # 4 heads, no dropout, Fourier scale 3, edges updated in every layer, a weight output
               "inr-editing": {"hidden_dim": 64, "num_heads": 4, "fourier_scale": 3.0, "output": "weights"},
               "inr-editing-budget": {"hidden_dim": 32, "num_heads": 4, "fourier_scale": 3.0,
                                      "output": "weights"}}  # d_node 32 as for classification

    def __init__(self, weight_space: WeightSpace, **hparams):
        super().__init__()
        self.weight_space = weight_space
        self.config = config = NGTConfig(**hparams)
        self.layout = NeuralGraphLayout(NetworkDescription.from_weight_space(weight_space), config.reverse_edges)
        w = config.widths
        d, d_edge = w["hidden_dim"], w["edge_dim"]
        self.node_encoder = FourierEncoder(1, config.fourier_features, config.fourier_scale, d)
        self.edge_encoder = FourierEncoder(self.layout.edge_features, config.fourier_features, config.fourier_scale,
                                           d_edge)
        self.positions = positional_embedding(self.layout.num_positions, d)
        self.probes = probe_features(weight_space, config, d)  # None unless probe_features > 0
        self.layers = nn.ModuleList(
            RelationalTransformerLayer(d, d_edge, w["attention_dim"], w["node_mlp_dim"], w["edge_mlp_dim"],
                                       config.num_heads, config.dropout,
                                       update_edges=i < config.num_layers - 1 or config.output == "weights")
            for i in range(config.num_layers))
        n_out = self.layout.description.unit_sizes[-1]
        if config.output == "weights":
            self.head, self.weight_head = None, WeightHead(self.layout, d, d_edge)
        else:
            self.head = readout_mlp(n_out * d, w["readout_dim"], config.out_features, config.readout_layers)
            self.weight_head = None
        self.register_buffer("node_position", self.layout.node_position, persistent=False)
        self.register_buffer("output_nodes", self.layout.output_nodes, persistent=False)

    def forward(self, weights: WeightBatch) -> torch.Tensor | WeightBatch:
        check_weight_space(self.weight_space, weights)
        probes = None if self.probes is None else self.probes(weights.tensors)
        if self.weight_head is None:
            return self.forward_graph(*dense_neural_graph(self.layout, weights), probes)
        x, e = self.backbone(*dense_neural_graph(self.layout, weights), probes)
        source, target = self.layout.edge_index[:, :self.layout.num_forward_edges].to(e.device)
        return self.weight_head(self.weight_space, x, e[:, source, target])  # (B, N, d), (B, E_f, d_edge)

    def forward_graph(self, nodes: torch.Tensor, edges: torch.Tensor,
                      probes: torch.Tensor | None = None) -> torch.Tensor:
        """The prediction for dense neural graphs of this architecture (`dense_neural_graph`) -> (B,
        out_features). It reads nodes (B, N, 1), edges (B, N, N, f), and probe features (B, N, d) if any."""
        x, _ = self.backbone(nodes, edges, probes)
        return self.head(x[:, self.output_nodes].flatten(1))  # (B, n_out * d) -> (B, out_features)

    def backbone(self, nodes: torch.Tensor, edges: torch.Tensor,
                 probes: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Encoders and RT layers: node (B, N, d) and dense edge (B, N, N, d_edge) features."""
        x = self.node_encoder(nodes, probes) + self.positions(self.node_position)  # (B, N, d)
        # the pairs without a weight all get the code of a zero vector: encode it once, and the weights apart
        present = edges.ne(0).any(-1)  # (B, N, N); an all-zero kernel reads as absent, its code is the same
        e = self.edge_encoder(edges.new_zeros(edges.shape[-1])).expand(*edges.shape[:-1], -1).clone()
        e[present] = self.edge_encoder(edges[present])  # (B, N, N, d_edge)
        for layer in self.layers:
            x, e = layer(x, e)
        return x, e
