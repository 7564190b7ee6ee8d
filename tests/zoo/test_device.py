"""Choosing the training device, and moving a task's data onto it."""

from __future__ import annotations

import pytest
import torch

from zoo.data.images import ImageData, TaskData
from zoo.training.device import DEVICE_VARIABLE, to_device, training_device


def test_auto_picks_cuda_only_when_torch_sees_it(monkeypatch):
    monkeypatch.delenv(DEVICE_VARIABLE, raising=False)
    assert training_device().type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert training_device("auto") == training_device()


def test_explicit_choice_and_environment(monkeypatch):
    monkeypatch.setenv(DEVICE_VARIABLE, "cpu")
    assert training_device() == torch.device("cpu")
    assert training_device("cpu") == torch.device("cpu")  # an argument beats the environment
    monkeypatch.setenv(DEVICE_VARIABLE, "tpu-ish")
    with pytest.raises(ValueError, match="unknown device 'tpu-ish'"):
        training_device()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="no CUDA device"):
        training_device("cuda")


def test_to_device_copies_every_tensor_and_keeps_the_rest():
    def images(n: int, seed: int) -> ImageData:
        g = torch.Generator().manual_seed(seed)
        return ImageData(torch.rand(n, 1, 4, 4, generator=g), torch.randint(0, 3, (n,), generator=g))

    data = TaskData(images(5, 0), images(2, 1), images(3, 2), num_classes=3)
    target = "cuda" if torch.cuda.is_available() else "meta"  # meta: a real move that keeps no values
    moved = to_device(data, target)
    assert isinstance(moved, TaskData) and moved.num_classes == 3 and moved is not data
    for before, after in ((data.train, moved.train), (data.validation, moved.validation), (data.test, moved.test)):
        for name in ("x", "y"):
            tensor, placed = getattr(before, name), getattr(after, name)
            assert placed.device.type == target and placed.shape == tensor.shape and placed.dtype == tensor.dtype
            if target == "cuda":
                assert torch.equal(placed.cpu(), tensor)
    back = to_device(data, "cpu")
    assert torch.equal(back.train.x, data.train.x) and torch.equal(back.test.y, data.test.y)
