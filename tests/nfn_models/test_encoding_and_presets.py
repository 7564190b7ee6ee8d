"""Input encodings against the authors' `nfn` package, and the models' named presets."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from nfn_models import claimed_symmetries, create_model, list_presets, model_config, trained_by
from nfn_models.registry import MODELS
from nfn_models.features import NetworkDescription, WeightSpaceFeatures
from nfn_models.layers.encoding import FourierFeatures, IOPositionEncoding
from zoo.families import create_family
from zoo.validation.schema import SchemaError
from zoo.weightspace import WeightBatch

SPACES = {"siren": ("inr", {}), "cnn": ("cnn", {})}


def _space(name: str):
    family, architecture = SPACES[name]
    return create_family(family).weight_space(architecture)


def _features(space_name: str, batch: int, channels: int, seed: int) -> WeightSpaceFeatures:
    description = NetworkDescription.from_weight_space(_space(space_name))
    generator = torch.Generator().manual_seed(seed)
    weights = tuple(torch.randn(batch, channels, layer.n_out, layer.n_in, *layer.kernel, generator=generator)
                    for layer in description.layers)
    biases = tuple(torch.randn(batch, channels, layer.n_out, generator=generator) for layer in description.layers)
    return WeightSpaceFeatures(description, weights, biases)


@pytest.mark.parametrize("space_name", sorted(SPACES))
@pytest.mark.parametrize("max_freq, num_bands", [(10.0, 6), (3.0, 3)])
def test_io_position_encoding_matches_the_nfn_package(space_name, max_freq, num_bands):
    nfn_common = pytest.importorskip("nfn.common", reason="the nfn-reference extra is not installed")
    nfn_layers = pytest.importorskip("nfn.layers")
    x = _features(space_name, 2, 3, seed=0)
    ours = IOPositionEncoding(x.description, max_freq, num_bands)(x)
    theirs_in = nfn_common.WeightSpaceFeatures(list(x.weights), list(x.biases))
    spec = nfn_common.network_spec_from_wsfeat(theirs_in)
    theirs = nfn_layers.IOSinusoidalEncoding(spec, max_freq=max_freq, num_bands=num_bands)(theirs_in)
    assert ours.channels == 3 + 2 * num_bands + 1
    for a, b in zip((*ours.weights, *ours.biases), (*theirs.weights, *theirs.biases)):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("space_name", sorted(SPACES))
def test_fourier_features_match_the_nfn_package(space_name):
    nfn_common = pytest.importorskip("nfn.common", reason="the nfn-reference extra is not installed")
    nfn_layers = pytest.importorskip("nfn.layers")
    x = _features(space_name, 2, 2, seed=1)
    # in float64: the sines of arguments up to ~100 differ by ~1e-5 in float32 between two product orders
    x = WeightSpaceFeatures(x.description, tuple(w.double() for w in x.weights), tuple(b.double() for b in x.biases))
    ours = FourierFeatures(2, mapping_size=8, scale=3.0).double()
    theirs_in = nfn_common.WeightSpaceFeatures(list(x.weights), list(x.biases))
    theirs = nfn_layers.GaussianFourierFeatureTransform(nfn_common.network_spec_from_wsfeat(theirs_in), 2,
                                                         mapping_size=8, scale=3.0).double()
    theirs._B.copy_(ours.projection)
    out, expected = ours(x), theirs(theirs_in)
    for a, b in zip((*out.weights, *out.biases), (*expected.weights, *expected.biases)):
        assert a.dtype == torch.float64
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-10)


def test_the_io_encoding_depends_on_the_input_and_output_order_only():
    """Hidden permutations commute with it; permuting the (fixed) input units does not."""
    x = _features("siren", 1, 1, seed=2)
    encode = IOPositionEncoding(x.description, 3.0, 3)
    out = encode(x)
    hidden = torch.randperm(x.description.layers[0].n_out, generator=torch.Generator().manual_seed(0))
    w0, b0, w1 = x.weights[0][:, :, hidden], x.biases[0][:, :, hidden], x.weights[1][:, :, :, hidden]
    moved = encode(WeightSpaceFeatures(x.description, (w0, w1, *x.weights[2:]), (b0, *x.biases[1:])))
    torch.testing.assert_close(moved.weights[0], out.weights[0][:, :, hidden])
    torch.testing.assert_close(moved.weights[1], out.weights[1][:, :, :, hidden])
    flipped = x.weights[0].flip(-1)  # the 2 input units swapped
    swapped = encode(WeightSpaceFeatures(x.description, (flipped, *x.weights[1:]), x.biases))
    assert not torch.allclose(swapped.weights[0][:, 1:], out.weights[0][:, 1:].flip(-1))


def _classifiers() -> list[str]:
    """The models INR classification can use: gradient-trained readers of feedforward weight spaces
    (the tree ensembles regress one scalar; Transformer-NFN reads transformers)."""
    return [name for name in MODELS.builtin_names() if trained_by(MODELS.get(name)) == "gradient"
            and "feedforward" in getattr(MODELS.get(name), "weight_spaces", ("feedforward",))]


def test_every_model_has_its_presets():
    for name in MODELS.builtin_names():  # the shipped models (a plugin registered by another test is not ours)
        assert "generalization" in list_presets(name), name
        assert model_config(name, preset="generalization") == model_config(name)
    for name in _classifiers():
        assert "inr-classification" in list_presets(name), name
    assert {"mlp", "statnn", "np", "hnp", "monomial_nfn", "magep_nfn"} <= set(_classifiers())


@pytest.mark.parametrize("name", _classifiers())
def test_the_inr_classification_presets_build_and_keep_their_claims_on_sirens(name):
    space = _space("siren")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = create_model(name, space, preset="inr-classification").eval()
    assert model.config.out_features == 10
    symmetry = dataclasses.replace(create_family("inr").symmetry({}, {}), max_log_scale=math.log(1e3))
    generator = torch.Generator().manual_seed(0)
    weights = WeightBatch(space, tuple(torch.randn(3, *t.shape, generator=generator) for t in space.tensors))
    with torch.no_grad():
        output = model(weights)
        assert output.shape == (3, 10)
        for group in claimed_symmetries(model):
            moved = dataclasses.replace(symmetry, mode=group)
            g = moved.sample(torch.Generator().manual_seed(1), batch_size=3)
            torch.testing.assert_close(model(moved.act(g, weights)), output, rtol=1e-5, atol=1e-5)


def test_the_papers_inr_settings():
    np_config = model_config("np", preset="inr-classification")
    hnp_config = model_config("hnp", preset="inr-classification")
    assert np_config.channels == hnp_config.channels == (256, 256, 256)
    assert np_config.io_encoding and not hnp_config.io_encoding
    assert np_config.fourier_features == hnp_config.fourier_features == 128
    magep = model_config("magep_nfn", preset="inr-classification")
    assert (magep.group, magep.channels, magep.hidden_sizes) == ("sign", (128, 128, 128, 128), (1000, 1000))
    assert model_config("monomial_nfn", preset="inr-classification").group == "sign"


def test_the_papers_inr_editing_settings_output_weights():
    for name in ("np", "hnp", "monomial_nfn", "magep_nfn", "mlp"):
        assert model_config(name, preset="inr-editing").output == "weights", name
    np_config, hnp_config = model_config("np", preset="inr-editing"), model_config("hnp", preset="inr-editing")
    assert np_config.channels == hnp_config.channels == (128, 128, 128)
    assert np_config.fourier_features == 128 and np_config.fourier_scale == 3.0
    assert np_config.io_encoding and (np_config.io_max_freq, np_config.io_num_bands) == (3.0, 3)
    assert not hnp_config.io_encoding
    assert model_config("mlp", preset="inr-editing").hidden_sizes == (1000, 1000, 1000)
    monomial = model_config("monomial_nfn", preset="inr-editing")
    assert monomial.group == model_config("magep_nfn", preset="inr-editing").group == "sign"


def test_the_graph_metanetworks_inr_editing_settings_are_the_authors():
    for name in ("ng_gnn", "ng_t", "scalegmn"):
        for preset in ("inr-editing", "inr-editing-budget"):
            assert model_config(name, preset=preset).output == "weights", (name, preset)
    gnn = model_config("ng_gnn", preset="inr-editing")  # mnist_dilation_gnn.sh
    assert (gnn.hidden_dim, gnn.num_layers, gnn.reverse_edges, gnn.dropout) == (128, 4, True, 0.2)
    rt = model_config("ng_t", preset="inr-editing")  # style_editing's rtransformer.yaml
    assert (rt.widths["hidden_dim"], rt.widths["edge_dim"], rt.widths["attention_dim"], rt.widths["node_mlp_dim"],
            rt.widths["edge_mlp_dim"]) == (64, 32, 128, 128, 64)
    assert (rt.num_heads, rt.dropout, rt.fourier_scale) == (4, 0.0, 3.0)
    sgmn = model_config("scalegmn", preset="inr-editing")  # mnist_editing/scalegmn.yml
    assert (sgmn.mode, sgmn.hidden_dim, sgmn.num_layers, sgmn.skip_connections, sgmn.edge_positions, sgmn.io_mlp,
            sgmn.dropout) == ("sign", 128, 10, True, False, True, 0.1)


def test_overrides_apply_on_top_of_a_preset_and_an_unknown_preset_lists_the_known():
    config = model_config("np", preset="inr-classification", dropout=0.0)
    assert config.dropout == 0.0 and config.channels == (256, 256, 256)
    with pytest.raises(SchemaError, match=r"model 'np': preset: expected one of \['generalization', "
                                          r"'inr-classification', 'inr-classification-budget', 'inr-editing', "
                                          r"'inr-editing-budget'\], got 'nope'"):
        model_config("np", preset="nope")


def test_a_preset_reaches_the_model_through_set():
    from benchmarks.command_arguments import split_overrides

    model, _ = split_overrides(["model.preset=inr-classification", "model.dropout=0.2"], "np", "generalization")
    assert model == {"preset": "inr-classification", "dropout": 0.2}
    assert model_config("np", **model).channels == (256, 256, 256)
