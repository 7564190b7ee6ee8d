"""The fast loader: a packed split -> one stacked tensor per layer, plus the metadata.

Same-architecture rows hold safetensors files with byte-identical headers, so every tensor
is the same byte range of every row. The loader reads the `weights` column straight from
Parquet (memory-mapped, uncompressed plain pages), checks that the rows share length and
header, and copies each tensor's byte range of all rows at once into a preallocated
(rows, *shape) tensor: one strided copy per tensor, no per-row Python loop. Rows that do
not share a header (several architectures) take a per-row path and must be narrowed to one
architecture first.

Reading a split is one chain, every step in this file but the two marked:

    load_split(folder, config, split, keep=...)
      split_entries        the manifest's shard entries of the split, paths confined to the folder
      _read_metadata       every column but `weights` (`integrity.read_named`: each shard a regular
                           file whose declared sizes are bounded before Arrow decodes anything)
      _kept_rows           the row mask: one architecture, and/or `keep(metadata)` (a task's rows)
      read_weights         per shard: its PLAIN pages mapped (`parquet_pages.fixed_width_pages`) or
                           Arrow's column; the mask's rows copied into the outputs while the same pass
                           hashes each shard whole (`integrity.hash_while_using`, xxh3-128)
                           -> CorruptShardError when a digest differs from the manifest's
      on any failure       `integrity.check_shards` says which shard is bad, else the error stands

So each shard is read once, checked in that same read (a manifest without the fast checksum: sha256
first, `check_shards`), and memory holds the kept rows' weights, never the split's others, nor the
shard pages once copied (they are released as the hash passes them). `zoo.split_set_loader` reads a
named split set's rows through the same bounded reads and checks, from the shards holding them.
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
import pyarrow.parquet as pq
import torch

from zoo.memory_budget import allocation_problem
from zoo.storage import safetensors_io
from zoo.storage.folder import read_manifest, resolve_config
from zoo.storage.integrity import (FAST, HASH_BLOCK_BYTES, CorruptShardError, check_shards, entry_paths,
                                    hash_while_using, read_named, xxh3_file)
from zoo.storage.parquet_pages import fixed_width_pages
from zoo.storage.record import METADATA_KEY, parse_weights_metadata
from zoo.weightspace import WeightBatch, WeightSpace


@dataclasses.dataclass(frozen=True)
class ZooSplit:
    weights: WeightBatch  # all rows, one (rows, *shape) float tensor per parameter
    metadata: pd.DataFrame  # every other column, in the same row order

    def __len__(self) -> int:
        return len(self.metadata)


def split_entries(folder: str | Path, config: str | None, split: str) -> list[dict]:
    """The manifest entries (path, split, rows, bytes, sha256) of one split's shards."""
    folder = Path(folder)
    manifest = read_manifest(folder)
    config = resolve_config(manifest, config, folder)
    entries = [f for f in manifest["configs"][config]["files"] if f["split"] == split]
    if not entries:
        available = sorted(manifest["configs"][config]["splits"])
        raise ValueError(f"{folder} config {config!r} has no split {split!r}; it has {available}")
    return entries


def split_files(folder: str | Path, config: str | None, split: str) -> list[Path]:
    return entry_paths(folder, split_entries(folder, config, split))


def dataset_hash(folder: str | Path, config: str | None = None) -> str:
    """The dataset hash the manifest records (unchecked: `zoo.storage.integrity.verified_dataset_hash`
    checks the shards first)."""
    manifest = read_manifest(folder)
    return manifest["configs"][resolve_config(manifest, config, folder)]["dataset_hash"]


def _rows_view(chunk: pa.Array) -> np.ndarray | None:
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
class _Layout:
    """Where each tensor sits inside a row of one architecture."""

    space: WeightSpace
    identity: str  # the architecture metadata every row of this layout carries
    start: int  # first byte of the safetensors data section
    ranges: tuple[tuple[int, int], ...]  # per tensor, byte range within the data section
    header: np.ndarray  # the shared header bytes, [0, start)

    @classmethod
    def of(cls, row: bytes, where: str = "row 0") -> "_Layout":
        """The layout of `row`, every declared shape checked against the row's real bytes first
        (`safetensors_io.read_header`): nothing is allocated by a size the row does not hold."""
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


def check_row(row: bytes | memoryview, where: str = "row 0") -> None:
    """Raises a one-line `ValueError` (prefixed `where`) unless the fast loader could decode `row`
    without allocating more than it holds (`nfnzoo verify` runs this on every row)."""
    _Layout.of(row, where)


def _decode_row(layout: _Layout, value: bytes, outputs: list[np.ndarray], row: int) -> None:
    tensors, metadata = safetensors_io.decode(value)
    if metadata.get(METADATA_KEY) != layout.identity:
        raise ValueError("rows of several architectures; filter by the `architecture` column first "
                         "(load_split(..., architecture=ID))")
    for output, spec in zip(outputs, layout.space.tensors):
        output[row] = tensors[spec.name].reshape(-1).numpy()


def _copier(layout: _Layout, outputs: list[np.ndarray]):
    """The copy of one job (rows, skip, position[, chosen]) into `outputs` (row by row where its header
    differs); with `chosen` (row numbers within `rows`), only those rows, to `position` on."""

    def run(job: tuple) -> None:
        rows, skip, position = job[:3]
        if len(job) > 3 and job[3] is not None:
            if len(job[3]) == 0:
                return
            rows = rows[job[3]]  # a copy of the chosen rows of one block (a page, or ~2 MiB when hashing)
        views = [o[position:position + len(rows)] for o in outputs]
        if not layout.copy(rows, skip, views):
            for i in range(len(rows)):
                _decode_row(layout, rows[i, skip:].tobytes(), outputs, position + i)

    return run


def _fill(layout: _Layout, jobs: list[tuple[np.ndarray, int, int]], fallback: list[tuple[pa.Array, int]],
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
            _decode_row(layout, value.as_py(), outputs, position + i)


def _batch(layout: _Layout, outputs: list[np.ndarray]) -> WeightBatch:
    total = outputs[0].shape[0]
    return WeightBatch(layout.space, tuple(torch.from_numpy(o).view(total, *t.shape)
                                           for o, t in zip(outputs, layout.space.tensors)))


def _allocate(layout: _Layout, total: int, held_bytes: int, where: str) -> list[np.ndarray]:
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
        rows = _rows_view(chunk)
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
    layout = _Layout.of(column[0].as_py())
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
    """`jobs` and `fallback` narrowed to the rows `rows` (a boolean mask over all their rows, in order):
    each job gets the row numbers it copies and the output position of the first; each fallback chunk
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
    """Decodes the `weights` column of Parquet shards, straight from the page cache when the
    pages allow it (`zoo.storage.parquet_pages`), else through Arrow.

    With `checksums` (each file's manifest xxh3-128), a directly read file is hashed in the same
    pass that copies it, ~2 MiB at a time (`zoo.storage.integrity.hash_while_using`), any other
    file before; `CorruptShardError` names the first file whose digest differs, and nothing is
    returned.

    With `rows` (a boolean mask over the files' rows, in order), only those rows are decoded: memory
    holds them, never the others (every file is still hashed whole with `checksums`)."""
    jobs, fallback, keep_alive, position, sources, hashed = [], [], [], 0, [], []
    for number, path in enumerate(files):
        sources.append((position, path))
        direct = read_named(path, lambda: fixed_width_pages(path, "weights"))
        if direct is not None:
            mapped, pages = direct
            keep_alive.append(mapped)
            base, blocks = np.frombuffer(mapped, np.uint8).ctypes.data, []
            for page in pages:  # each value is preceded by its 4-byte length
                step = len(page) if checksums is None else max(1, HASH_BLOCK_BYTES // page.shape[1])
                for low in range(0, len(page), step):
                    block = page[low:low + step]
                    blocks.append((block.ctypes.data - base + block.nbytes, len(jobs)))
                    jobs.append((block, 4, position))
                    position += len(block)
            hashed.append((number, mapped, blocks))
        else:
            column = read_named(path, lambda: pq.read_table(path, columns=["weights"], memory_map=True)["weights"])
            keep_alive.append(column)
            position = _arrow_jobs(column, position, jobs, fallback)
    if position == 0:
        raise ValueError("no rows to decode")
    held, total, at = _held_bytes(jobs, fallback), position, 0
    if rows is not None:
        rows = np.asarray(rows, dtype=bool)
        if rows.shape != (position,):
            raise ValueError(f"rows: a mask of {rows.shape} for the {position:,} rows of {len(files)} shard(s)")
        at = int(np.argmax(rows)) if rows.any() else 0  # the layout is the first chosen row's
    source, row = next((path, at - begin) for begin, path in reversed(sources) if begin <= at)
    layout = _Layout.of(_row_bytes(jobs, fallback, at), f"{source}: row {row}")
    if rows is not None:
        jobs, fallback, total = _chosen(jobs, fallback, rows)
    outputs = _allocate(layout, total, held, ", ".join(map(str, files))[:400])
    if checksums is None:
        _fill(layout, jobs, fallback, outputs, threads)
        return _batch(layout, outputs)
    direct = [number for number, _, _ in hashed]
    digests = {number: xxh3_file(path) for number, path in enumerate(files) if number not in direct}
    found = hash_while_using([(mapped, [(end, jobs[j]) for end, j in blocks]) for _, mapped, blocks in hashed],
                             _copier(layout, outputs), threads)
    digests.update(zip(direct, found))
    bad = [files[number] for number in range(len(files)) if digests[number] != checksums[number]]
    if bad:
        raise CorruptShardError(f"{bad[0]}: xxh3_128 differs from the manifest (corrupted)")
    done = {j for _, _, blocks in hashed for _, j in blocks}
    _fill(layout, [job for j, job in enumerate(jobs) if j not in done], fallback, outputs, threads)  # Arrow's rows
    return _batch(layout, outputs)


def load_split(folder: str | Path, config: str | None = None, split: str = "train", *,
               architecture: str | None = None, keep: Callable[[pd.DataFrame], np.ndarray | None] | None = None,
               check: bool = True) -> ZooSplit:
    """Reads one split of a packed zoo: stacked weights and the metadata columns (the module
    docstring's chain).

    With `check` (the default) every shard's size and fast checksum (sha256 where the manifest
    has none) are checked against the manifest, in the same pass as the read where the pages
    allow it; `zoo.storage.integrity.CorruptShardError` names a bad one and nothing is returned.
    Pass False only when the caller has just checked them.

    `architecture` keeps the rows of one architecture; `keep`, given the split's whole metadata,
    returns a boolean mask of the rows to keep (or None: all). Only kept rows are decoded, so
    memory holds them and never the split's others; every shard is still checked whole.
    """
    entries = split_entries(folder, config, split)
    files = entry_paths(folder, entries)
    fused = check and all(FAST in entry for entry in entries)
    if check and not fused:  # a manifest without the fast checksum: sha256 before anything is read
        check_shards(folder, entries)
    try:  # a missing, resized or changed shard fails a read or its digest; check_shards then names it
        metadata = _read_metadata(files)
        declared = sum(entry["rows"] for entry in entries)
        if len(metadata) != declared:  # check_shards (below) names the shard whose count is wrong
            raise CorruptShardError(f"{folder}: split {split!r} has {len(metadata):,} rows; the manifest "
                                    f"says {declared:,}")
        rows = _kept_rows(metadata, architecture, keep, split)
        weights = read_weights(files, checksums=[entry[FAST] for entry in entries] if fused else None, rows=rows)
    except MemoryError:  # refused before the copy (`zoo.memory_budget`): the shards are not to blame
        raise
    except Exception:
        if fused:
            check_shards(folder, entries)
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
    entries = split_entries(folder, config, split)
    if check:
        check_shards(folder, entries)
    return _read_metadata(entry_paths(folder, entries))


def _read_metadata(files: list[Path]) -> pd.DataFrame:
    return read_named(files, lambda: pq.read_table(files, columns=metadata_columns(files[0])).to_pandas())


def metadata_columns(path: Path) -> list[str]:
    """A shard's column names but `weights`."""
    return [name for name in read_named(path, lambda: pq.read_schema(path)).names if name != "weights"]
