"""Fixtures for NFN model tests: the Small CNN Zoo weight space and random batches of it."""

from __future__ import annotations

import pytest
import torch

from zoo.weightspace import WeightBatch, WeightSpace

CNN_SHAPES = {
    "conv1.weight": (16, 1, 3, 3), "conv1.bias": (16,),
    "conv2.weight": (16, 16, 3, 3), "conv2.bias": (16,),
    "conv3.weight": (16, 16, 3, 3), "conv3.bias": (16,),
    "dense.weight": (10, 16), "dense.bias": (10,),
}


@pytest.fixture(scope="session")
def cnn_space() -> WeightSpace:
    """The Small CNN Zoo member's weight space (Unterthiner et al. 2020): 4,970 parameters."""
    return WeightSpace.from_state_dict({name: torch.zeros(shape) for name, shape in CNN_SHAPES.items()})


def _random_batch(space: WeightSpace, size: int, seed: int) -> WeightBatch:
    generator = torch.Generator().manual_seed(seed)
    return WeightBatch(space, tuple(torch.randn(size, *t.shape, generator=generator) for t in space.tensors))


@pytest.fixture
def random_batch():
    """A factory: random_batch(space, size, seed) -> a WeightBatch of standard normal weights."""
    return _random_batch


@pytest.fixture
def batch(cnn_space: WeightSpace) -> WeightBatch:
    return _random_batch(cnn_space, 12, seed=0)
