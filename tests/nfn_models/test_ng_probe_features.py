"""NG-GNN and NG-T with probe features (`nfn_models.layers.neural_graph.INRProbeFeatures`).

Each neuron's node feature is its values on the learned probes, as the member's own function
computes them; a hidden-neuron permutation permutes those values with the nodes, so both models
stay invariant to it (checked with `benchmarks.check_model`'s random group elements), and a probe
feature misassigned to the nodes breaks that (the negative control). The members' SIREN
architecture comes from the config, which the harness fills from the zoo.
"""

from __future__ import annotations

import pytest
import torch

from benchmarks.check_model import check_invariance
from benchmarks.protocol import ARCHITECTURES_ATTR, architecture_overrides
from nfn_models import create_model, model_config
from nfn_models.layers.neural_graph import INRProbeFeatures
from zoo.families.inr_model import INRArchitecture, Siren, layer_names
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightBatch

ARCH = INRArchitecture(in_features=2, hidden_features=5, num_sine_layers=2, out_features=1, output_offset=0.5,
                       coordinates="column_row")
PROBES = {"probe_features": 6}


def _members(count: int, seed: int) -> tuple[WeightBatch, list[Siren]]:
    from zoo.families import create_family

    space = create_family("inr").weight_space(ARCH.__dict__)
    generator = torch.Generator().manual_seed(seed)
    weights = WeightBatch(space, tuple(0.3 * torch.randn(count, *t.shape, generator=generator)
                                       for t in space.tensors))
    modules = []
    for b in range(count):
        module = Siren(ARCH)
        module.load_state_dict({name: t[b] for name, t in zip(space.names, weights.tensors)})
        modules.append(module.double())
    return weights, modules


def test_each_nodes_feature_is_its_neurons_values_on_the_probes():
    weights, modules = _members(3, seed=0)
    features = INRProbeFeatures(ARCH, num_probes=7, dim=4).double()
    for project in features.project:  # identity-like maps: the node feature shows the raw values
        project[0].weight.data = torch.eye(4, 7, dtype=torch.float64)
        project[0].bias.data.zero_()
        project[1] = torch.nn.Identity()
    nodes = features(weights.tensors)  # (B, 2 + 5 + 5 + 1, 4): the first 4 probes' values per node
    assert nodes.shape == (3, 13, 4)
    probes = features.probes.detach()
    for b, module in enumerate(modules):
        h = probes.flip(-1)  # column_row: the member reads (column, row)
        expected = [h]
        layers = [getattr(module, name) for name in layer_names(ARCH)]
        for layer in layers[:-1]:
            h = torch.sin(30.0 * layer(h))
            expected.append(h)
        expected.append(layers[-1](h) + 0.5)
        assert torch.allclose(nodes[b], torch.cat(expected, dim=1).T[:, :4], atol=1e-12)
        assert torch.allclose(expected[-1].squeeze(-1), module(probes).squeeze(-1), atol=1e-12)


@pytest.mark.parametrize("name", ["ng_gnn", "ng_t"])
def test_probe_features_keep_the_permutation_claim_and_misassigned_ones_break_it(name, monkeypatch):
    check = check_invariance(name, "siren", "permutation", overrides=PROBES)
    assert check.claimed and not check.false_claim, check
    assert check_invariance(name, "siren", "sign", overrides=PROBES).deviation > 1e-4  # sine flips: not claimed

    # negative control: hidden neurons' features in a fixed order, not following their neurons
    forward = INRProbeFeatures.forward
    monkeypatch.setattr(INRProbeFeatures, "forward", lambda self, tensors: forward(self, tensors).flip(1))
    from benchmarks import check_model

    check_model._built.cache_clear()
    broken = check_invariance(name, "siren", "permutation", overrides=PROBES)
    check_model._built.cache_clear()
    assert broken.false_claim, broken


@pytest.mark.parametrize("name", ["ng_gnn", "ng_t"])
def test_probe_features_change_the_prediction_and_train_their_probes(name):
    weights, _ = _members(4, seed=1)
    small = {"hidden_dim": 8, "fourier_features": 8, "num_layers": 2, **({"num_heads": 2} if name == "ng_t" else {})}
    config = {**small, **{k: v for k, v in ARCH.__dict__.items() if k in ("coordinates", "output_offset")}}
    torch.manual_seed(0)
    plain = create_model(name, weights.space, **config)
    torch.manual_seed(0)
    probed = create_model(name, weights.space, **config, probe_features=6)
    assert probed.probes is not None and plain.probes is None
    assert not torch.allclose(plain(weights), probed(weights))
    probed(weights).sum().backward()
    assert probed.probes.probes.grad is not None and probed.probes.probes.grad.abs().sum() > 0


def test_the_presets_and_the_clear_errors():
    for name in ("ng_gnn", "ng_t"):
        assert model_config(name, preset="inr-classification-probes").probe_features == 64  # their *_probe_64.sh
        assert model_config(name, preset="inr-classification").probe_features == 0
        with pytest.raises(ValueError, match="probe_features=4 runs the members as SIRENs .* set probe_features=0"):
            create_model(name, _cnn_space(), probe_features=4)
        with pytest.raises(SchemaError, match="probe_features"):
            create_model(name, _members(1, 0)[0].space, probe_features=-1)


def test_the_harness_fills_the_members_architecture_from_the_zoo():
    import pandas

    from nfn_models.registry import MODELS

    metadata = pandas.DataFrame({"architecture": ["a"]})
    metadata.attrs[ARCHITECTURES_ATTR] = {"a": {"family": "inr", "architecture": dict(ARCH.__dict__)}}
    filled = architecture_overrides(MODELS.get("ng_t"), {"probe_features": 8}, metadata, "test")
    assert filled == {"probe_features": 8, "first_omega_0": 30.0, "hidden_omega_0": 30.0,
                      "coordinates": "column_row", "output_offset": 0.5}
    cnn = pandas.DataFrame({"architecture": ["c"]})
    cnn.attrs[ARCHITECTURES_ATTR] = {"c": {"family": "cnn", "architecture": {"channels": 16}}}
    assert architecture_overrides(MODELS.get("ng_t"), {}, cnn, "test") == {}  # a CNN zoo has none of them


def _cnn_space():
    from zoo.families import create_family

    return create_family("cnn").weight_space({"in_channels": 1, "channels": 4, "num_conv_layers": 2,
                                              "kernel_size": 3, "num_classes": 10})
