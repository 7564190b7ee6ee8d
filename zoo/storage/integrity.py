"""Checksums of a packed zoo: what a reader checks before it trusts a shard.

`manifest.json` records every shard's size, sha256 and fast checksum (`xxh3_128`). `file_checksums`
computes the sha256 and the fast checksum in one read. `check_shards` compares the files on disk
with those records. It raises `CorruptShardError` naming the first bad file.
`verified_dataset_hash` checks every shard of a config and recomputes its hash from the listing
(`zoo.storage.listing`). So a hash a benchmark result records is one the bytes were checked
against. It is not a string copied from the manifest. A reader that checks each shard it reads may
record the listing's hash alone. A split set does; `zoo.split_set_loader` says why that suffices.

A load checks the fast checksum in the pass that copies the pages (`hash_while_using`). It hashes
block by block while the pages are in cache. `zoo.loader` returns nothing unless every digest
matches. Any other reader runs `check_shards` first.

The sha256 stays the checksum of record. The dataset hash is made of it, and `nfnzoo verify --full`
and `nfnzoo publish` check it. An old manifest without the fast checksum is checked by sha256
alone. XXH3 catches corruption, truncation or replacement by accident. It is not cryptographic, so
a shard crafted to collide would pass a load and fail `verify --full`. Nothing is cached: every
benchmark load checks every shard it reads.

`shard_problem` checks the sizes a shard declares (`zoo.storage.declared_sizes`) before anything is
decoded. `read_named` does the same for a reader that opens shards by path (`nfnzoo info`). It also
names the file in Arrow's errors. The loaders open each shard once (`zoo.storage.open_shard`).
"""

from __future__ import annotations

import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from zoo.storage.declared_sizes import (check_declared_sizes, declared_rows,
                                        declared_size_problem)
from zoo.storage.shard_file import (CorruptShardError, open_regular,
                                    regular_file_problem)
from zoo.storage.listing import Listing, dataset_hash_of, entry_paths  # noqa: F401 (dataset_hash_of re-exported)


FAST = "xxh3_128"  # the manifest key of a shard's fast checksum
CHUNK = 2**22


def xxh3_file(path: Path) -> str:
    """Hashed through a memory map: the page cache's pages are read in place, never copied.

    That beats 4 MiB reads with a copy each; docs/performance.md has the figures."""
    import mmap

    import xxhash

    with open_regular(path) as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return xxhash.xxh3_128().hexdigest()
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
            return xxhash.xxh3_128(mapped).hexdigest()


HASH_BLOCK_BYTES = 2**21  # a fused load hashes and copies ~2 MiB at a time: the copy reads what the hash just cached


def hash_while_using(files: list[tuple[object, list[tuple[int, object]]]], use, threads: int = 2) -> list[str]:
    """The xxh3-128 of each mapped file, computed in the same pass that consumes it.

    Each file gets one thread, up to `threads`. Its (end offset, job) list is walked in file order.
    The bytes up to each job's end are hashed, then `use(job)` runs while they are in cache. The
    tail after the last job is hashed last. A caller trusts what `use` produced only once every
    digest matches its manifest (`zoo.loader.read_weights(..., checksums=...)`)."""
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
    """Drops the used pages of `mapped` in [start, end) from this process's resident set.

    `end` is page-aligned down first. The page cache keeps the pages, so a later touch reads them
    again. But a load's RSS holds the rows it copied, not every shard page it mapped. Returns where
    the next release starts."""
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


def shard_problem(path: Path, entry: dict, *, full: bool = False) -> str | None:
    """What is wrong with the shard at `path` against its manifest entry, or None when it matches.

    It checks the fast checksum where the entry has one. With `full`, or where the entry has none, it
    checks sha256 instead. Then it checks the sizes the shard declares (`declared_size_problem`) and
    its row count against the entry's."""
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
    problem = declared_size_problem(path)
    rows = declared_rows(path) if problem is None else None
    if rows is not None and rows != entry["rows"]:
        return f"{rows:,} rows, manifest says {entry['rows']:,} (a manifest that misstates its shards)"
    return problem


def check_shards(folder: str | Path, entries: list[dict], *, threads: int = 2, full: bool = False) -> None:
    """Raises `CorruptShardError` naming the first shard, in manifest order, that does not match.

    A match is as `shard_problem` says: the fast checksum, or sha256 with `full`."""
    folder = Path(folder)
    paths = entry_paths(folder, entries)  # before any file is touched
    with ThreadPoolExecutor(max(1, threads)) as pool:
        problems = list(pool.map(lambda pair: shard_problem(*pair, full=full), zip(paths, entries)))
    found = [f"{folder / entry['path']}: {problem}" for entry, problem in zip(entries, problems) if problem]
    if found:
        more = f" (and {len(found) - 1} more shards)" if len(found) > 1 else ""
        raise CorruptShardError(f"{found[0]}{more}; run `nfnzoo verify {folder}` for the full list, and "
                                "re-pack or re-download the zoo")


def verified_dataset_hash(listing: Listing | str | Path, config: str | None = None, *,
                          skip: Iterable[str] = ()) -> str:
    """The dataset hash of a config, after checking each of its shards against the manifest.

    `listing` is a parsed `Listing`, or a folder whose `config` is read. Shards whose manifest paths
    are in `skip` are left out: the caller checked them as it read them. The hash is also recomputed
    from the listing (`Listing.checked_hash`), so an edited `dataset_hash` is caught too.
    """
    if not isinstance(listing, Listing):
        listing = Listing.read(listing, config)
    skipped = set(skip)
    check_shards(listing.folder, [shard for shard in listing.files if shard["path"] not in skipped])
    return listing.checked_hash()


def release_hash(manifest: dict) -> str:
    """The hash a release tag names: a lone config's dataset hash; for several, a hash of all.

    The combined hash is sha256 of the sorted `[config, dataset_hash]` pairs, as compact JSON. So it
    depends only on what the repo holds, not on the order or the folders it came from. With one
    config the tag shows the same prefix as `nfnzoo info` and the results files.
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
    """Runs `read()` of the Parquet files `paths`, once each is safe to open.

    Each must be a regular file (a FIFO is never opened) whose declared sizes are within bounds
    (`check_declared_sizes`). An unreadable one becomes an error naming it."""
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
