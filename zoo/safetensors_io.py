"""Deterministic safetensors encoding and decoding, without a per-tensor framework round trip.

The format (https://github.com/huggingface/safetensors): an 8-byte little-endian header
length, a JSON header mapping tensor names to dtype, shape and byte offsets (plus an
optional ``__metadata__`` of strings), padded with spaces to 8 bytes, then the raw data.
Writing it here fixes two things the library leaves open: the header's key order (so every
checkpoint of one architecture has byte-identical headers, and each tensor is a fixed byte
range of every row) and the data order (layer order, so a row's data section is the
flattened weight vector). `safetensors.torch.load` reads what this writes.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import torch

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.uint8: "U8", torch.bool: "BOOL"}
# numpy has no bfloat16: its bytes are read as uint16 and reinterpreted by torch
NUMPY_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16, "BF16": np.uint16, "I64": np.int64,
                "I32": np.int32, "U8": np.uint8, "BOOL": np.bool_}
TORCH_DTYPES = {name: dtype for dtype, name in DTYPES.items()}


def encode(tensors: dict[str, torch.Tensor], metadata: dict[str, str] | None = None) -> bytes:
    """Serializes `tensors` in their dict order; metadata values must be strings."""
    header: dict = {}
    if metadata:
        header["__metadata__"] = {k: metadata[k] for k in sorted(metadata)}
    offset, chunks = 0, []
    for name, tensor in tensors.items():
        tensor = tensor.detach().cpu().contiguous()
        data = tensor.reshape(-1).view(torch.uint8).numpy().tobytes() if tensor.numel() else b""
        header[name] = {"dtype": DTYPES[tensor.dtype], "shape": list(tensor.shape),
                        "data_offsets": [offset, offset + len(data)]}
        chunks.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(chunks)


def read_header(buffer: bytes | memoryview) -> tuple[dict, int]:
    """The parsed header and the byte position where the data section starts."""
    if len(buffer) < 8:
        raise ValueError("not a safetensors buffer: shorter than its 8-byte header length")
    (length,) = struct.unpack("<Q", bytes(buffer[:8]))
    if 8 + length > len(buffer):
        raise ValueError(f"not a safetensors buffer: header of {length} bytes exceeds the {len(buffer)}-byte buffer")
    return json.loads(bytes(buffer[8:8 + length])), 8 + length


def decode(buffer: bytes | memoryview) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """Tensors in data order (copies) and the metadata."""
    header, start = read_header(buffer)
    metadata = header.pop("__metadata__", {}) or {}
    tensors = {}
    for name, info in sorted(header.items(), key=lambda item: item[1]["data_offsets"][0]):
        begin, end = info["data_offsets"]
        dtype = np.dtype(NUMPY_DTYPES[info["dtype"]])
        array = np.frombuffer(buffer, dtype=dtype, count=(end - begin) // dtype.itemsize, offset=start + begin)
        tensor = torch.from_numpy(array.copy())
        if info["dtype"] == "BF16":
            tensor = tensor.view(torch.bfloat16)
        tensors[name] = tensor.reshape(info["shape"])
    return tensors, metadata
