"""A 2-D float matrix in a `.npy` file, read a range of rows at a time (the Small CNN Zoo's `weights.npy`).

`open_npy(path)` reads and checks the header only. The file must be regular (`open_regular`: a FIFO is
refused, not waited on). The matrix must be 2-D, C order, little-endian float32/float64. The file must
be exactly as long as the header says.

`NpyMatrix.read(start, stop)` then reads those rows from the data offset. So memory stays bounded by the
rows asked for, whatever the file's size. A memory map would count every page it touched in the
process's resident size. NumPy's header errors are one line naming the file
(`zoo.imports.reading.reading`).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np

from zoo.imports.reading import reading
from zoo.validation.inputs import open_regular
from zoo.validation.inputs import InputError


@dataclasses.dataclass(frozen=True)
class NpyMatrix:
    """A 2-D little-endian float .npy matrix, read by row ranges (module docstring)."""

    path: Path
    rows: int
    columns: int
    dtype: np.dtype
    offset: int

    def read(self, start: int, stop: int) -> np.ndarray:
        count = (stop - start) * self.columns
        with (open_regular(self.path, "weights file", follow=False) as handle,
              reading(self.path, f"rows {start}-{stop - 1}", "a readable .npy matrix")):
            handle.seek(self.offset + start * self.columns * self.dtype.itemsize)
            buffer = bytearray(count * self.dtype.itemsize)
            got = handle.readinto(buffer)
            values = np.frombuffer(buffer, dtype=self.dtype)[:got // self.dtype.itemsize]
        if values.size != count:  # the file shrank after it was opened
            raise InputError(f"{self.path}: truncated at row {start + values.size // self.columns:,}")
        return values.reshape(stop - start, self.columns).astype(np.float32, copy=False)


def open_npy(path: Path) -> NpyMatrix:
    """The header of `path`, checked: 2-D, C order, float32/float64, the file as long as it says."""
    if not os.path.lexists(path):
        raise InputError(f"{path}: missing (the Small CNN Zoo folder holds weights.npy, metrics.csv.gz and layout.csv)")
    with open_regular(path, "weights file", follow=False) as handle, reading(path, expected="a .npy file"):
        version = np.lib.format.read_magic(handle)
        reader = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = reader(handle)
        offset = handle.tell()
        size = os.fstat(handle.fileno()).st_size
    if len(shape) != 2 or fortran or dtype.kind != "f" or dtype.byteorder == ">":
        raise InputError(f"{path}: expected a 2-D C-order little-endian float matrix, got shape {shape}, "
                         f"dtype {dtype}, fortran_order {fortran}")
    rows, columns = shape
    expected = offset + rows * columns * dtype.itemsize
    if size != expected:
        row_bytes = columns * dtype.itemsize
        whole = max(0, size - offset) // row_bytes if row_bytes else 0
        detail = (f"truncated: row {whole:,} is the first incomplete one" if size < expected
                  else f"{size - expected:,} bytes after the last row")
        raise InputError(f"{path}: its header says {rows:,} rows of {columns:,} {dtype} ({expected:,} bytes), "
                         f"the file holds {size:,} bytes; {detail}")
    return NpyMatrix(path, rows, columns, dtype, offset)
