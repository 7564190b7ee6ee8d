"""The device population training runs on: a GPU when torch sees one, else the CPU.

`NFNZOO_DEVICE` (``auto``, ``cpu``, ``cuda``, ``cuda:1``, ...) or an explicit argument
overrides the choice. The population trainers follow their data: `to_device` moves a task's
example sets once, and parameters, optimizer state and per-member index tensors are created
where the data lives. Per-member random draws (batch orders, crops, dropout masks) always
come from CPU generators, so a run draws the same numbers whichever device trains it.
Checkpoints return to the CPU.
"""

from __future__ import annotations

import dataclasses
import os

import torch

DEVICE_VARIABLE = "NFNZOO_DEVICE"


def training_device(requested: str | None = None) -> torch.device:
    """`requested`, else $NFNZOO_DEVICE, else ``auto``: CUDA when available, otherwise the CPU."""
    name = requested or os.environ.get(DEVICE_VARIABLE) or "auto"
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise ValueError(f"unknown device {name!r} (from {DEVICE_VARIABLE} or --device): {error}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {name!r} requested, but torch sees no CUDA device here")
    return device


def to_device(data, device: torch.device | str):
    """A copy of a data dataclass (TaskData, ImageData, TextData) with every tensor on `device`."""
    if isinstance(data, torch.Tensor):
        return data.to(device)
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return dataclasses.replace(data, **{f.name: to_device(getattr(data, f.name), device)
                                            for f in dataclasses.fields(data) if f.init})
    return data


def exact_float32() -> None:
    """Turns off TF32 in CUDA matrix products and convolutions (cuDNN's default is on), so that
    a population trains in float32 on a GPU as on the CPU. A no-op without CUDA."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
