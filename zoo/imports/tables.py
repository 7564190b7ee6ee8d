"""An imported CSV (a metrics file, a metadata table, a sidecar), counted before it is held.

A few hundred bytes of CSV, or a few megabytes of gzip, can declare a table that exhausts memory once
pandas or `csv.DictReader` hold it. It may hold gigabytes of decompressed text, or millions of one-byte
rows, each becoming a row of NaN or a dict. Or its header may have a million columns.

So a table is read as a stream (`open_regular`). It is decompressed by its suffix through
`zoo.validation.decompress.bounded`, at most `MAX_TABLE_BYTES`. Its header is parsed first and its
columns counted (`MAX_TABLE_COLUMNS`). Then at most `max_rows` rows are parsed: the least of
`MAX_TABLE_ROWS` and `MAX_TABLE_CELLS` / columns. One more row is an `InputError` naming the file,
before a frame of it exists.

Every parser error is one line naming the file (`zoo.imports.reading.reading`).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any, BinaryIO, Iterator

from zoo.imports.reading import reading
from zoo.validation.inputs import open_regular
from zoo.validation.bounds import MAX_TABLE_BYTES, MAX_TABLE_CELLS, MAX_TABLE_COLUMNS, MAX_TABLE_ROWS
from zoo.validation.decompress import bounded, compression_of, decompressing
from zoo.validation.inputs import InputError

MAX_HEADER_BYTES = MAX_TABLE_COLUMNS * 256  # a column name is a few dozen characters


class _Prefixed(io.RawIOBase):
    """`head` then the rest of `stream`: the header line read ahead, handed to the parser again."""

    def __init__(self, head: bytes, stream: BinaryIO):
        super().__init__()
        self.head, self.stream = head, stream

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        view = memoryview(buffer).cast("B")
        if self.head:
            count = min(len(view), len(self.head))
            view[:count], self.head = self.head[:count], self.head[count:]
            return count
        data = self.stream.read(len(view))
        view[:len(data)] = data
        return len(data)


def _open(path: Path, what: str) -> BinaryIO:
    raw = open_regular(path, what, follow=False)
    return bounded(decompressing(raw, compression_of(path.name)), MAX_TABLE_BYTES, str(path),
                   "bytes of text (decompressed)")


def _header(path: Path, stream: BinaryIO, what: str) -> tuple[bytes, list[str]]:
    line = stream.readline(MAX_HEADER_BYTES + 1)
    if len(line) > MAX_HEADER_BYTES:
        raise InputError(f"{path}: a header line longer than {MAX_HEADER_BYTES:,} bytes; expected a {what}'s "
                         "column names")
    columns = next(csv.reader([line.decode("utf-8")]), [])
    if not columns:
        raise InputError(f"{path}: empty; expected a {what} with a header line")
    if len(columns) > MAX_TABLE_COLUMNS:
        raise InputError(f"{path}: {len(columns):,} columns; at most {MAX_TABLE_COLUMNS:,} (zoo.validation.bounds)")
    return line, columns


def row_limit(columns: int, max_rows: int = MAX_TABLE_ROWS) -> int:
    """The most rows a table of `columns` columns may hold (`MAX_TABLE_ROWS`, `MAX_TABLE_CELLS`)."""
    return min(max_rows, MAX_TABLE_CELLS // max(1, columns))


def _too_many(path: Path, limit: int) -> InputError:
    return InputError(f"{path}: more than {limit:,} rows, the most accepted here (zoo.validation.bounds."
                      "MAX_TABLE_ROWS, MAX_TABLE_CELLS); refusing it before it is held")


def read_table(path: str | Path, what: str = "CSV table", *, dtype: dict[str, Any] | None = None,
               max_rows: int = MAX_TABLE_ROWS):
    """`path` (a CSV, or a `.gz`/`.xz`/`.bz2` of one) as a pandas frame, within the bounds above."""
    import pandas as pd

    path = Path(path)
    with _open(path, what) as stream, reading(path, expected=f"a readable {what} (CSV)"):
        head, columns = _header(path, stream, what)
        limit = row_limit(len(columns), max_rows)
        frame = pd.read_csv(io.BufferedReader(_Prefixed(head, stream)), dtype=dtype, nrows=limit + 1,
                            low_memory=False)
    if len(frame) > limit:
        raise _too_many(path, limit)
    return frame


def read_rows(path: str | Path, what: str = "CSV table", *, max_rows: int = MAX_TABLE_ROWS) -> Iterator[dict]:
    """The rows of CSV `path` as dicts (`csv.DictReader`), one at a time, within the bounds above."""
    path = Path(path)
    with _open(path, what) as stream, reading(path, expected=f"a readable {what} (CSV)"):
        head, columns = _header(path, stream, what)
        limit = row_limit(len(columns), max_rows)
        text = io.TextIOWrapper(io.BufferedReader(_Prefixed(head, stream)), encoding="utf-8", newline="")
        for number, row in enumerate(csv.DictReader(text), start=1):
            if number > limit:
                raise _too_many(path, limit)
            yield row
