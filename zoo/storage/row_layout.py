"""Where each tensor sits in a row of one architecture, and the per-row decode for rows that differ.

Same-architecture rows hold safetensors files with byte-identical headers. So every tensor is the
same byte range of every row, and `RowLayout.copy` moves it for all rows in one strided copy.
`RowLayout.of` checks each declared shape against the row's real bytes before anything is
allocated (`zoo.storage.safetensors_io.read_header`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from zoo.storage import safetensors_io
from zoo.storage.record import METADATA_KEY, parse_weights_metadata
from zoo.weightspace import WeightSpace


def rows_view(chunk: pa.Array) -> np.ndarray | None:
    """A chunk of equal-length binary values as a (rows, length) uint8 view, or None."""
    if chunk.null_count or len(chunk) == 0:
        return None
    offsets = np.frombuffer(chunk.buffers()[1], dtype=np.int64, count=len(chunk) + 1 + chunk.offset)[chunk.offset:]
    length = int(offsets[1] - offsets[0])
    if not np.all(np.diff(offsets) == length):
        return None
    data = np.frombuffer(chunk.buffers()[2], dtype=np.uint8)
    return data[offsets[0]:offsets[0] + len(chunk) * length].reshape(len(chunk), length)


@dataclasses.dataclass(frozen=True)
class RowLayout:
    """Where each tensor sits inside a row of one architecture."""

    space: WeightSpace
    identity: str  # the architecture metadata every row of this layout carries
    start: int  # first byte of the safetensors data section
    ranges: tuple[tuple[int, int], ...]  # per tensor, byte range within the data section
    header: np.ndarray  # the shared header bytes, [0, start)

    @classmethod
    def of(cls, row: bytes, where: str = "row 0") -> "RowLayout":
        """The layout of `row`, every declared shape checked first against the row's real bytes.

        `safetensors_io.read_header` does the check, so nothing is allocated by a size the row does
        not hold."""
        try:
            header, start = safetensors_io.read_header(row)
            _, _, space = parse_weights_metadata(header.get("__metadata__") or {})
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        for t in space.tensors:
            info = header.get(t.name)
            if info is None or info["dtype"] != "F32" or tuple(info["shape"]) != t.shape:
                found = "absent" if info is None else f"{info['dtype']} {tuple(info['shape'])[:8]}"
                raise ValueError(f"{where}: tensor {ascii(t.name)[:60]}: the architecture says float32 "
                                 f"{t.shape[:8]}, the safetensors header {found} (the fast loader reads float32 zoos)")
        ranges = tuple(tuple(header[t.name]["data_offsets"]) for t in space.tensors)
        identity = header["__metadata__"][METADATA_KEY]
        return cls(space, identity, start, ranges, np.frombuffer(bytes(row[:start]), np.uint8))

    @property
    def data_bytes(self) -> int:
        return sum(end - begin for begin, end in self.ranges)

    def _same_header(self, headers: np.ndarray) -> bool:
        if self.start % 8 == 0:  # safetensors pads headers to 8 bytes: compare 8-byte words
            return bool((headers.view(np.uint64) == self.header.view(np.uint64)).all())
        return bool((headers == self.header).all())

    def copy(self, rows: np.ndarray, skip: int, outputs: list[np.ndarray]) -> bool:
        """Copies every tensor of `rows` (values starting at column `skip`) into `outputs`.

        Returns False, copying nothing, when the rows do not share this layout's header.
        """
        start = skip + self.start
        if rows.shape[1] != start + self.ranges[-1][1] or not self._same_header(rows[:, skip:start]):
            return False
        if rows.shape[1] % 4 == 0 and (rows.ctypes.data + start) % 4 == 0:
            words = rows.view(np.float32)  # copying 4-byte words is several times faster than bytes
            for output, (begin, end) in zip(outputs, self.ranges):
                np.copyto(output, words[:, (start + begin) // 4:(start + end) // 4])
        else:
            for output, (begin, end) in zip(outputs, self.ranges):
                np.copyto(output.view(np.uint8), rows[:, start + begin:start + end])
        return True


def decode_row(layout: RowLayout, value: bytes, outputs: list[np.ndarray], row: int) -> None:
    tensors, metadata = safetensors_io.decode(value)
    if metadata.get(METADATA_KEY) != layout.identity:
        raise ValueError("rows of several architectures; filter by the `architecture` column first "
                         "(load_split(..., architecture=ID))")
    for output, spec in zip(outputs, layout.space.tensors):
        output[row] = tensors[spec.name].reshape(-1).numpy()
