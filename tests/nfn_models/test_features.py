"""The feedforward weight-space feature container and network description."""

from __future__ import annotations

import pytest
import torch

from nfn_models.features import FeatureActivation, NetworkDescription, WeightSpaceFeatures
from zoo.families import create_family
from zoo.weightspace import TensorSpec, WeightSpace


def test_the_small_cnn_description(cnn_space):
    description = NetworkDescription.from_weight_space(cnn_space)
    assert description.unit_sizes == (1, 16, 16, 16, 10)
    assert [layer.kernel for layer in description.layers] == [(3, 3), (3, 3), (3, 3), ()]
    assert description.filter_sizes == (9, 9, 9, 1)
    assert description.permuted_axes == (1, 2, 3)  # conv3's outputs are the dense layer's inputs (after GAP)


def test_the_siren_description():
    description = NetworkDescription.from_weight_space(create_family("inr").weight_space({}))
    assert description.unit_sizes == (2, 32, 32, 1)
    assert description.filter_sizes == (1, 1, 1)


def test_a_weight_batch_round_trips(cnn_space, batch):
    features = WeightSpaceFeatures.from_weight_batch(batch)
    assert features.channels == 1 and features.batch_size == len(batch)
    assert features.weights[0].shape == (len(batch), 1, 16, 1, 3, 3)
    assert features.biases[3].shape == (len(batch), 1, 10)
    back = features.to_weight_batch(cnn_space)
    assert all(torch.equal(a, b) for a, b in zip(back.tensors, batch.tensors))


def test_shaping_folds_filter_positions_into_channels(batch):
    features = WeightSpaceFeatures.from_weight_batch(batch)
    features = features.map(lambda t: torch.cat([t, 2 * t], dim=1))  # two channels
    shaped = features.shaped()
    assert shaped[1].shape == (len(batch), 2 * 9, 16, 16) and shaped[3].shape == (len(batch), 2, 10, 16)
    # channel c * 9 + (row * 3 + column) is filter position (row, column) of channel c
    torch.testing.assert_close(shaped[1][:, 9 + 5], features.weights[1][:, 1, :, :, 1, 2])
    again = WeightSpaceFeatures.from_shaped(features.description, shaped, features.biases)
    assert all(torch.equal(a, b) for a, b in zip(again.weights, features.weights))


def test_features_are_immutable_and_checked(batch):
    features = WeightSpaceFeatures.from_weight_batch(batch)
    with pytest.raises(AttributeError):
        features.weights = ()
    with pytest.raises(ValueError, match="expected"):
        WeightSpaceFeatures(features.description, features.weights[::-1], features.biases)
    two = features.map(lambda t: t.expand(-1, 2, *t.shape[2:]))
    with pytest.raises(ValueError, match="one-channel"):
        two.to_weight_batch(batch.space)


def test_activation_and_sum_apply_to_every_tensor(batch):
    features = WeightSpaceFeatures.from_weight_batch(batch)
    relu = FeatureActivation(torch.nn.ReLU())(features)
    assert all((t >= 0).all() for t in (*relu.weights, *relu.biases))
    doubled = features + features
    torch.testing.assert_close(doubled.biases[0], 2 * features.biases[0])


def test_a_non_feedforward_space_is_a_clear_error():
    broken = WeightSpace((TensorSpec("a.weight", (4, 3), "weight", 0), TensorSpec("a.bias", (4,), "bias", 0),
                          TensorSpec("b.weight", (2, 5), "weight", 1), TensorSpec("b.bias", (2,), "bias", 1)))
    with pytest.raises(ValueError, match="feedforward chain"):
        NetworkDescription.from_weight_space(broken)
    no_bias = WeightSpace((TensorSpec("a.weight", (4, 3), "weight", 0),))
    with pytest.raises(ValueError, match="one weight and one bias"):
        NetworkDescription.from_weight_space(no_bias)
