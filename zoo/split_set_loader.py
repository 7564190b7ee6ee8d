"""Named split sets of a packed zoo, read back as `ZooSplit`s or as metadata only.

A split set is an imported zoo's papers' split (`zoo.imports.writer.SplitSet`). It lists the ids of
each split in the set's order.

A config's manifest entry lists its sets under `split_sets`. Each name maps to a file, its sha256
and `shards`, the shards holding the set's rows. The file holds train, validation and test lists of
model ids.

A load reads and checks only those shards. First it checks the set's file (sha256). Then it checks
each holding shard against the manifest (`zoo.storage.integrity.check_shards`). Then it reads the
rows, a shard at a time, straight into one output per split. So memory holds the set's rows and one
shard's share of them. Each holder is opened once (`zoo.storage.open_shard`). A manifest may predate
`shards`. Then the holders are found from each shard's `model_id` column, read within the same
bounds. Every holder is then checked as above.

Why is a result's dataset hash still one its data was checked against, though other shards are
never read? A config's dataset hash is sha256 of the sorted (path, sha256) listing of all its
shards (`zoo.storage.listing.dataset_hash_of`). `Listing.checked_hash` recomputes it from the
manifest's listing. It refuses a manifest whose recorded hash differs. And every shard whose rows a
load returns is checked against its own entry of that same listing before a row is used. So every
byte a result used is a byte of the dataset the hash names. A shard it did not read cannot change
the result, corrupted or absent. A `shards` listing that leaves a holder out cannot put other rows
in. A model id found in no checked shard is an error, and `nfnzoo verify` checks the listing.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import torch

from zoo.loader import ZooSplit, decode_weights, metadata_columns
from zoo.storage.integrity import check_shards
from zoo.storage.listing import Listing
from zoo.storage.open_shard import OpenShard, open_shards
from zoo.weightspace import WeightBatch

SPLITS = ("train", "validation", "test")
Keep = Callable[[str, pd.DataFrame], "np.ndarray | None"]  # (split, its metadata) -> rows to keep, or None: all


def split_set_names(folder: str | Path, config: str | None = None) -> list[str]:
    """The named split sets a config records besides its own split (an import's papers' splits)."""
    return sorted(Listing.read(folder, config).record.get("split_sets", {}))


def _split_set_ids(listing: Listing, name: str, check: bool) -> tuple[dict[str, list], list[OpenShard]]:
    """(split -> model ids, the open shards holding them) of split set `name`.

    With `check`, its file and those shards are checked against the manifest first."""
    from zoo.storage.manifest import shard_path
    from zoo.validation.inputs import InputError, load_json_bytes, read_capped

    folder, config = listing.folder, listing.config
    sets = listing.record.get("split_sets", {})
    if name not in sets:
        raise ValueError(f"{folder} config {config!r} has no split set {name!r}; it has "
                         f"{sorted(sets) or 'none'} besides its own split (the default)")
    described = sets[name]
    path = shard_path(folder, described["path"], f"{folder}/manifest.json: split set {name}")
    data = read_capped(path, 64 * 2**20, "split set", follow=False)  # read once: the bytes hashed are those parsed
    if check and hashlib.sha256(data).hexdigest() != described["sha256"]:
        raise InputError(f"{path}: split set {name!r} differs from the manifest's sha256")
    wanted = load_json_bytes(data, str(path), strict=True)
    if not isinstance(wanted, dict) or not all(
            isinstance(wanted.get(s), list) and all(isinstance(m, str) for m in wanted[s]) for s in SPLITS):
        raise InputError(f"{path}: expected train, validation and test lists of model ids (strings)")
    listed = described.get("shards")  # each one of `files` (`zoo.storage.manifest`)
    opened = None
    if listed is not None:
        holders = [shard for shard in listing.files if shard["path"] in set(listed)]
    else:  # an older manifest: the holders found from each shard's model ids
        needed = pa.array(sorted({m for s in SPLITS for m in wanted[s]}))
        pairs = [(entry, shard) for entry, shard in zip(listing.files, open_shards(listing.paths(listing.files)))
                 if pc.any(pc.is_in(shard.table(["model_id"])["model_id"], value_set=needed)).as_py()]
        holders, opened = [entry for entry, _ in pairs], [shard for _, shard in pairs]
    if check:  # before a row of a listed holder is read
        check_shards(folder, holders)
    return wanted, opened if opened is not None else open_shards(listing.paths(holders))


def _rows(shards: list[OpenShard], needed: set, columns: list[str]):
    """(shard, its rows of the `needed` model ids, only `columns`) for each shard holding any."""
    wanted = pa.array(sorted(needed))
    for shard in shards:
        table = shard.table(["model_id", *columns])
        keep = pc.is_in(table["model_id"], value_set=wanted)
        if pc.any(keep).as_py():
            yield shard, table.filter(keep)


def _set_metadata(listing: Listing, shards: list[OpenShard], name: str, wanted: dict[str, list],
                  splits: tuple[str, ...]) -> dict[str, pd.DataFrame]:
    """Each of `splits`' metadata, its rows in the set's order (a listed row repeated where it repeats)."""
    needed = {m for s in splits for m in wanted[s]}
    if not shards:
        raise ValueError(f"split set {name!r}: none of its models is in config {listing.config!r}")
    names = metadata_columns(shards[0])
    tables = [table for _, table in _rows(shards, needed, [c for c in names if c != "model_id"])]
    if not tables:
        raise ValueError(f"split set {name!r}: none of its models is in config {listing.config!r}")
    metadata = pa.concat_tables(tables).select(names).to_pandas()
    position = {model_id: i for i, model_id in enumerate(metadata["model_id"])}
    missing = next((m for m in needed if m not in position), None)
    if missing is not None:
        raise ValueError(f"split set {name!r} lists model {missing}, which config {listing.config!r} does not hold")
    return {s: metadata.iloc[[position[m] for m in wanted[s]]].reset_index(drop=True) for s in splits}


def load_split_set(folder: str | Path | Listing, config: str | None, name: str, *, check: bool = True,
                   keep: Keep | None = None) -> dict[str, ZooSplit]:
    """The train, validation and test splits of the named split set `name` (`zoo.imports.writer.SplitSet`).

    Each split's rows come in the set's order, a row repeated where the set repeats it.

    `folder` is a zoo folder (its `config` is read) or a parsed `Listing`. With `check`, the set's file
    and the shards holding its rows are checked against the manifest. The module docstring says why
    that suffices. `keep(split, metadata)` narrows a split to the rows it marks before any weight is
    decoded. Rows go a shard at a time straight into each split's output. So memory holds the rows
    returned and one shard's share of them.
    """
    listing = folder if isinstance(folder, Listing) else Listing.read(folder, config)
    wanted, shards = _split_set_ids(listing, name, check)
    metadata = _set_metadata(listing, shards, name, wanted, SPLITS)
    wanted = dict(wanted)
    for split in SPLITS:
        chosen = keep(split, metadata[split]) if keep is not None else None
        if chosen is not None:
            chosen = np.asarray(chosen, dtype=bool)
            wanted[split] = [m for m, kept in zip(wanted[split], chosen) if kept]
            metadata[split] = metadata[split][chosen].reset_index(drop=True)
    needed = {m for s in SPLITS for m in wanted[s]}
    outputs: dict[str, list[torch.Tensor]] = {}
    space = None
    for _, table in _rows(shards, needed, ["weights"]):
        piece = decode_weights(table["weights"])  # this shard's rows of the set: the only transient copy
        space = space or piece.space
        local = {m: i for i, m in enumerate(table["model_id"].to_pylist())}
        for split in SPLITS:
            if split not in outputs:
                outputs[split] = [torch.empty((len(wanted[split]), *t.shape), dtype=torch.float32)
                                  for t in space.tensors]
            pairs = [(k, local[m]) for k, m in enumerate(wanted[split]) if m in local]
            if pairs:
                into, source = (torch.tensor(side, dtype=torch.long) for side in zip(*pairs))
                for output, tensor in zip(outputs[split], piece.tensors):
                    output[into] = tensor[source]
        del piece, table
    return {split: ZooSplit(WeightBatch(space, tuple(outputs[split])), metadata[split]) for split in SPLITS}


def read_split_set_metadata(folder: str | Path, config: str | None, name: str, split: str = "test", *,
                            check: bool = True) -> pd.DataFrame:
    """One split of split set `name` as `load_split_set` gives it, metadata columns only (no weights read)."""
    listing = Listing.read(folder, config)
    wanted, shards = _split_set_ids(listing, name, check)
    if split not in wanted:
        raise ValueError(f"split set {name!r} has no split {split!r}")
    return _set_metadata(listing, shards, name, wanted, (split,))[split]
