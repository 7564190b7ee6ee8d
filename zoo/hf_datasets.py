"""Reading a packed zoo through Hugging Face `datasets` without losing bytes of `weights`.

The trap. `datasets` formats a binary column for NumPy, torch, TensorFlow or JAX as NumPy's
fixed-width bytes type (`|S<n>`). NumPy strips trailing NUL bytes from those. A row's `weights` is
a safetensors file whose data section ends with the last tensor. So a checkpoint whose last value
is 0.0 comes back a few bytes short from `ds.with_format("torch")` or `"numpy"`. Every epoch-0 CNN
checkpoint is one: its last bias starts at zero. The safetensors library then refuses it
("incomplete metadata, file not fully covered").

Some reads return the exact bytes: plain `ds[i]["weights"]` (Python format) and streaming. So does
`ds.with_format(..., columns=[...], output_all_columns=True)` with `weights` left out of `columns`.

The two ways here never hand `weights` to a NumPy formatter. They are `datasets` transforms
(`ds.with_transform`), which receive the Python batch, bytes intact.

`decode_weights` turns `weights` into the state dict: torch tensors in layer order. Every other
column stays as `datasets` gives it in Python.

`formatted(ds, "torch")` (or `"numpy"`) turns numeric columns into tensors (arrays), and strings
stay lists of `str`. `weights` is decoded as above, as NumPy arrays for `"numpy"`.

Every row's bytes stay a complete safetensors file; this module only reads them. `datasets` itself
is never imported here, since the transforms take plain dicts. So `zoo` imports without it.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from zoo.storage.safetensors_io import read_header

WEIGHTS = "weights"
FORMATS = ("torch", "numpy")


def decode_checkpoint(buffer: bytes, framework: str = "torch") -> dict[str, Any]:
    """One row's `weights` -> {tensor name: tensor} in layer order (safetensors sorts names).

    It is decoded by the safetensors library, which checks the buffer is exactly one complete file.
    So a truncated row raises instead of decoding into wrong tensors.
    """
    if framework not in FORMATS:
        raise ValueError(f"unknown framework {framework!r}; expected one of {list(FORMATS)}")
    if not isinstance(buffer, (bytes, bytearray, memoryview)):
        raise TypeError(f"`weights` must be the row's bytes, got {type(buffer).__name__}: decode a dataset "
                        "formatted by `datasets` only through zoo.hf_datasets (see its docstring)")
    if framework == "torch":
        from safetensors.torch import load
    else:
        from safetensors.numpy import load
    header, _ = read_header(buffer)
    tensors = load(bytes(buffer))
    order = sorted((name for name in header if name != "__metadata__"), key=lambda n: header[n]["data_offsets"][0])
    return {name: tensors[name] for name in order}


def decode_weights(batch: dict[str, list]) -> dict[str, list]:
    """A `ds.with_transform` transform: `weights` -> state dicts (torch), the rest untouched.

    ``ds.with_transform(decode_weights)[0]["weights"]`` is a state dict; a batch gives a list of them.
    Same-architecture state dicts stack with torch's default collate.
    """
    if WEIGHTS not in batch:
        return batch
    return {**batch, WEIGHTS: [decode_checkpoint(w, "torch") for w in batch[WEIGHTS]]}


class FormatWithWeights:
    """The transform behind `formatted`: each column formatted for `framework`, `weights` decoded.

    A class rather than a closure so it pickles (a DataLoader with worker processes).
    """

    def __init__(self, framework: str = "torch"):
        if framework not in FORMATS:
            raise ValueError(f"unknown format {framework!r}; expected one of {list(FORMATS)}")
        self.framework = framework

    def __call__(self, batch: dict[str, list]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, values in batch.items():
            if name == WEIGHTS:
                out[name] = [decode_checkpoint(w, self.framework) for w in values]
            elif values and all(isinstance(v, (numbers.Number, np.bool_)) for v in values):
                array = np.asarray(values)  # int64, float64 (NaN kept) or bool, as datasets formats them
                out[name] = array if self.framework == "numpy" else _as_tensor(array)
            else:
                out[name] = np.asarray(values) if self.framework == "numpy" else values
        return out

    def __repr__(self) -> str:
        return f"FormatWithWeights({self.framework!r})"


def _as_tensor(array: np.ndarray):
    import torch

    return torch.from_numpy(array)


def formatted(ds, framework: str = "torch"):
    """`ds` (a `datasets.Dataset` or `DatasetDict`) formatted for `framework`, NUL-safe.

    Use it where you would write ``ds.with_format("torch")``. Numeric columns come back as tensors
    and strings as lists. `weights` comes back as decoded state dicts, never as truncated bytes.
    """
    return ds.with_transform(FormatWithWeights(framework))
