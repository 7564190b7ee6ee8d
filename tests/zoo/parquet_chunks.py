"""Every column chunk of a Parquet shard with what its page headers declare (`declared_page_bytes`)."""

from __future__ import annotations

import mmap
from pathlib import Path

import pyarrow.parquet as pq


def declared_chunks(shard: Path) -> list[tuple[object, object, int, int]]:
    """(row group metadata, column chunk metadata, page bytes the headers declare, values they declare),
    for each chunk of each row group, the pages walked from the chunk's first (dictionary or data) page."""
    from zoo.storage.parquet_pages import declared_page_bytes

    metadata = pq.read_metadata(shard)
    found = []
    with open(shard, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        for g in range(metadata.num_row_groups):
            group = metadata.row_group(g)
            for c in range(metadata.num_columns):
                chunk = group.column(c)
                start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
                found.append((group, chunk, *declared_page_bytes(mapped, start, chunk.total_compressed_size)))
    return found
