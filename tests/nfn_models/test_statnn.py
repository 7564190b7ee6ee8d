"""STATNN (Unterthiner et al. 2020): its 7 statistics per tensor, and their invariances."""

from __future__ import annotations

import numpy as np
import torch

from nfn_models import create_model
from nfn_models.statnn import STATISTICS, quantiles, tensor_statistics
from zoo.weightspace import WeightBatch


def numpy_statistics(batch: WeightBatch) -> np.ndarray:
    rows = []
    for member in range(len(batch)):
        features = []
        for tensor in batch.tensors:
            values = tensor[member].double().numpy().ravel()
            features += [values.mean(), values.var(), *np.quantile(values, [0.0, 0.25, 0.5, 0.75, 1.0])]
        rows.append(features)
    return np.array(rows)


def permute_within_tensors(batch: WeightBatch, seed: int) -> WeightBatch:
    """Shuffles the entries of every tensor of every member independently."""
    generator = torch.Generator().manual_seed(seed)
    tensors = []
    for tensor in batch.tensors:
        flat = tensor.reshape(len(batch), -1)
        order = torch.stack([torch.randperm(flat.shape[1], generator=generator) for _ in range(len(batch))])
        tensors.append(torch.gather(flat, 1, order).reshape(tensor.shape))
    return WeightBatch(batch.space, tuple(tensors))


def test_seven_statistics_per_tensor(cnn_space, batch):
    assert STATISTICS == ("mean", "variance", "q0", "q25", "q50", "q75", "q100")
    assert tensor_statistics(batch).shape == (len(batch), 7 * len(cnn_space.tensors))


def test_statistics_equal_a_direct_numpy_computation(batch):
    np.testing.assert_allclose(tensor_statistics(batch).double().numpy(), numpy_statistics(batch),
                               rtol=1e-5, atol=1e-6)


def test_quantiles_interpolate_like_numpy():
    values = torch.tensor([[3.0, 1.0, 4.0, 1.5, 9.0, 2.0]])
    qs = (0.0, 0.1, 0.25, 0.5, 0.9, 1.0)
    np.testing.assert_allclose(quantiles(values, qs).numpy()[0], np.quantile(values.numpy()[0], qs), rtol=1e-6)


def test_statnn_is_invariant_to_permuting_entries_within_a_tensor(cnn_space, batch):
    model = create_model("statnn", cnn_space)
    model.eval()
    permuted = permute_within_tensors(batch, seed=1)
    assert not torch.equal(permuted.tensors[2], batch.tensors[2])  # the permutation moved entries
    with torch.no_grad():
        torch.testing.assert_close(model(permuted), model(batch), rtol=1e-5, atol=1e-5)


def test_negative_control_the_mlp_is_not_invariant(cnn_space, batch):
    model = create_model("mlp", cnn_space)
    model.eval()
    with torch.no_grad():
        difference = (model(permute_within_tensors(batch, seed=1)) - model(batch)).abs().max()
    assert difference > 1e-3
