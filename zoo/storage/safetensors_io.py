"""Deterministic safetensors encoding and decoding, without a per-tensor framework round trip.

The format is at https://github.com/huggingface/safetensors. A file starts with an 8-byte
little-endian header length. Then comes a JSON header mapping tensor names to dtype, shape and byte
offsets. It may hold an optional ``__metadata__`` of strings, and is padded with spaces to 8 bytes.
Then comes the raw data. `safetensors.torch.load` reads what this writes.

Writing it here fixes two things the library leaves open. One is the header's key order. So every
checkpoint of one architecture has byte-identical headers, and each tensor is a fixed byte range of
every row. The other is the data order, which is layer order. So a row's data section is the
flattened weight vector.

A safetensors file declares its own size: 8 bytes, the header, and the data its tensors' offsets
span. `read_safetensors_file` reads the header first and checks the file against it before reading
the body. Its size on disk must equal the implied one, and its tensors stay within what a member
may be. So a file truncated to a sparse 4 GiB, or a header declaring a giant tensor, is refused
without reading it.
"""

from __future__ import annotations

import json
import math
import os
import struct
from pathlib import Path

import numpy as np
import torch

from zoo.validation.bounds import MAX_HEADER_BYTES, MAX_MEMBER_PARAMETERS, MAX_STAGED_BYTES
from zoo.validation.inputs import InputError, load_json_bytes, open_regular

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


def _tensor_problem(name: str, info, data_bytes: int) -> str | None:
    """Why header entry `name` does not describe a tensor inside a `data_bytes`-byte data section, or None."""
    if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
        return f"tensor {ascii(name)[:60]}: expected exactly dtype, shape and data_offsets"
    if info["dtype"] not in NUMPY_DTYPES:
        return f"tensor {ascii(name)[:60]}: unknown dtype {ascii(info['dtype'])[:20]}"
    shape, offsets = info["shape"], info["data_offsets"]
    if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
        return f"tensor {ascii(name)[:60]}: shape must be a list of non-negative integers"
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(n) is int for n in offsets)
            or not 0 <= offsets[0] <= offsets[1] <= data_bytes):
        return (f"tensor {ascii(name)[:60]}: data_offsets {ascii(offsets)[:60]} outside the "
                f"{data_bytes}-byte data section")
    size = math.prod(shape) * np.dtype(NUMPY_DTYPES[info["dtype"]]).itemsize  # Python ints: no overflow
    if size != offsets[1] - offsets[0]:
        return (f"tensor {ascii(name)[:60]}: shape {shape[:8]} needs {size:,} bytes, data_offsets give "
                f"{offsets[1] - offsets[0]:,}")
    return None


def read_header(buffer: bytes | memoryview, max_header_bytes: int = MAX_HEADER_BYTES) -> tuple[dict, int]:
    """The parsed header and the byte position where the data section starts.

    Everything the header declares is checked against the buffer before anyone allocates by it.
    The header's length must be at most `max_header_bytes` and within the buffer. Its JSON is
    depth-bounded. Every tensor needs a known dtype and a shape of non-negative integers. Its data
    offsets lie inside the data section, match shape x itemsize, and overlap no other tensor's. A
    bad one is a one-line `ValueError` saying what; callers add the file and row.
    """
    if len(buffer) < 8:
        raise ValueError("not a safetensors buffer: shorter than its 8-byte header length")
    (length,) = struct.unpack("<Q", bytes(buffer[:8]))
    if length > max_header_bytes:
        raise ValueError(f"not a safetensors buffer: declares a {length:,}-byte header (at most {max_header_bytes:,})")
    if 8 + length > len(buffer):
        raise ValueError(f"not a safetensors buffer: header of {length} bytes exceeds the {len(buffer)}-byte buffer")
    try:
        header = load_json_bytes(bytes(buffer[8:8 + length]), "header", strict=True)
    except InputError as error:
        raise ValueError(f"not a safetensors buffer: {error}") from None
    if not isinstance(header, dict):
        raise ValueError("not a safetensors buffer: its header is not a JSON object")
    metadata = header.get("__metadata__", {})
    if metadata is not None and (not isinstance(metadata, dict)
                                 or not all(isinstance(v, str) for v in metadata.values())):
        raise ValueError("not a safetensors buffer: __metadata__ must map names to strings")
    data_bytes, spans = len(buffer) - 8 - length, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        problem = _tensor_problem(name, info, data_bytes)
        if problem is not None:
            raise ValueError(f"not a safetensors buffer: {problem}")
        if info["data_offsets"][1] > info["data_offsets"][0]:
            spans.append((*info["data_offsets"], name))
    spans.sort()
    for (_, end, first), (begin, _, second) in zip(spans, spans[1:]):
        if begin < end:
            raise ValueError(f"not a safetensors buffer: tensors {ascii(first)[:60]} and {ascii(second)[:60]} overlap")
    return header, 8 + length


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


def read_safetensors_file(path: str | Path, what: str = "safetensors file") -> bytes:
    """The bytes of the safetensors file at `path`, read only once its header vouches for them.

    It must be a regular file, with no link followed. Its header is at most `MAX_HEADER_BYTES`. Every
    tensor is well formed (`read_header`'s checks), with at most `MAX_MEMBER_PARAMETERS` elements in
    all. Its size on disk equals 8 + header + the largest data offset, itself at most
    `MAX_STAGED_BYTES`. Anything else is an `InputError` naming the file, before its body is read."""
    with open_regular(path, what, follow=False) as handle:
        status = os.fstat(handle.fileno())
        size = status.st_size
        prefix = handle.read(8)
        if len(prefix) < 8:
            raise InputError(f"{path}: {size:,} bytes, shorter than a safetensors header")
        (length,) = struct.unpack("<Q", prefix)
        if length > MAX_HEADER_BYTES or 8 + length > size:
            raise InputError(f"{path}: declares a {length:,}-byte safetensors header in a {size:,}-byte file "
                             f"(at most {MAX_HEADER_BYTES:,}: zoo.validation.bounds.MAX_HEADER_BYTES)")
        header_bytes = handle.read(length)
        implied = _implied_size(path, header_bytes, size - 8 - length)
        if implied != size:
            raise InputError(f"{path}: {size:,} bytes on disk, but its safetensors header implies {implied:,} "
                             "(8 + header + its tensors' data): truncated, extended or padded")
        body = handle.read(size - 8 - length + 1)
    if len(body) != size - 8 - length:
        raise InputError(f"{path}: changed while it was read ({8 + length + len(body):,} bytes, expected {size:,})")
    return prefix + header_bytes + body


def _implied_size(path, header_bytes: bytes, data_bytes: int) -> int:
    """8 + header + the end of the last tensor's data, once every tensor entry is checked.

    The tensors must hold at most MAX_MEMBER_PARAMETERS elements together."""
    try:
        header = load_json_bytes(header_bytes, "header", strict=True)
    except InputError as error:
        raise InputError(f"{path}: not a safetensors file: {str(error)[:200]}") from None
    if not isinstance(header, dict):
        raise InputError(f"{path}: not a safetensors file: its header is not a JSON object")
    end, elements = 0, 0
    for name, info in header.items():
        if name == "__metadata__":
            continue
        problem = _tensor_problem(name, info, data_bytes)
        if problem is not None:
            raise InputError(f"{path}: not a safetensors file: {problem}")
        end, elements = max(end, info["data_offsets"][1]), elements + math.prod(info["shape"])
    if elements > MAX_MEMBER_PARAMETERS:
        raise InputError(f"{path}: its tensors declare {elements:,} elements; a member has at most "
                         f"{MAX_MEMBER_PARAMETERS:,} (zoo.validation.bounds.MAX_MEMBER_PARAMETERS)")
    implied = 8 + len(header_bytes) + end
    if implied > MAX_STAGED_BYTES:
        raise InputError(f"{path}: its header implies {implied:,} bytes; at most {MAX_STAGED_BYTES:,} "
                         "(zoo.validation.bounds.MAX_STAGED_BYTES)")
    return implied
