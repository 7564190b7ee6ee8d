"""Checks every registered NFN model gets: shapes, determinism, gradients, batching, errors."""

from __future__ import annotations

import pytest
import torch

from nfn_models import create_model, list_models
from zoo.weightspace import TensorSpec, WeightSpace

MODELS = list_models()


def seeded_model(name: str, space: WeightSpace, seed: int, **overrides):
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return create_model(name, space, **overrides)


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("out_features", [1, 3])
def test_output_shape(name, out_features, cnn_space, batch):
    model = create_model(name, cnn_space, out_features=out_features)
    assert model(batch).shape == (len(batch), out_features)
    model.eval()
    assert model(batch).shape == (len(batch), out_features)


@pytest.mark.parametrize("name", MODELS)
def test_deterministic_given_a_seed(name, cnn_space, batch):
    first, second, other = (seeded_model(name, cnn_space, seed) for seed in (0, 0, 1))
    for model in (first, second, other):
        model.eval()
    with torch.no_grad():
        assert torch.equal(first(batch), second(batch))
        assert not torch.allclose(first(batch), other(batch))


@pytest.mark.parametrize("name", MODELS)
def test_gradients_reach_every_parameter(name, cnn_space, batch):
    model = seeded_model(name, cnn_space, 0)  # seeded: a random draw may leave a ReLU path dead
    model(batch).pow(2).mean().backward()
    for parameter_name, parameter in model.named_parameters():
        assert parameter.grad is not None, parameter_name
        assert torch.isfinite(parameter.grad).all(), parameter_name
        assert parameter.grad.abs().sum() > 0, parameter_name


@pytest.mark.parametrize("name", MODELS)
def test_eval_predictions_do_not_depend_on_the_batching(name, cnn_space, random_batch):
    model = create_model(name, cnn_space)
    model.train()
    for seed in range(3):  # accumulate normalization statistics as training would
        model(random_batch(cnn_space, 16, seed))
    model.eval()
    batch = random_batch(cnn_space, 10, seed=7)
    with torch.no_grad():
        whole = model(batch)
        pieces = torch.cat([model(batch[i:i + 3]) for i in range(0, 10, 3)])
    torch.testing.assert_close(whole, pieces, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", MODELS)
def test_a_batch_of_another_architecture_is_a_clear_error(name, cnn_space, random_batch):
    model = create_model(name, cnn_space)
    other = WeightSpace((TensorSpec("fc.weight", (4, 3), "weight", 0), TensorSpec("fc.bias", (4,), "bias", 0)))
    with pytest.raises(ValueError, match="architecture differs"):
        model(random_batch(other, 4, seed=0))


@pytest.mark.parametrize("name", MODELS)
def test_creating_a_model_records_its_config(name, cnn_space):
    model = create_model(name, cnn_space, out_features=2)
    assert model.config.out_features == 2
    assert model.weight_space == cnn_space
