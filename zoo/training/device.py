"""The device population training runs on: a GPU when torch sees one, else the CPU.

`NFNZOO_DEVICE` (``auto``, ``cpu``, ``cuda``, ``cuda:1``, ...) or an explicit argument
overrides the choice.
The population trainers follow their data.
`to_device` moves a task's example sets once.
Parameters, optimizer state and per-member index tensors are created where the data lives.
Per-member random draws (batch orders, crops, dropout masks) always come from CPU generators.
So a run draws the same numbers whichever device trains it.
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


def portable_device_problem(spec_name: str, requested: str | None, gpus_visible: bool) -> str | None:
    """Why a portable spec may not train on `requested` (None: $NFNZOO_DEVICE, else ``auto``), or None.

    The portable mode pins the CPU's instruction sets (`zoo.training.reproducibility`).
    A GPU's bits are its own, so every trial on one would fail its own check.
    ``auto`` takes a GPU when `gpus_visible`, so there the mode needs ``--device cpu``.
    This is said before Ray starts.
    """
    name = requested or os.environ.get(DEVICE_VARIABLE) or "auto"
    if name.split(":")[0] != "cuda" and (name != "auto" or not gpus_visible):
        return None  # the CPU, or a name the device checks refuse as unknown
    what = "takes the GPU here" if name == "auto" else "is a GPU"
    return (f"{spec_name}: the portable mode trains on the CPU only, and device {name!r} (from --device or "
            f"{DEVICE_VARIABLE}) {what}: add --device cpu, or generate in the native mode on the GPU")


def to_device(data, device: torch.device | str):
    """A copy of a data dataclass (TaskData, ImageData, TextData) with every tensor on `device`."""
    if isinstance(data, torch.Tensor):
        return data.to(device)
    if dataclasses.is_dataclass(data) and not isinstance(data, type):
        return dataclasses.replace(data, **{f.name: to_device(getattr(data, f.name), device)
                                            for f in dataclasses.fields(data) if f.init})
    return data


def exact_float32() -> None:
    """Turns off TF32 in CUDA matrix products and convolutions (cuDNN's default is on).

    So a population trains in float32 on a GPU as on the CPU.
    A no-op without CUDA.
    """
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
