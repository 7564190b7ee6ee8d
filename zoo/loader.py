"""The fast loader: a packed split -> one stacked tensor per layer, plus the metadata.

Same-architecture rows hold safetensors files with byte-identical headers. So every tensor is the
same byte range of every row. The loader reads the `weights` column straight from Parquet:
memory-mapped, uncompressed plain pages. It checks that the rows share length and header. Then it
copies each tensor's byte range of all rows at once into a preallocated (rows, *shape) tensor. That
is one strided copy per tensor, with no per-row Python loop. Rows that do not share a header
(several architectures) take a per-row path. They must be narrowed to one architecture first.

Reading a split is one chain. A step outside this file names its module.
`load_split(folder, config, split, keep=...)` calls `load_listed(listing, split, keep=...)`, which
runs these steps.

1. `Listing.read` parses the manifest once. It gives the split's shard entries, their paths
   confined to the folder (`zoo.storage.listing`).
2. `OpenShard` maps each shard once. It reads the footer and bounds the declared sizes before Arrow
   decodes anything (`zoo.storage.open_shard`).
3. `read_columns` reads every column but `weights` from the mapping (`zoo.storage.open_shard`).
4. `_kept_rows` builds the row mask: one architecture, and/or `keep(metadata)` (a task's rows).
5. `_read_weights` takes each shard's PLAIN pages in the same mapping, or Arrow's column. It copies
   the mask's rows into the outputs. The same pass hashes each shard whole
   (`integrity.hash_while_using`, xxh3-128). A digest that differs from the manifest's raises
   `CorruptShardError`.
6. On any failure, `integrity.check_shards` says which shard is bad; else the error stands.

So each shard is opened once and checked in that same read. A manifest without the fast checksum
is checked by sha256 first (`check_shards`). Memory holds the kept rows' weights, never the split's
other rows. Nor does it hold the shard pages once copied: they are released as the hash passes
them. `zoo.split_set_loader` reads a named split set's rows through the same shards and checks.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import torch

from zoo.memory_budget import allocation_problem
from zoo.storage.integrity import FAST, HASH_BLOCK_BYTES, CorruptShardError, check_shards, hash_while_using
from zoo.storage.listing import Listing
from zoo.storage.row_layout import RowLayout, decode_row, rows_view
from zoo.storage.open_shard import OpenShard, open_shards, read_columns
from zoo.weightspace import WeightBatch


@dataclasses.dataclass(frozen=True)
class ZooSplit:
    weights: WeightBatch  # all rows, one (rows, *shape) float tensor per parameter
    metadata: pd.DataFrame  # every other column, in the same row order

    def __len__(self) -> int:
        return len(self.metadata)


def split_entries(folder: str | Path, config: str | None, split: str) -> list[dict]:
    """The manifest entries (path, split, rows, bytes, checksums) of one split's shards."""
    return Listing.read(folder, config).split(split)


def split_files(folder: str | Path, config: str | None, split: str) -> list[Path]:
    listing = Listing.read(folder, config)
    return listing.paths(listing.split(split))


def dataset_hash(folder: str | Path, config: str | None = None) -> str:
    """The dataset hash the manifest records (unchecked: `zoo.storage.integrity.verified_dataset_hash`
    checks the shards first)."""
    return Listing.read(folder, config).record["dataset_hash"]


def check_row(row: bytes | memoryview, where: str = "row 0") -> None:
    """Raises a one-line `ValueError` (prefixed `where`) unless the fast loader could decode `row`.

    Decoding it must not allocate more than the row holds. `nfnzoo verify` runs this on every row."""
    RowLayout.of(row, where)


def _copier(layout: RowLayout, outputs: list[np.ndarray]):
    """The copy of one job (rows, skip, position[, chosen]) into `outputs`.

    Rows whose header differs are decoded row by row. With `chosen` (row numbers within `rows`), only
    those rows are copied, to `position` on."""

    def run(job: tuple) -> None:
        rows, skip, position = job[:3]
        if len(job) > 3 and job[3] is not None:
            if len(job[3]) == 0:
                return
            rows = rows[job[3]]  # a copy of the chosen rows of one block (a page, or ~2 MiB when hashing)
        views = [o[position:position + len(rows)] for o in outputs]
        if not layout.copy(rows, skip, views):
            for i in range(len(rows)):
                decode_row(layout, rows[i, skip:].tobytes(), outputs, position + i)

    return run


def _fill(layout: RowLayout, jobs: list[tuple[np.ndarray, int, int]], fallback: list[tuple[pa.Array, int]],
          outputs: list[np.ndarray], threads: int) -> None:
    """Runs the block copies (in threads: numpy releases the GIL), then the per-row fallbacks."""
    run = _copier(layout, outputs)
    if threads > 1 and len(jobs) > 1:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(run, jobs))
    else:
        for job in jobs:
            run(job)
    for chunk, position in fallback:
        for i, value in enumerate(chunk):
            decode_row(layout, value.as_py(), outputs, position + i)


def _batch(layout: RowLayout, outputs: list[np.ndarray]) -> WeightBatch:
    total = outputs[0].shape[0]
    return WeightBatch(layout.space, tuple(torch.from_numpy(o).view(total, *t.shape)
                                           for o, t in zip(outputs, layout.space.tensors)))


def _allocate(layout: RowLayout, total: int, held_bytes: int, where: str) -> list[np.ndarray]:
    """The outputs for `total` rows, once the rows are known to hold the bytes they would fill."""
    if total * layout.data_bytes > held_bytes:
        raise ValueError(f"{where}: rows of several architectures; filter by the `architecture` column first "
                         f"(load_split(..., architecture=ID)); or a corrupt shard: {total:,} rows of "
                         f"{layout.data_bytes:,} weight bytes each do not fit in the {held_bytes:,} bytes they hold")
    problem = allocation_problem(total * layout.space.num_params * 4)  # before the copy, not halfway through it
    if problem is not None:
        raise MemoryError(f"{where}: {total:,} rows: {problem}")
    return [np.empty((total, t.numel), dtype=np.float32) for t in layout.space.tensors]


def _held_bytes(jobs: list, fallback: list) -> int:
    """Bytes of the row values behind `jobs` and `fallback` (what an allocation may not exceed)."""
    held = sum(job[0].shape[0] * (job[0].shape[1] - job[1]) for job in jobs)
    return held + sum(int(pc.sum(pc.binary_length(chunk)).as_py() or 0) for chunk, _ in fallback)


def _arrow_jobs(column: pa.ChunkedArray | pa.Array, position: int, jobs: list, fallback: list) -> int:
    for chunk in (column.chunks if isinstance(column, pa.ChunkedArray) else [column]):
        rows = rows_view(chunk)
        if rows is not None:
            jobs.append((rows, 0, position))
        elif len(chunk):
            fallback.append((chunk, position))
        position += len(chunk)
    return position


def decode_weights(column: pa.ChunkedArray | pa.Array, *, threads: int = 2) -> WeightBatch:
    """Decodes an in-memory `weights` column of one architecture into a WeightBatch."""
    if len(column) == 0:
        raise ValueError("no rows to decode")
    layout = RowLayout.of(column[0].as_py())
    jobs, fallback = [], []
    _arrow_jobs(column, 0, jobs, fallback)
    outputs = _allocate(layout, len(column), _held_bytes(jobs, fallback), "weights column")
    _fill(layout, jobs, fallback, outputs, threads)
    return _batch(layout, outputs)


def _row_bytes(jobs: list, fallback: list, at: int) -> bytes:
    """The value of row `at` (counted over every job's and fallback chunk's rows)."""
    for block, skip, position in jobs:
        if position <= at < position + len(block):
            return block[at - position, skip:].tobytes()
    chunk, position = next((chunk, position) for chunk, position in fallback
                           if position <= at < position + len(chunk))
    return chunk[at - position].as_py()


def _chosen(jobs: list, fallback: list, rows: np.ndarray) -> tuple[list, list, int]:
    """`jobs` and `fallback` narrowed to the rows `rows`, a boolean mask over all their rows in order.

    Each job gets the row numbers it copies and the output position of the first. Each fallback chunk
    is filtered. Returns them and the number of rows chosen."""
    before = np.concatenate([[0], np.cumsum(rows, dtype=np.int64)])  # chosen rows before each row
    chosen_jobs = []
    for job in jobs:
        block, skip, position = job[:3]
        picked = np.flatnonzero(rows[position:position + len(block)])
        chosen_jobs.append((block, skip, int(before[position]),
                            None if len(picked) == len(block) else picked))
    chosen_fallback = [(chunk.filter(pa.array(rows[position:position + len(chunk)])), int(before[position]))
                       for chunk, position in fallback]
    return chosen_jobs, [(c, p) for c, p in chosen_fallback if len(c)], int(before[-1])


def read_weights(files: list[Path], *, threads: int = 2, checksums: list[str] | None = None,
                 rows: np.ndarray | None = None) -> WeightBatch:
    """Decodes the `weights` column of Parquet shards (`_read_weights` of the files opened)."""
    return _read_weights(open_shards(files), threads=threads, checksums=checksums, rows=rows)


def _read_weights(shards: list[OpenShard], *, threads: int = 2, checksums: list[str] | None = None,
                  rows: np.ndarray | None = None) -> WeightBatch:
    """Decodes the `weights` column of open shards, straight from the mapping where pages allow.

    Such pages are read by `zoo.storage.parquet_pages`; the others go through Arrow.

    With `checksums` (each shard's manifest xxh3-128), a directly read shard is hashed as it is
    copied. One pass does both, ~2 MiB at a time (`zoo.storage.integrity.hash_while_using`). Any
    other shard is hashed before. `CorruptShardError` names the first shard whose digest differs;
    nothing is returned.

    With `rows`, a boolean mask over the shards' rows in order, only those rows are decoded. Memory
    holds them, never the others. With `checksums`, every shard is still hashed whole."""
    jobs, fallback, keep_alive, position, sources, hashed = [], [], [], 0, [], []
    for number, shard in enumerate(shards):
        sources.append((position, shard.path))
        pages = shard.pages("weights")
        if pages is not None:
            base, blocks = np.frombuffer(shard.mapped, np.uint8).ctypes.data, []
            for page in pages:  # each value is preceded by its 4-byte length
                step = len(page) if checksums is None else max(1, HASH_BLOCK_BYTES // page.shape[1])
                for low in range(0, len(page), step):
                    block = page[low:low + step]
                    blocks.append((block.ctypes.data - base + block.nbytes, len(jobs)))
                    jobs.append((block, 4, position))
                    position += len(block)
            hashed.append((number, shard.mapped, blocks))
        else:
            column = shard.table(["weights"])["weights"]
            keep_alive.append(column)
            position = _arrow_jobs(column, position, jobs, fallback)
    if position == 0:
        raise ValueError("no rows to decode")
    held, total, at = _held_bytes(jobs, fallback), position, 0
    if rows is not None:
        rows = np.asarray(rows, dtype=bool)
        if rows.shape != (position,):
            raise ValueError(f"rows: a mask of {rows.shape} for the {position:,} rows of {len(shards)} shard(s)")
        at = int(np.argmax(rows)) if rows.any() else 0  # the layout is the first chosen row's
    source, row = next((path, at - begin) for begin, path in reversed(sources) if begin <= at)
    layout = RowLayout.of(_row_bytes(jobs, fallback, at), f"{source}: row {row}")
    if rows is not None:
        jobs, fallback, total = _chosen(jobs, fallback, rows)
    outputs = _allocate(layout, total, held, ", ".join(str(shard.path) for shard in shards)[:400])
    if checksums is None:
        _fill(layout, jobs, fallback, outputs, threads)
        return _batch(layout, outputs)
    direct = [number for number, _, _ in hashed]
    digests = {number: shard.xxh3() for number, shard in enumerate(shards) if number not in direct}
    found = hash_while_using([(mapped, [(end, jobs[j]) for end, j in blocks]) for _, mapped, blocks in hashed],
                             _copier(layout, outputs), threads)
    digests.update(zip(direct, found))
    bad = [shards[number].path for number in range(len(shards)) if digests[number] != checksums[number]]
    if bad:
        raise CorruptShardError(f"{bad[0]}: xxh3_128 differs from the manifest (corrupted)")
    done = {j for _, _, blocks in hashed for _, j in blocks}
    _fill(layout, [job for j, job in enumerate(jobs) if j not in done], fallback, outputs, threads)  # Arrow's rows
    return _batch(layout, outputs)


def load_split(folder: str | Path, config: str | None = None, split: str = "train", *,
               architecture: str | None = None, keep: Callable[[pd.DataFrame], np.ndarray | None] | None = None,
               check: bool = True) -> ZooSplit:
    """Reads one split of a packed zoo: stacked weights and the metadata columns (`load_listed`)."""
    return load_listed(Listing.read(folder, config), split, architecture=architecture, keep=keep, check=check)


def load_listed(listing: Listing, split: str = "train", *, architecture: str | None = None,
                keep: Callable[[pd.DataFrame], np.ndarray | None] | None = None, check: bool = True) -> ZooSplit:
    """One split of a parsed config: the module docstring's chain.

    With `check` (the default), every shard's size and fast checksum are checked against the
    manifest. Where the pages allow it, that happens in the same pass as the read. A manifest
    without the fast checksum is checked by sha256 first. `zoo.storage.integrity.CorruptShardError`
    names a bad shard and nothing is returned. Pass False only when the caller has just checked.

    `architecture` keeps the rows of one architecture. `keep`, given the split's whole metadata,
    returns a boolean mask of the rows to keep (or None: all). Only kept rows are decoded, so
    memory never holds the split's others. Every shard is still checked whole.
    """
    entries = listing.split(split)
    files = listing.paths(entries)
    fused = check and all(FAST in entry for entry in entries)
    if check and not fused:  # a manifest without the fast checksum: sha256 before anything is read
        check_shards(listing.folder, entries)
    try:  # a missing, resized or changed shard fails a read or its digest; check_shards then names it
        shards = open_shards(files)
        metadata = _metadata(shards)
        declared = sum(entry["rows"] for entry in entries)
        if len(metadata) != declared:  # check_shards (below) names the shard whose count is wrong
            raise CorruptShardError(f"{listing.folder}: split {split!r} has {len(metadata):,} rows; the manifest "
                                    f"says {declared:,}")
        rows = _kept_rows(metadata, architecture, keep, split)
        weights = _read_weights(shards, checksums=[entry[FAST] for entry in entries] if fused else None, rows=rows)
    except MemoryError:  # refused before the copy (`zoo.memory_budget`): the shards are not to blame
        raise
    except Exception:
        if fused:
            check_shards(listing.folder, entries)
        raise
    if rows is not None:
        metadata = metadata[rows].reset_index(drop=True)
    return ZooSplit(weights, metadata)


def _kept_rows(metadata: pd.DataFrame, architecture: str | None,
               keep: Callable[[pd.DataFrame], np.ndarray | None] | None, split: str) -> np.ndarray | None:
    """The mask of the rows `load_split` decodes (None: every row)."""
    rows = None
    if architecture is not None:
        rows = (metadata["architecture"] == architecture).to_numpy(dtype=bool)
        if not rows.any():
            raise ValueError(f"no rows of architecture {architecture!r} in split {split!r}")
    chosen = keep(metadata) if keep is not None else None
    if chosen is not None:
        chosen = np.asarray(chosen, dtype=bool)
        if chosen.shape != (len(metadata),):
            raise ValueError(f"split {split!r}: keep gave a mask of shape {chosen.shape} for {len(metadata):,} rows")
        rows = chosen if rows is None else rows & chosen
    return None if rows is not None and rows.all() else rows


def read_metadata(folder: str | Path, config: str | None = None, split: str = "train", *,
                  check: bool = True) -> pd.DataFrame:
    """One split's metadata columns without its weights (checked like `load_split`)."""
    listing = Listing.read(folder, config)
    entries = listing.split(split)
    if check:
        check_shards(listing.folder, entries)
    return _metadata(open_shards(listing.paths(entries)))


def _read_metadata(files: list[Path]) -> pd.DataFrame:
    return _metadata(open_shards(files))


def _metadata(shards: list[OpenShard]) -> pd.DataFrame:
    """Every column but `weights` of the open shards, as one frame."""
    return read_columns(shards, metadata_columns(shards[0])).to_pandas()


def metadata_columns(shard: OpenShard) -> list[str]:
    """A shard's column names but `weights`."""
    return [name for name in shard.column_names if name != "weights"]
