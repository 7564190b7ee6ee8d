"""A released PyTorch checkpoint (`.pth`/`.pt`, a state dict), read within bounds and never trusted.

`load_state_dict(path)` reads the file whole: a regular file only, at most `MAX_STATE_DICT_BYTES`. It
checks that the file is `torch.save`'s zip format, with every member stored uncompressed and
unencrypted. So what torch allocates is bounded by the file's own size. A deflated member could inflate
to gigabytes. The legacy pickle format declares storage sizes that it then allocates. The file is loaded
tensors-only (`weights_only`), so no code is unpickled.

Every tensor in it must be dense. A sparse (COO, CSR, CSC, BSR, BSC), quantized, nested, meta-device or
complex tensor loads. But no float32 array can be made of it without densifying it or dropping part of
it. So it is refused, naming the file and the key, before anything converts it. Every failure is one
`InputError` naming the file.

`tensor_shape(state, key, path)` is the shape of one entry that must be a tensor. An int, a list or a
missing key where the architecture is read from is one line naming the file and the key.
"""

from __future__ import annotations

import io
import warnings
import zipfile
from pathlib import Path
from typing import Any

from zoo.imports.reading import reading
from zoo.validation.bounds import MAX_STATE_DICT_BYTES
from zoo.validation.inputs import InputError, read_capped


def _check_container(path: Path, data: bytes, limit: int) -> None:
    """torch.save's zip format, its members stored, not encrypted, and unpacking to at most `limit` bytes."""
    if not zipfile.is_zipfile(io.BytesIO(data)):
        raise InputError(f"{path}: not a readable state dict (expected torch.save's zip format, PyTorch 1.6 and "
                         "later; the legacy format is not read)")
    with reading(path, expected="a PyTorch checkpoint (torch.save's zip format)"):
        members = zipfile.ZipFile(io.BytesIO(data)).infolist()
    total = 0
    for member in members:
        if member.flag_bits & 0x1:
            raise InputError(f"{path}: member {ascii(member.filename)[:120]} is encrypted; torch.save writes none")
        if member.compress_type != zipfile.ZIP_STORED:
            raise InputError(f"{path}: member {ascii(member.filename)[:120]} is compressed (method "
                             f"{member.compress_type}); torch.save stores its members uncompressed")
        total += member.file_size
    if total > limit:
        raise InputError(f"{path}: its members declare {total:,} bytes; at most {limit:,} (zoo.validation.bounds."
                         "MAX_STATE_DICT_BYTES)")


def _not_dense(value) -> str | None:
    """What kind of tensor `value` is, if it is not a dense real tensor on the CPU; else None.

    The module docstring says why.
    """
    import torch

    if value.is_nested:  # first: a nested tensor's layout may read strided
        return "a nested tensor"
    if value.layout != torch.strided:
        return f"a {str(value.layout).removeprefix('torch.')} tensor (not dense)"
    if value.is_quantized:
        return f"a quantized tensor ({str(value.dtype).removeprefix('torch.')})"
    if value.is_meta:
        return "a meta tensor (a shape without values)"
    if value.device.type != "cpu":  # map_location moves every other device's tensors to the CPU
        return f"a tensor on the {value.device.type} device"
    if value.is_complex():
        return f"a complex tensor ({str(value.dtype).removeprefix('torch.')})"
    return None


def load_state_dict(path: str | Path, max_bytes: int = MAX_STATE_DICT_BYTES) -> dict:
    """The state dict in the released checkpoint `path`: string keys -> values (module docstring)."""
    import torch

    path = Path(path)
    data = read_capped(path, max_bytes, "state dict", follow=False)
    _check_container(path, data, max_bytes)
    # torch's notes on what it loads (sparse invariants validated, a quantized tensor's TypedStorage) would print
    # beside the one line that refuses such a tensor below
    with reading(path, expected="a readable state dict"), warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        state = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    if not isinstance(state, dict):
        raise InputError(f"{path}: holds a {type(state).__name__}, not a state dict")
    bad = next((key for key in state if not isinstance(key, str)), None)
    if bad is not None:
        raise InputError(f"{path}: key {ascii(bad)[:60]} is not a string; a state dict's keys are names")
    for key, value in state.items():
        kind = _not_dense(value) if isinstance(value, torch.Tensor) else None
        if kind is not None:
            raise InputError(f"{path}: {ascii(key)[1:-1][:120]} is {kind}; expected a dense tensor of real numbers, "
                             "as torch.save writes a module's state dict")
    return state


def tensor_shape(state: dict, key: str, path: str | Path, dimensions: int | None = None) -> tuple[int, ...]:
    """The shape of `state[key]`, which must be a tensor (of `dimensions` dimensions, if given)."""
    import torch

    value: Any = state.get(key)
    if value is None:
        raise InputError(f"{path}: no {key}")
    if not isinstance(value, torch.Tensor):
        raise InputError(f"{path}: {key} is a {type(value).__name__}; expected a tensor")
    if dimensions is not None and value.ndim != dimensions:
        raise InputError(f"{path}: {key} has shape {tuple(value.shape)}; expected {dimensions} dimensions")
    return tuple(int(n) for n in value.shape)
