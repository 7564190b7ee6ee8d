"""Checks every registered NFN model gets: shapes, determinism, gradients, batching, errors.

Gradient-trained models run on a weight space they read (the Small CNN for feedforward models,
a small transformer for Transformer-NFN); fitted models (the tree ensembles) get the same
checks after a fit, plus their own (an unfitted model and a second output are refused).
"""

from __future__ import annotations

import pytest
import torch

from nfn_models import create_model, trained_by
from nfn_models.registry import MODELS as REGISTRY
from zoo.families import get_family
from zoo.weightspace import TensorSpec, WeightBatch, WeightSpace

MODELS = [name for name in REGISTRY.builtin_names() if trained_by(REGISTRY.get(name)) == "gradient"]
FITTED = [name for name in REGISTRY.builtin_names() if trained_by(REGISTRY.get(name)) == "fit"]
TRANSFORMER = get_family("transformer").weight_space({"d_model": 8, "num_blocks": 2, "num_heads": 2, "head_dim": 4,
                                                      "mlp_dim": 6})
FAST_FIT = {"xgboost": {"max_rounds": 3, "min_child_weight": 1.0},
            "lightgbm": {"max_rounds": 4, "early_stopping_rounds": 2, "min_data_in_leaf": 2, "min_gain_to_split": 0.0},
            "random_forest": {"max_trees": 4, "trees_per_step": 2, "early_stopping_trees": 2, "min_samples_leaf": 2}}
# gradient models whose paper widths cost seconds per forward on a CPU, checked narrower here (their
# defaults run once in their own tests): NG-T attends over all 59 x 59 node pairs of a CNN
NARROW = {"ng_t": {"hidden_dim": 8, "fourier_features": 16}, "scalegmn": {"hidden_dim": 8},
          "ng_gnn": {"hidden_dim": 16, "fourier_features": 16}}


@pytest.fixture
def space(request, cnn_space) -> WeightSpace:
    """A weight space the test's model (its `name` parameter) reads: the Small CNN's, or a transformer's."""
    kinds = getattr(REGISTRY.get(request.node.callspec.params["name"]), "weight_spaces", ("feedforward",))
    return cnn_space if "feedforward" in kinds else TRANSFORMER


@pytest.fixture
def batch(space, random_batch):
    return random_batch(space, 12, seed=0)


def seeded_model(name: str, space: WeightSpace, seed: int, **overrides):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return create_model(name, space, **{**NARROW.get(name, {}), **overrides})


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("out_features", [1, 3])
def test_output_shape(name, out_features, space, batch):
    model = create_model(name, space, out_features=out_features, **NARROW.get(name, {}))
    assert model(batch).shape == (len(batch), out_features)
    model.eval()
    assert model(batch).shape == (len(batch), out_features)


@pytest.mark.parametrize("name", MODELS)
def test_deterministic_given_a_seed(name, space, batch):
    first, second, other = (seeded_model(name, space, seed) for seed in (0, 0, 1))
    for model in (first, second, other):
        model.eval()
    with torch.no_grad():
        assert torch.equal(first(batch), second(batch))
        assert not torch.allclose(first(batch), other(batch))


@pytest.mark.parametrize("name", MODELS)
def test_gradients_reach_every_parameter(name, space, batch):
    model = seeded_model(name, space, 0)  # seeded: a random draw may leave a ReLU path dead
    model(batch).pow(2).mean().backward()
    for parameter_name, parameter in model.named_parameters():
        assert parameter.grad is not None, parameter_name
        assert torch.isfinite(parameter.grad).all(), parameter_name
        assert parameter.grad.abs().sum() > 0, parameter_name


@pytest.mark.parametrize("name", MODELS)
def test_eval_predictions_do_not_depend_on_the_batching(name, space, random_batch):
    model = create_model(name, space, **NARROW.get(name, {}))
    model.train()
    for seed in range(3):  # accumulate normalization statistics as training would
        model(random_batch(space, 16, seed))
    model.eval()
    batch = random_batch(space, 10, seed=7)
    with torch.no_grad():
        whole = model(batch)
        pieces = torch.cat([model(batch[i:i + 3]) for i in range(0, 10, 3)])
    torch.testing.assert_close(whole, pieces, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", MODELS)
def test_a_batch_of_another_architecture_is_a_clear_error(name, space, random_batch):
    model = create_model(name, space)
    other = WeightSpace((TensorSpec("fc.weight", (4, 3), "weight", 0), TensorSpec("fc.bias", (4,), "bias", 0)))
    with pytest.raises(ValueError, match="architecture differs"):
        model(random_batch(other, 4, seed=0))


@pytest.mark.parametrize("name", MODELS)
def test_creating_a_model_records_its_config(name, space):
    model = create_model(name, space, out_features=2)
    assert model.config.out_features == 2
    assert model.weight_space == space


def _fitted(name: str, space: WeightSpace, seed: int = 0):
    model = create_model(name, space, **FAST_FIT[name])
    generator = torch.Generator().manual_seed(seed)
    rows = WeightBatch(space, tuple(torch.randn(40, *t.shape, generator=generator) for t in space.tensors))
    targets = torch.sigmoid(rows.flatten()[:, :5].sum(1))  # a function of the weights, so the trees split
    model.fit(rows[:30], targets[:30], rows[30:], targets[30:], seed)
    return model


@pytest.mark.parametrize("name", FITTED)
def test_a_fitted_model_predicts_one_number_per_row_reproducibly(name, cnn_space, random_batch):
    first, second = _fitted(name, cnn_space), _fitted(name, cnn_space)
    batch = random_batch(cnn_space, 10, seed=7)
    with torch.no_grad():
        whole = first(batch)
        assert whole.shape == (10, 1) and whole.dtype == torch.float32
        assert torch.equal(whole, second(batch))
        torch.testing.assert_close(torch.cat([first(batch[i:i + 3]) for i in range(0, 10, 3)]), whole)
    assert first.num_parameters() > 0


@pytest.mark.parametrize("name", FITTED)
def test_a_fitted_model_refuses_what_it_cannot_do(name, cnn_space, random_batch):
    with pytest.raises(RuntimeError, match="is not fitted; call fit"):
        create_model(name, cnn_space)(random_batch(cnn_space, 2, seed=0))
    with pytest.raises(Exception, match="predict one scalar"):
        create_model(name, cnn_space, out_features=3)
    other = WeightSpace((TensorSpec("fc.weight", (4, 3), "weight", 0), TensorSpec("fc.bias", (4,), "bias", 0)))
    with pytest.raises(ValueError, match="architecture differs"):
        _fitted(name, cnn_space)(random_batch(other, 4, seed=0))
