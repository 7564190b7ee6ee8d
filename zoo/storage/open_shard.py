"""A shard opened once for a read: one mapping, one footer, bounded before anything is decoded.

The `safetensors.safe_open` idea for Parquet shards. `OpenShard` maps the file once, reads its
footer from the mapping, and checks the sizes it declares (`zoo.storage.declared_sizes`). The
metadata columns, the weight pages (`zoo.storage.parquet_pages`) and the fast checksum are then
all read from that same mapping. A shard that is not a regular file is refused without opening
it for reading (`zoo.storage.shard_file`).
"""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from zoo.storage.declared_sizes import footer_problem, mapped_size_problem
from zoo.storage.parquet_pages import mapped_pages
from zoo.storage.shard_file import CorruptShardError, open_regular

MAGIC = b"PAR1"


def _unreadable(path: Path, why: object) -> ValueError:
    return ValueError(f"{path}: not readable as Parquet ({why}); run `nfnzoo verify` on its zoo")


class OpenShard:
    """One Parquet shard, mapped and its footer checked; columns, pages and checksum read from the map."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        try:
            with open_regular(self.path) as handle:
                self.mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
        except CorruptShardError:
            raise
        except (OSError, ValueError) as error:  # missing, unreadable, or empty (nothing to map)
            raise _unreadable(self.path, getattr(error, "strerror", None) or error) from None
        tail = self.mapped[-8:]
        if len(self.mapped) < 12 or tail[4:] != MAGIC:
            raise _unreadable(self.path, "no Parquet magic bytes at its end")
        problem = footer_problem(int.from_bytes(tail[:4], "little"))
        if problem is None:
            self.buffer = pa.py_buffer(self.mapped)
            try:
                self.file = pq.ParquetFile(pa.BufferReader(self.buffer))
            except (pa.ArrowInvalid, OSError) as error:
                raise _unreadable(self.path, error) from None
            problem = mapped_size_problem(self.mapped, self.file.metadata, self.buffer)
        if problem is not None:
            raise CorruptShardError(f"{self.path}: {problem}; the shard is refused before it is read")

    @property
    def rows(self) -> int:
        return self.file.metadata.num_rows

    @property
    def column_names(self) -> list[str]:
        return self.file.schema_arrow.names

    def table(self, columns: list[str]) -> pa.Table:
        """`columns` decoded through Arrow; an unreadable page is an error naming the shard."""
        try:
            return self.file.read(columns=columns)
        except (pa.ArrowInvalid, OSError) as error:
            raise _unreadable(self.path, error) from None

    def pages(self, column: str) -> list[np.ndarray] | None:
        """The column's fixed-width PLAIN pages as views into the mapping, or None (read it with `table`)."""
        return mapped_pages(self.mapped, self.file, column)

    def xxh3(self) -> str:
        """The shard's fast checksum, hashed from the mapping."""
        import xxhash

        return xxhash.xxh3_128(self.mapped).hexdigest()


def open_shards(paths: list[Path]) -> list[OpenShard]:
    """Every shard of `paths` opened, in order."""
    return [OpenShard(path) for path in paths]


def read_columns(shards: list[OpenShard], columns: list[str]) -> pa.Table:
    """`columns` of the shards, concatenated in order; shards whose schemas differ are an error naming them."""
    try:
        return pa.concat_tables([shard.table(columns) for shard in shards])
    except pa.ArrowInvalid as error:
        raise _unreadable(", ".join(str(shard.path) for shard in shards)[:400], error) from None
