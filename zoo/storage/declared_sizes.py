"""The sizes a Parquet shard declares, bounded before anything is decoded.

A few hundred KB of compressed repeated strings can declare gigabytes a column. So every reader
and every check asks first. The loaders ask through `zoo.storage.open_shard`. `nfnzoo info` asks
through `zoo.storage.integrity.read_named`, and `nfnzoo verify` through `shard_problem`.

Each column chunk's uncompressed size is bounded per row and per chunk (`zoo.validation.bounds`).
That size comes from the footer and from the chunk's page headers; Arrow allocates by the latter.
The weights column is bounded by what one member may be. Every other column is bounded by what a
row's metadata is. The footer's length, a row group's rows and a dictionary page's declared values
are bounded too.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from zoo.storage.shard_file import CorruptShardError, open_regular, regular_file_problem
from zoo.validation.bounds import (MAX_PARQUET_COLUMN_CHUNK_BYTES, MAX_PARQUET_FOOTER_BYTES,
                                   MAX_PARQUET_METADATA_ROW_BYTES, MAX_PARQUET_ROWS_PER_GROUP,
                                   MAX_PARQUET_WEIGHTS_ROW_BYTES)


def declared_size_problem(path: Path) -> str | None:
    """What the Parquet file at `path` declares beyond `zoo.validation.bounds`, or None.

    That is a column chunk's uncompressed bytes, per row of its row group or in all. They are read
    from the footer's metadata and the chunks' page headers, before any column is decoded. A file
    Arrow cannot open is left to the reader's own error (None here). A file that is not regular is
    named as such (`regular_file_problem`): a FIFO is never opened."""
    problem = regular_file_problem(path)
    if problem is not None:
        return None if problem == "missing" else problem
    try:
        status = path.stat()
    except OSError:
        return None
    return _declared_size_problem(str(path), status.st_size, status.st_mtime_ns, status.st_ino)


def declared_rows(path: Path) -> int | None:
    """The rows the Parquet file at `path` declares in its footer, or None.

    None means it is not readable as Parquet, or its footer is beyond the bound. `declared_size_problem`
    names the latter."""
    try:
        status = path.stat()
    except OSError:
        return None
    metadata = _footer(str(path), status.st_size, status.st_mtime_ns, status.st_ino)[1]
    return None if metadata is None else metadata.num_rows


@functools.lru_cache(maxsize=256)
def _footer(path: str, size: int, mtime_ns: int, inode: int) -> tuple[str | None, pq.FileMetaData | None]:
    """(why the footer is not read, or None; its metadata where it was read).

    Read once per version of a file, for the sizes and the row count it declares."""
    footer = _footer_length(path, size)
    if footer is None:
        return None, None  # not Parquet: the reader says so, naming the file
    if footer_problem(footer) is not None:
        return footer_problem(footer), None
    try:
        return None, pq.read_metadata(path)
    except (pa.ArrowInvalid, OSError):
        return None, None


@functools.lru_cache(maxsize=256)
def _declared_size_problem(path: str, size: int, mtime_ns: int, inode: int) -> str | None:
    import mmap

    problem, metadata = _footer(path, size, mtime_ns, inode)
    if metadata is None:
        return problem
    with open_regular(path) as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        return mapped_size_problem(mapped, metadata, path)


def footer_problem(footer: int) -> str | None:
    """Why a footer of `footer` bytes is not read (beyond the bound), or None."""
    if footer > MAX_PARQUET_FOOTER_BYTES:
        return (f"declares a {footer:,}-byte footer; at most {MAX_PARQUET_FOOTER_BYTES:,} "
                "(zoo.validation.bounds.MAX_PARQUET_FOOTER_BYTES)")
    return None


def mapped_size_problem(mapped, metadata: pq.FileMetaData, source) -> str | None:
    """What a mapped Parquet file declares beyond the bounds, or None.

    `metadata` is its footer's; `source` (a path or an Arrow buffer of the same bytes) is read for
    the dictionary check. An already open shard is checked here without opening it again.
    """
    problem = _page_problem(mapped, metadata)
    return problem if problem is not None else _dictionary_problem(source, metadata)


def _page_problem(mapped, metadata: pq.FileMetaData) -> str | None:
    """A column chunk whose footer or page headers declare more than the bounds allow, or None."""
    from zoo.storage.parquet_pages import declared_page_bytes

    for g in range(metadata.num_row_groups):
        group = metadata.row_group(g)
        rows = group.num_rows
        for c in range(group.num_columns):
            chunk = group.column(c)
            name = chunk.path_in_schema
            per_row, bound = _row_bound(name)
            where = f"column {ascii(name)[1:-1][:80]!r} of row group {g} ({rows:,} rows)"
            start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
            if rows > MAX_PARQUET_ROWS_PER_GROUP:
                return (f"row group {g} declares {rows:,} rows; at most {MAX_PARQUET_ROWS_PER_GROUP:,} "
                        "(zoo.validation.bounds.MAX_PARQUET_ROWS_PER_GROUP)")
            try:
                paged, values = declared_page_bytes(mapped, start, chunk.total_compressed_size)
            except ValueError as error:
                return f"{where}: {error}"
            if "." not in name and max(values, chunk.num_values) > rows:  # a flat column: a value a row
                return f"{where} declares {max(values, chunk.num_values):,} values in its pages for {rows:,} rows"
            # values decode to at least 8 bytes each (a fixed-width value or an offset), whatever their pages hold
            declared = max(chunk.total_uncompressed_size, paged, 8 * max(values, chunk.num_values))
            problem = _size_problem(where, "declares", declared, rows, per_row, bound)
            if problem is not None:
                return problem
    return None


def _row_bound(column: str) -> tuple[int, str]:
    """A column's bound per row and the bound's name: a member for `weights`, a row's metadata else."""
    if column.split(".")[0] == "weights":
        return MAX_PARQUET_WEIGHTS_ROW_BYTES, "MAX_PARQUET_WEIGHTS_ROW_BYTES"
    return MAX_PARQUET_METADATA_ROW_BYTES, "MAX_PARQUET_METADATA_ROW_BYTES"


def _size_problem(where: str, verb: str, size: int, rows: int, per_row: int, bound: str) -> str | None:
    if size > per_row * max(rows, 1):
        return f"{where} {verb} {size:,} bytes uncompressed; at most {per_row:,} a row (zoo.validation.bounds.{bound})"
    if size > MAX_PARQUET_COLUMN_CHUNK_BYTES:
        return (f"{where} {verb} {size:,} bytes uncompressed; at most {MAX_PARQUET_COLUMN_CHUNK_BYTES:,} a column "
                "chunk (zoo.validation.bounds.MAX_PARQUET_COLUMN_CHUNK_BYTES)")
    return None


def _dictionary_problem(source, metadata: pq.FileMetaData) -> str | None:
    """A dictionary-encoded string column whose decoded rows exceed the bounds, or None.

    Such a column is small on disk and in its pages. Decoded, it is as large as its rows times their
    values. One 60 KB value repeated 100,000 times is 6 GB. So each such chunk is read as a
    dictionary: its pages (bounded above) and an index a row. The bytes its rows expand to are
    bounded as a declared size is."""
    import pyarrow.compute as pc

    names = sorted({metadata.row_group(g).column(c).path_in_schema
                    for g in range(metadata.num_row_groups) for c in range(metadata.num_columns)
                    if metadata.row_group(g).column(c).has_dictionary_page
                    and metadata.row_group(g).column(c).physical_type == "BYTE_ARRAY"
                    and "." not in metadata.row_group(g).column(c).path_in_schema})
    if not names:
        return None
    try:
        parquet = pq.ParquetFile(pa.BufferReader(source) if isinstance(source, pa.Buffer) else source,
                                 read_dictionary=names)
        for g in range(metadata.num_row_groups):
            rows = metadata.row_group(g).num_rows
            for name in names:
                expanded = 0
                for chunk in parquet.read_row_group(g, columns=[name]).column(0).chunks:
                    if pa.types.is_dictionary(chunk.type):
                        lengths = pc.binary_length(chunk.dictionary).take(chunk.indices)
                    else:
                        lengths = pc.binary_length(chunk)
                    expanded += pc.sum(lengths).as_py() or 0
                per_row, bound = _row_bound(name)
                where = f"column {ascii(name)[1:-1][:80]!r} of row group {g} ({rows:,} rows)"
                problem = _size_problem(where, "expands through its dictionary to", expanded, rows, per_row, bound)
                if problem is not None:
                    return problem
    except (pa.ArrowInvalid, OSError):
        return None  # unreadable: the reader's own error names the file
    return None


def _footer_length(path: str, size: int) -> int | None:
    """The footer length a Parquet file's last 8 bytes declare, or None when it is not Parquet."""
    if size < 12:
        return None
    with open_regular(path) as handle:
        handle.seek(size - 8)
        tail = handle.read(8)
    if tail[4:] != b"PAR1":
        return None
    return int.from_bytes(tail[:4], "little")


def check_declared_sizes(paths: Path | list[Path]) -> None:
    """Raises `CorruptShardError` naming the first of `paths` whose declared sizes exceed the bounds.

    The sizes are those `declared_size_problem` checks."""
    for path in [paths] if isinstance(paths, Path) else paths:
        problem = declared_size_problem(Path(path))
        if problem is not None:
            raise CorruptShardError(f"{path}: {problem}; the shard is refused before it is read")
