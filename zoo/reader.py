"""One entry point for reading a zoo's rows: `read_zoo(data, config, split_set, keep=...)`.

`data` is a folder or a Hub dataset repo `ORG/NAME[@REVISION]` (`zoo.hub.resolve.resolve_data`).
An existing path wins. `read_zoo` parses the manifest once (`zoo.storage.listing.Listing`) and
picks the config. It chooses the reader: the config's own run-disjoint split
(`zoo.loader.load_listed`) or a split set the config records (`zoo.split_set_loader`). Each split
is narrowed to the rows `keep` names before any weight is decoded. It returns the rows, the hash
they were checked against, and what a result records about the zoo (`ZooRead`). Nothing above
`zoo/` reads a manifest key for a run.

The hash is one the returned rows were checked against. For the config's own split, every shard
is checked in the pass that reads it. The listing's hash is then recomputed. For a split set, the
shards holding its rows are checked against the listing. The set's file is checked against its
recorded sha256.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    import numpy as np
    import pandas

    from zoo.loader import ZooSplit

SPLITS = ("train", "validation", "test")
DEFAULT_SPLITS = "default"  # the zoo's own run-disjoint split (its shards' split)
MAX_SOURCE = 4_096  # characters of a recorded source (`benchmarks.results.MAX_PATH`)


@dataclasses.dataclass(frozen=True)
class ZooRead:
    """A zoo config's three splits and how they were read."""
    splits: dict[str, "ZooSplit"]
    config: str
    dataset_hash: str  # the hash the rows were checked against
    family: str
    source: str | None  # how anyone gets these bytes (`config_source`)
    repo: str | None = None  # the Hub repo and commit the reference resolved to, if it was one
    revision: str | None = None
    split_set: str = DEFAULT_SPLITS
    split_set_sha256: str | None = None  # a split set's file, checked by the read (the hash does not cover it)
    architectures: dict[str, Any] = dataclasses.field(default_factory=dict)  # architecture id -> its record
    spec: dict[str, Any] | None = None  # the spec the config was generated from (INR editing reads its images)


def config_sources(record: dict[str, Any]) -> list[str]:
    """Where a config's bytes come from, as its manifest entry `record` says, most specific first.

    First the paper's release it was imported from, then the spec and profile it was generated from."""
    imported, spec = record.get("imported"), record.get("spec")
    sources = []
    if isinstance(imported, dict) and isinstance(imported.get("url"), str):
        sources.append(f"imported from {imported['url']}")
    if isinstance(spec, dict) and isinstance(spec.get("name"), str):
        sources.append(f"regenerated from spec {spec['name']} ({spec.get('profile') or 'full'})")
    return sources


def config_source(record: dict[str, Any], repo: str | None = None, revision: str | None = None) -> str | None:
    """How anyone gets a config's bytes, or None where the manifest records none.

    That is the Hub repo at the commit a run resolved, else the first of `config_sources`."""
    if repo is not None and revision is not None:
        return f"{repo}@{revision}"
    sources = config_sources(record)
    return sources[0][:MAX_SOURCE] if sources else None


def config_name(folder: str | Path, config: str | None = None) -> str:
    """`config` checked against the manifest in `folder` (parsed, its names checked), or its only config."""
    from zoo.storage.listing import Listing

    return Listing.read(folder, config).config


def config_record(folder: str | Path, config: str | None = None) -> dict[str, Any]:
    """`config`'s entry (the only config's when None) of the manifest in `folder`, checked where it is read."""
    from zoo.storage.listing import Listing

    return Listing.read(folder, config).record


def split_set_files(folder: str | Path, config: str | None = None) -> dict[str, str]:
    """Each split set's file sha256, as the config's manifest entry lists it."""
    return {name: described["sha256"]
            for name, described in config_record(folder, config).get("split_sets", {}).items()}


def read_zoo(data: str | Path, config: str | None = None, split_set: str = DEFAULT_SPLITS, *,
             keep: Callable[[str, "pandas.DataFrame"], "np.ndarray | None"] | None = None) -> ZooRead:
    """The three splits of `config` (the only one when None) of the zoo at `data`.

    See the module docstring. `keep(split, metadata)` narrows each split before its weights are
    decoded (None: every row)."""
    from zoo import loader  # pyarrow: imported when a zoo is read, not when the CLI starts
    from zoo.hub.resolve import resolve_data
    from zoo.split_set_loader import load_split_set
    from zoo.storage.integrity import verified_dataset_hash
    from zoo.storage.listing import Listing

    source = resolve_data(data, config=config)
    path = source.folder
    if not os.path.isdir(path):  # os.path: a name too long for the file system is no folder, not an OSError
        shown = ascii(str(path)[:200])[1:-1] + (f"… ({len(str(path)):,} characters)" if len(str(path)) > 200 else "")
        raise FileNotFoundError(f"dataset folder {shown} does not exist; generate or download a zoo first "
                                "(or give a Hub dataset repo ORG/NAME[@REVISION])")
    listing = Listing.read(path, config)  # the manifest, parsed once for the whole read
    record = listing.record
    sets = record.get("split_sets", {})
    try:
        if split_set == DEFAULT_SPLITS:
            read = {shard["path"] for shard in listing.files if shard["split"] in SPLITS}
            splits = {name: loader.load_listed(listing, name,
                                               keep=None if keep is None else functools.partial(keep, name))
                      for name in SPLITS}
            checked_hash = verified_dataset_hash(listing, skip=read)  # each shard checked as it was read
        else:
            splits = load_split_set(listing, None, split_set, keep=keep)
            checked_hash = listing.checked_hash()
    except MemoryError as error:  # refused before the copy (`zoo.memory_budget`): say what would fit
        raise MemoryError(f"{error}; a split set reads fewer rows (--set task.splits=NAME; "
                          f"{'this zoo records: ' + ', '.join(sorted(sets)) if sets else 'this zoo records none'}), "
                          "or a subset (--set task.subset=...), or a machine with more memory") from None
    return ZooRead(splits, listing.config, checked_hash, record["family"],
                   config_source(record, source.repo, source.revision), source.repo, source.revision, split_set,
                   sets[split_set]["sha256"] if split_set != DEFAULT_SPLITS else None,
                   dict(record.get("architectures", {})), record.get("spec"))
