"""Checksums of a packed zoo: what a reader checks before it trusts a shard.

`manifest.json` records every shard's size and sha256, and a config's dataset hash is the
hash of its shards' (path, sha256) listing (`dataset_hash_of`). `check_shards` compares the
files on disk with those records and raises `CorruptShardError` naming the first bad file;
`verified_dataset_hash` checks every shard of a config and recomputes its hash from the
listing (`checked_listing_hash`), so a hash that a benchmark result records is one the bytes were
checked against, not just a string copied from the manifest. A reader that checks each shard it
reads against that listing may record `checked_listing_hash` alone: a split set does
(`zoo.split_set_loader` says why that suffices).

Every shard also has a fast checksum, `xxh3_128` (XXH3's 128-bit hash, ~20 GiB/s a core against
sha256's ~1.4 here), written in the same read as its sha256 (`file_checksums`). A load checks that
one: `zoo.loader.load_split` hashes each shard in the same pass that copies its pages, block by
block while they are in cache (`hash_while_using`), and returns nothing unless every digest
matches; otherwise, and for any other reader, `check_shards` hashes first. Either way a checked
load runs near the unchecked one's speed (`make bench-loading`). sha256 stays the checksum of record: the dataset hash is made of it,
`nfnzoo verify --full` and `nfnzoo publish` check it, and a manifest written before the fast
checksum existed is checked by sha256 alone. XXH3 catches any corruption, truncation or
replacement by accident; it is not a cryptographic hash, so a shard crafted to collide with
another's xxh3 would pass a load and fail `verify --full`. Every benchmark load checks every
shard it reads and nothing is cached. `zoo.loader.load_split(..., check=False)` skips it for callers that
have just checked. `read_named` turns Arrow's errors on an unreadable shard ("Parquet magic
bytes not found"), which do not say which file, into one that does.

`read_named` is also where every reader (`nfnzoo info`, the loaders, `bench run`) opens a shard,
and `shard_problem` where `nfnzoo verify` and `check_shards` check one: both first check the
sizes the shard declares (`declared_size_problem`) before anything is decoded. A few hundred KB
of compressed repeated strings can declare gigabytes a column; each column chunk's uncompressed
size, from the footer and from its page headers (Arrow allocates by the latter), is bounded per
row (`zoo.validation.bounds`: the weights column by what one member may be, every other column by
what a row's metadata is) and per chunk.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import stat
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from zoo.storage.folder import MANIFEST, read_manifest, resolve_config
from zoo.validation.bounds import (MAX_PARQUET_COLUMN_CHUNK_BYTES, MAX_PARQUET_FOOTER_BYTES,
                                   MAX_PARQUET_METADATA_ROW_BYTES, MAX_PARQUET_ROWS_PER_GROUP,
                                   MAX_PARQUET_WEIGHTS_ROW_BYTES)
from zoo.storage.manifest import shard_path


class CorruptShardError(ValueError):
    """A shard on disk does not match its manifest entry (missing, resized or changed bytes)."""


FAST = "xxh3_128"  # the manifest key of a shard's fast checksum
CHUNK = 2**22


NOT_REGULAR = "not a regular file (a pipe, socket or device)"


def regular_file_problem(path: Path) -> str | None:
    """Why `path` cannot be read as a shard without blocking, or None for a regular file: "missing",
    "a folder, not a file", or `NOT_REGULAR` (a FIFO's open would wait for a writer forever)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    return None if stat.S_ISREG(mode) else NOT_REGULAR


def open_regular(path: Path):
    """`path` opened for binary reading, never blocking: opened non-blocking and checked to be a
    regular file by its descriptor (a FIFO swapped in after a check is refused, not waited on);
    anything else is `CorruptShardError` naming the file."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise CorruptShardError(f"{path}: a folder, not a file") from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise CorruptShardError(f"{path}: {NOT_REGULAR}")
    return os.fdopen(descriptor, "rb")


def xxh3_file(path: Path) -> str:
    """Hashed through a memory map: the page cache's pages are read in place, never copied (~25 GiB/s
    a core here, faster than a copy; 4 MiB reads and a copy each ran at ~6)."""
    import mmap

    import xxhash

    with open_regular(path) as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return xxhash.xxh3_128().hexdigest()
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return xxhash.xxh3_128(mapped).hexdigest()


HASH_BLOCK_BYTES = 2**21  # a fused load hashes and copies ~2 MiB at a time: the copy reads what the hash just cached


def hash_while_using(files: list[tuple[object, list[tuple[int, object]]]], use, threads: int = 2) -> list[str]:
    """The xxh3-128 of each mapped file, computed in the same pass that consumes it: for each
    file (one thread each, up to `threads`), its (end offset, job) list in file order is walked,
    hashing the bytes up to each job's end and then calling `use(job)` while they are in cache;
    the tail after the last job is hashed last. A caller trusts what `use` produced only once
    every digest matches its manifest (`zoo.loader.read_weights(..., checksums=...)`)."""
    import xxhash

    def digest(item: tuple[object, list[tuple[int, object]]]) -> str:
        mapped, blocks = item
        hasher, view, cursor, released = xxhash.xxh3_128(), memoryview(mapped), 0, 0
        for end, job in blocks:
            hasher.update(view[cursor:end])
            cursor = end
            use(job)
            released = _release(mapped, released, end)
        hasher.update(view[cursor:])
        _release(mapped, released, len(view))
        return hasher.hexdigest()

    with ThreadPoolExecutor(max(1, threads)) as pool:
        return list(pool.map(digest, files))


def _release(mapped: object, start: int, end: int) -> int:
    """Drops the pages of `mapped` in [start, end) (page-aligned down) from this process's resident set
    once they are used: the page cache keeps them, so a later touch reads them again, but a load's RSS
    holds the rows it copied, not every shard page it mapped. Returns where the next release starts."""
    import mmap

    end -= end % mmap.PAGESIZE
    if end > start and hasattr(mapped, "madvise") and hasattr(mmap, "MADV_DONTNEED"):
        mapped.madvise(mmap.MADV_DONTNEED, start, end - start)
        return end
    return start


def file_checksums(path: Path) -> dict[str, str]:
    """A shard's manifest checksums, {"sha256": ..., "xxh3_128": ...}, from one read of the file."""
    import xxhash

    sha, fast = hashlib.sha256(), xxhash.xxh3_128()
    with open_regular(path) as handle:
        for block in iter(lambda: handle.read(CHUNK), b""):
            sha.update(block)
            fast.update(block)
    return {"sha256": sha.hexdigest(), FAST: fast.hexdigest()}


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open_regular(path) as handle:
        for block in iter(lambda: handle.read(2**22), b""):
            digest.update(block)  # releases the GIL: shards hash in parallel threads
    return digest.hexdigest()


def dataset_hash_of(files: Iterable[dict]) -> str:
    """A config's content hash: its shards' paths and checksums (not versions or times)."""
    listing = sorted((f["path"], f["sha256"]) for f in files)
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()


def declared_size_problem(path: Path) -> str | None:
    """What the Parquet file at `path` declares beyond `zoo.validation.bounds` (a column chunk's
    uncompressed bytes per row of its row group, or in all), or None: from the footer's metadata
    and the chunks' page headers, before any column is decoded. A file Arrow cannot open is left to
    the reader's own error (None here), but one that is not a regular file is named as such
    (`regular_file_problem`): a FIFO is never opened."""
    problem = regular_file_problem(path)
    if problem is not None:
        return None if problem == "missing" else problem
    try:
        status = path.stat()
    except OSError:
        return None
    return _declared_size_problem(str(path), status.st_size, status.st_mtime_ns, status.st_ino)


@functools.lru_cache(maxsize=256)
def _declared_size_problem(path: str, size: int, mtime_ns: int, inode: int) -> str | None:
    footer = _footer_length(path, size)
    if footer is None:
        return None  # not Parquet: the reader says so, naming the file
    if footer > MAX_PARQUET_FOOTER_BYTES:
        return (f"declares a {footer:,}-byte footer; at most {MAX_PARQUET_FOOTER_BYTES:,} "
                "(zoo.validation.bounds.MAX_PARQUET_FOOTER_BYTES)")
    try:
        metadata = pq.read_metadata(path)
    except (pa.ArrowInvalid, OSError):
        return None
    problem = _page_problem(path, metadata)
    return problem if problem is not None else _dictionary_problem(path, metadata)


def _page_problem(path: str, metadata: pq.FileMetaData) -> str | None:
    """A column chunk whose footer or page headers declare more than the bounds allow, or None."""
    import mmap

    from zoo.storage.parquet_pages import declared_page_bytes

    with open_regular(path) as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
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


def _dictionary_problem(path: str, metadata: pq.FileMetaData) -> str | None:
    """A dictionary-encoded string column is small on disk and in its pages, and as large as its
    rows times their values once decoded (one 60 KB value repeated 100,000 times is 6 GB): each
    such chunk is read as a dictionary (its pages, bounded above, and an index a row) and the
    bytes its rows expand to are bounded as a declared size is."""
    import pyarrow.compute as pc

    names = sorted({metadata.row_group(g).column(c).path_in_schema
                    for g in range(metadata.num_row_groups) for c in range(metadata.num_columns)
                    if metadata.row_group(g).column(c).has_dictionary_page
                    and metadata.row_group(g).column(c).physical_type == "BYTE_ARRAY"
                    and "." not in metadata.row_group(g).column(c).path_in_schema})
    if not names:
        return None
    try:
        parquet = pq.ParquetFile(path, read_dictionary=names)
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
    """Raises `CorruptShardError` naming the first of `paths` whose declared sizes exceed the
    bounds (`declared_size_problem`)."""
    for path in [paths] if isinstance(paths, Path) else paths:
        problem = declared_size_problem(Path(path))
        if problem is not None:
            raise CorruptShardError(f"{path}: {problem}; the shard is refused before it is read")


def shard_problem(path: Path, entry: dict, *, full: bool = False) -> str | None:
    """What is wrong with the shard at `path` against its manifest entry, or None when it matches:
    by its fast checksum where the entry has one, by sha256 with `full` or where it has none; then
    the sizes it declares (`declared_size_problem`)."""
    problem = regular_file_problem(path)
    if problem is not None:
        return problem
    size = path.stat().st_size
    if size != entry["bytes"]:
        return f"{size} bytes, manifest says {entry['bytes']} (truncated or replaced)"
    if full or FAST not in entry:
        if sha256_file(path) != entry["sha256"]:
            return "sha256 differs from the manifest (corrupted)"
    elif xxh3_file(path) != entry[FAST]:
        return "xxh3_128 differs from the manifest (corrupted)"
    return declared_size_problem(path)


def entry_paths(folder: str | Path, entries: list[dict]) -> list[Path]:
    """The files of manifest shard entries, each confined to `folder` (`zoo.storage.manifest.shard_path`)."""
    return [shard_path(folder, entry["path"], f"{Path(folder) / MANIFEST}: shard {ascii(entry['path'])[:80]}")
            for entry in entries]


def check_shards(folder: str | Path, entries: list[dict], *, threads: int = 2, full: bool = False) -> None:
    """Raises `CorruptShardError` naming the first shard (in manifest order) that does not match
    (`shard_problem`: the fast checksum, or sha256 with `full`)."""
    folder = Path(folder)
    paths = entry_paths(folder, entries)  # before any file is touched
    with ThreadPoolExecutor(max(1, threads)) as pool:
        problems = list(pool.map(lambda pair: shard_problem(*pair, full=full), zip(paths, entries)))
    found = [f"{folder / entry['path']}: {problem}" for entry, problem in zip(entries, problems) if problem]
    if found:
        more = f" (and {len(found) - 1} more shards)" if len(found) > 1 else ""
        raise CorruptShardError(f"{found[0]}{more}; run `nfnzoo verify {folder}` for the full list, and "
                                "re-pack or re-download the zoo")


def checked_listing_hash(folder: str | Path, config: str | None = None) -> str:
    """The dataset hash of `config`, recomputed from the manifest's shard listing (path, sha256) and
    checked against the hash it records; no shard is read. A reader that checks every shard it reads
    against that listing (`check_shards`, or `zoo.loader.load_split`'s one-pass check) may record this
    hash: what it read is then part of the data the hash names (`zoo.split_set_loader`)."""
    manifest = read_manifest(folder)
    config = resolve_config(manifest, config, folder)
    entry = manifest["configs"][config]
    recorded = dataset_hash_of(entry["files"])
    if recorded != entry["dataset_hash"]:
        raise CorruptShardError(f"{Path(folder) / 'manifest.json'}: config {config!r} records dataset hash "
                                f"{entry['dataset_hash'][:12]}…, but its shards' checksums give {recorded[:12]}…")
    return recorded


def verified_dataset_hash(folder: str | Path, config: str | None = None, *, skip: Iterable[str] = ()) -> str:
    """The dataset hash of `config`, after checking every shard of it against the manifest
    (but those whose manifest paths are in `skip`: a caller that checks them as it reads them).

    Also recomputes the hash from the manifest's shard listing (`checked_listing_hash`), so an edited
    `dataset_hash` in the manifest is caught too.
    """
    manifest = read_manifest(folder)
    config = resolve_config(manifest, config, folder)
    skipped = set(skip)
    check_shards(folder, [shard for shard in manifest["configs"][config]["files"] if shard["path"] not in skipped])
    return checked_listing_hash(folder, config)


def release_hash(manifest: dict) -> str:
    """The hash a release tag names: a lone config's dataset hash; for several, a hash of all.

    The combined hash is sha256 of the sorted `[config, dataset_hash]` pairs (compact JSON),
    so it depends only on what the repo holds, not on the order or the folders it came from;
    with one config the tag shows the same prefix as `nfnzoo info` and the results files.
    """
    configs = manifest["configs"]
    if len(configs) == 1:
        return next(iter(configs.values()))["dataset_hash"]
    pairs = sorted([name, entry["dataset_hash"]] for name, entry in configs.items())
    return hashlib.sha256(json.dumps(pairs, separators=(",", ":")).encode()).hexdigest()


def release_tag(manifest: dict) -> str:
    """`v<package version>-<content hash[:8]>`, e.g. `v0.1.0-1a2b3c4d`."""
    return f"v{manifest['package_version']}-{release_hash(manifest)[:8]}"


def read_named(paths: Path | list[Path], read):
    """Runs `read()` of the Parquet files `paths`, once each file is a regular file (a FIFO is never
    opened) whose declared sizes are within bounds (`check_declared_sizes`); an unreadable one
    becomes an error naming it."""
    check_declared_sizes(paths)
    try:
        return read()
    except (pa.ArrowInvalid, OSError) as error:
        paths = [paths] if isinstance(paths, Path) else paths
        culprit = next((p for p in paths if not _opens(p)), None)
        where = str(culprit) if culprit is not None else ", ".join(map(str, paths))
        raise ValueError(f"{where}: not readable as Parquet ({error}); run `nfnzoo verify` on its zoo") from None


def _opens(path: Path) -> bool:
    try:
        pq.read_metadata(path)
        return True
    except (pa.ArrowInvalid, OSError):
        return False
