"""The pieces NG-GNN and NG-T share: the input encoders, the positional embedding and the readout.

Kofinas et al., "Graph Neural Networks for Learning Equivariant Representations of Neural Networks" (ICLR
2024), Sec. 4. Both models encode each scalar of the neural graph (a bias, or a kernel vector) with random
Fourier features. These are [cos 2 pi B v, sin 2 pi B v] with a fixed B ~ N(0, sigma^2), the authors'
`GaussianEncoding` from `rff`. Two linear maps follow (their `proj_bias` / `proj_weight` and `proj_node_in`
/ `proj_edge_in`). Each node adds a learned positional embedding, initialised N(0, 1) (their `torch.randn`
parameter). An MLP (their `proj_out`) reads the output neurons' features, concatenated in order. Plain
torch: no graph library needed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Literal

import torch
from torch import nn

from zoo.validation.domains import Real, Scale


class FourierEncoder(nn.Module):
    """v (..., f) -> [cos 2 pi v B^T, sin 2 pi v B^T] (..., 2 m) -> linear -> linear (..., d); B fixed."""

    def __init__(self, in_features: int, frequencies: int, scale: float, out_features: int):
        super().__init__()
        self.register_buffer("frequencies", scale * torch.randn(frequencies, in_features))  # (m, f)
        self.project = nn.Sequential(nn.Linear(2 * frequencies, out_features), nn.Linear(out_features, out_features))

    def forward(self, values: torch.Tensor, added: torch.Tensor | None = None) -> torch.Tensor:
        """`added` (..., d), e.g. probe features, joins after the first linear map (the authors' order)."""
        angles = 2 * math.pi * values @ self.frequencies.T  # (..., m)
        first = self.project[0](torch.cat([torch.cos(angles), torch.sin(angles)], dim=-1))
        return self.project[1](first if added is None else first + added)


def positional_embedding(num_positions: int, dim: int) -> nn.Embedding:
    """One learned vector per position (`NeuralGraphLayout.node_position`), drawn N(0, 1)."""
    embedding = nn.Embedding(num_positions, dim)
    nn.init.normal_(embedding.weight)  # the authors' torch.randn parameter
    return embedding


def readout_mlp(in_features: int, hidden_features: int, out_features: int, hidden_layers: int) -> nn.Sequential:
    """Linear -> ReLU, `hidden_layers` times, then Linear to `out_features`."""
    layers: list[nn.Module] = []
    for i in range(hidden_layers):
        layers += [nn.Linear(in_features if i == 0 else hidden_features, hidden_features), nn.ReLU()]
    layers.append(nn.Linear(hidden_features if hidden_layers else in_features, out_features))
    return nn.Sequential(*layers)


@dataclasses.dataclass(frozen=True)
class ProbeFeatureFields:
    """The config fields of a neural-graph model's INR probe features (`INRProbeFeatures`)."""
    probe_features: int = 0  # learned probe coordinates (the authors' probe scripts: 64); 0: no probe features
    # What a SIREN member computes that its shapes do not show, filled by the harness from the zoo
    # (ARCHITECTURE_FIELDS) and read only with probe features:
    first_omega_0: Scale = 30.0
    hidden_omega_0: Scale = 30.0
    coordinates: Literal["row_column", "column_row"] = "row_column"
    output_offset: Real = 0.0


PROBE_ARCHITECTURE_FIELDS = ("first_omega_0", "hidden_omega_0", "coordinates", "output_offset")


def probe_features(space, config: ProbeFeatureFields, dim: int) -> "INRProbeFeatures | None":
    """The probe features `config` asks for on `space` (None without), or a ValueError if its members are no SIRENs."""
    if not config.probe_features:
        return None
    from nfn_models.probegen import siren_architecture

    architecture = siren_architecture(space, config)
    if architecture is None:
        raise ValueError(f"probe_features={config.probe_features} runs the members as SIRENs (sine1..sineL, output); "
                         f"these weights are no SIREN's: {list(space.names)}; set probe_features=0")
    return INRProbeFeatures(architecture, config.probe_features, dim)


class INRProbeFeatures(nn.Module):
    """Probe features of a SIREN's neural graph (Kofinas et al. 2024, Sec. 3, "probe features") -> (B, N,
    d).

    The members run on K learned input coordinates. Every neuron's K values become a node feature, through a
    linear map and a LayerNorm of its layer. An input neuron's values are the coordinate itself. A hidden
    neuron's are its sine's output, and an output neuron's the member's output.

    Facts from the authors' code (mkofinas/neural-graphs, `nn/probe_features.py`, read for facts only). The
    probes start uniform in [-1, 1]^in and are learned. Each layer of neurons has one `Linear(K, d) +
    LayerNorm(d)`. The result is added to the encoded biases before their second linear map (their
    `proj_node_in`). Their `*_probe_64.sh` scripts use 64 probes.

    The members run in float64, as ProbeGen's do (`nfn_models.probegen.SIRENMembers`). In float32 a
    hidden-unit permutation reorders the sums at omega_0 = 30. A hidden-unit permutation permutes the hidden
    neurons' values with the neurons. So the graph models stay permutation invariant.

    Checked once against their `GraphProbeFeatures` (their `INRPerLayer` SIREN 2-32-32-1, 64 probes, d 32),
    with our probes and projections copied across. In float64, on 5 random members, the (5, 67, 32) features
    agree to 6.1e-13 (features up to 3.5).
    """

    def __init__(self, architecture, num_probes: int, dim: int):
        super().__init__()
        self.architecture = architecture  # zoo.families.inr_model.INRArchitecture
        self.probes = nn.Parameter(2 * torch.rand(num_probes, architecture.in_features) - 1)
        layers = 1 + architecture.num_sine_layers + 1  # the inputs, the sine layers, the outputs
        self.project = nn.ModuleList(nn.Sequential(nn.Linear(num_probes, dim), nn.LayerNorm(dim))
                                     for _ in range(layers))

    def forward(self, tensors) -> torch.Tensor:
        """The members' tensors in weight-space order, each (B, ...) -> (B, N, d), in node order."""
        from zoo.families.inr_model import siren_activations

        values = siren_activations(self.architecture, [t.double() for t in tensors], self.probes.double())
        return torch.cat([project(v.to(self.probes.dtype).transpose(1, 2))  # (B, units, K) -> (B, units, d)
                          for project, v in zip(self.project, values)], dim=1)


class WeightHead(nn.Module):
    """Node features (B, N, d_node) and forward-edge features (B, E_f, d_edge) -> a weight delta.

    The delta lies in the layout's space (`NeuralGraphLayout.to_weights`). Each node's bias and each edge's
    kernel vector come from an MLP d -> d -> out with a ReLU. These are the authors' `proj_node` /
    `proj_edge` of their INR editing models (`dense_gnn.GNNParams` and
    `dense_relational_transformer.RelationalTransformerParams`). The MLP acts per node and per edge alike,
    so it commutes with relabelling hidden neurons. The input neurons' values are dropped, since they carry
    no bias.
    """

    def __init__(self, layout, node_dim: int, edge_dim: int):
        super().__init__()
        self.layout = layout
        height, width = layout.kernel_size
        self.node = nn.Sequential(nn.Linear(node_dim, node_dim), nn.ReLU(), nn.Linear(node_dim, 1))
        self.edge = nn.Sequential(nn.Linear(edge_dim, edge_dim), nn.ReLU(), nn.Linear(edge_dim, height * width))

    def forward(self, space, nodes: torch.Tensor, edges: torch.Tensor):
        return self.layout.to_weights(space, self.node(nodes).squeeze(-1), self.edge(edges))
