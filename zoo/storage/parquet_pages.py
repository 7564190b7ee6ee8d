"""Direct reading of fixed-length PLAIN byte-array pages from a memory-mapped Parquet file.

The `weights` column is written REQUIRED, PLAIN-encoded and uncompressed. So each data page is a
Thrift page header followed by the values. Each value is a 4-byte length and the bytes. When all
values share one length, a page is a (values, 4 + length) byte matrix inside the file. The fast
loader then copies each tensor's byte range straight from the page cache into its output. That is
one copy, where going through Arrow costs two. Anything else returns None, and the caller takes the
Arrow path: compression, dictionary pages, nulls or unequal lengths.

Thrift compact protocol and page layout: the Apache Parquet format specification
(parquet.thrift: PageHeader, DataPageHeader, DataPageHeaderV2).
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

DATA_PAGE, DATA_PAGE_V2 = 0, 3


class ThriftError(ValueError):
    """A Thrift compact-protocol structure that cannot be what it claims.

    It runs past the bytes left, or declares a container larger than those bytes or
    `MAX_THRIFT_CONTAINER_ELEMENTS`. Or it nests deeper than `MAX_THRIFT_NESTING`, or holds an
    unknown type."""


_TYPE_NAMES = {1: "booleans", 2: "booleans", 3: "bytes", 4: "i16s", 5: "i32s", 6: "i64s", 7: "doubles",
               8: "binaries", 9: "lists", 10: "sets", 11: "maps", 12: "structs"}


def _least_bytes(kind: int) -> int:
    """The fewest bytes one value of a compact type takes as a container element.

    A double is 8; anything else is at least 1 (a varint, a length, a size or a struct's stop byte)."""
    if kind not in _TYPE_NAMES:
        raise ThriftError(f"unknown Thrift compact type {kind}")
    return 8 if kind == 7 else 1


class _Compact:
    """Just enough of Thrift's compact protocol to read a PageHeader.

    Every value consumes the bytes its type takes, never reading past `end` (the buffer's end by
    default). A container's declared size is bounded by the bytes left and
    `MAX_THRIFT_CONTAINER_ELEMENTS`. Nesting is bounded by `MAX_THRIFT_NESTING`. So any header is
    read in time and memory linear in its own bytes."""

    def __init__(self, buffer, position: int, end: int | None = None):
        self.buffer, self.position = buffer, position
        self.end = len(buffer) if end is None else min(end, len(buffer))
        self.depth = 0

    def _need(self, count: int, what: str) -> None:
        if count > self.end - self.position:
            raise ThriftError(f"{what} needs {count:,} bytes, {max(0, self.end - self.position):,} are left")

    def byte(self) -> int:
        self._need(1, "a byte")
        value = self.buffer[self.position]
        self.position += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 63:
                raise ThriftError("a varint longer than 10 bytes")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def _size(self, declared: int, least: int, what: str) -> int:
        """A container's declared element count, once it fits the bytes left and the bound."""
        from zoo.validation.bounds import MAX_THRIFT_CONTAINER_ELEMENTS

        if declared > MAX_THRIFT_CONTAINER_ELEMENTS:
            raise ThriftError(f"{what} of {declared:,} elements; at most {MAX_THRIFT_CONTAINER_ELEMENTS:,} "
                              "(zoo.validation.bounds.MAX_THRIFT_CONTAINER_ELEMENTS)")
        self._need(declared * least, f"{what} of {declared:,} elements")
        return declared

    def _nested(self, read):
        from zoo.validation.bounds import MAX_THRIFT_NESTING

        if self.depth >= MAX_THRIFT_NESTING:
            raise ThriftError(f"structs, lists or maps nested deeper than {MAX_THRIFT_NESTING} "
                              "(zoo.validation.bounds.MAX_THRIFT_NESTING)")
        self.depth += 1
        try:
            return read()
        finally:
            self.depth -= 1

    def value(self, kind: int):
        if kind in (1, 2):  # booleans inside a struct carry their value in the type
            return kind == 1
        if kind == 3:
            return self.byte()
        if kind in (4, 5, 6):
            return self.zigzag()
        if kind == 7:
            self._need(8, "a double")
            self.position += 8
            return None
        if kind == 8:
            length = self.varint()
            self._need(length, f"a {length:,}-byte binary")
            self.position += length
            return None
        if kind in (9, 10):
            return self._nested(self._list)
        if kind == 11:
            return self._nested(self._map)
        if kind == 12:
            return self._nested(self._struct)
        raise ThriftError(f"unknown Thrift compact type {kind}")

    def _list(self) -> list:
        header = self.byte()
        element = header & 0x0F
        size = self._size(header >> 4 if header >> 4 != 15 else self.varint(), _least_bytes(element),
                          f"a list of {_TYPE_NAMES.get(element, 'values')}")
        return [self._element(element) for _ in range(size)]

    def _element(self, kind: int):
        """A list's or map's element: booleans there take a byte each."""
        return self.byte() == 1 if kind in (1, 2) else self.value(kind)

    def _map(self) -> None:
        declared = self.varint()
        if declared:
            types = self.byte()
            least = _least_bytes(types >> 4) + _least_bytes(types & 0x0F)
            for _ in range(self._size(declared, least, f"a map of {_TYPE_NAMES[types & 0x0F]}")):
                self._element(types >> 4), self._element(types & 0x0F)
        return None

    def struct(self) -> dict[int, object]:
        return self._nested(self._struct)

    def _struct(self) -> dict[int, object]:
        fields, last = {}, 0
        while True:
            header = self.byte()
            if header == 0:
                return fields
            delta, kind = header >> 4, header & 0x0F
            last = last + delta if delta else self.zigzag()
            fields[last] = self.value(kind)


def fixed_width_pages(path: Path, column: str) -> tuple[mmap.mmap, list[np.ndarray]] | None:
    """The column's values as (values, 4 + length) uint8 views into the mapped file, or None."""
    parquet = pq.ParquetFile(path)
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    pages = mapped_pages(mapped, parquet, column)
    return None if pages is None else (mapped, pages)


def mapped_pages(mapped, parquet: pq.ParquetFile, column: str) -> list[np.ndarray] | None:
    """`fixed_width_pages` of a file already mapped and opened: its pages as views into `mapped`, or None."""
    metadata = parquet.metadata
    index = parquet.schema_arrow.get_field_index(column)
    if index < 0 or parquet.schema.column(index).max_definition_level != 0:
        return None  # nullable: pages would carry definition levels
    buffer = np.frombuffer(mapped, dtype=np.uint8)
    pages: list[np.ndarray] = []
    width = None
    for group in range(metadata.num_row_groups):
        chunk = metadata.row_group(group).column(index)
        if chunk.compression != "UNCOMPRESSED" or chunk.has_dictionary_page:
            return None
        position = chunk.data_page_offset
        end = position + chunk.total_compressed_size
        rows = 0
        while position < end:
            try:  # anything unexpected in a header: the Arrow path, whose error names the file
                reader = _Compact(mapped, position)
                header = reader.struct()
                size, body = header[3], reader.position
                kind = header[1]
                if kind == DATA_PAGE:
                    count, encoding = header[5][1], header[5][2]
                elif kind == DATA_PAGE_V2:
                    v2 = header[8]
                    if v2.get(7, True) or v2.get(5, 0) or v2.get(6, 0):
                        return None  # compressed, or carrying levels
                    count, encoding = v2[1], v2[4]
                else:
                    return None
            except (ThriftError, KeyError, TypeError, AttributeError):
                return None
            if not all(isinstance(v, int) and v >= 0 for v in (size, count, encoding)):
                return None
            if encoding != 0:  # PLAIN
                return None
            if count:
                length = int.from_bytes(mapped[body:body + 4], "little")
                width = width or length + 4
                if length + 4 != width or count * width != size:
                    return None
                page = buffer[body:body + size].reshape(count, width)
                if not np.all(page[:, :4].view("<u4") == length):
                    return None
                pages.append(page)
                rows += count
            position = body + size
        if rows != chunk.num_values:
            return None
    return pages


def declared_page_bytes(mapped, start: int, length: int) -> tuple[int, int]:
    """The uncompressed bytes and the values the page headers of one column chunk declare.

    Both dictionary and data pages count, read from the headers alone. `start` and `length` are the
    chunk's first page and its total compressed size. Arrow allocates each page by its header's
    `uncompressed_page_size` and decodes its `num_values`. A footer's totals need not agree with
    those. A header that cannot be read, or a negative size, is a `ValueError`."""
    total, values, position, end = 0, 0, start, start + length
    if not 0 <= start <= end <= len(mapped):
        raise ValueError(f"a column chunk at byte {start:,} of {length:,} bytes lies outside the "
                         f"{len(mapped):,}-byte file")
    while position < end:
        try:
            reader = _Compact(mapped, position)
            header = reader.struct()
        except ThriftError as error:
            raise ValueError(f"an unreadable page header at byte {position:,}: {error}") from None
        uncompressed, compressed = header.get(2), header.get(3)
        if not isinstance(uncompressed, int) or not isinstance(compressed, int) or uncompressed < 0 or compressed < 0:
            raise ValueError(f"a page header at byte {position:,} without valid sizes")
        total += uncompressed
        data = header.get(5) if header.get(1) == DATA_PAGE else header.get(8) if header.get(1) == DATA_PAGE_V2 else None
        if isinstance(data, dict):
            count = data.get(1)
            if not isinstance(count, int) or count < 0:
                raise ValueError(f"a data page header at byte {position:,} without a valid value count")
            values += count
        position = reader.position + compressed
    return total, values
