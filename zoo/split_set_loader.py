"""Named split sets of a packed zoo (an imported zoo's papers' splits, `zoo.imports.writer.SplitSet`):
the ids of each split in the set's order, read back as `ZooSplit`s or as metadata only.

A config's manifest entry lists its sets (`split_sets`: name -> file and sha256); the file holds
train, validation and test lists of model ids. With `check`, the set's file (sha256) and every
shard of the config (`zoo.storage.integrity.check_shards`) are checked first. Rows are gathered a
shard at a time, so memory holds the set's rows and one shard.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import torch

from zoo.loader import ZooSplit, decode_weights, metadata_columns
from zoo.storage.folder import read_manifest, resolve_config
from zoo.storage.integrity import check_shards, entry_paths, read_named
from zoo.weightspace import WeightBatch


def split_set_names(folder: str | Path, config: str | None = None) -> list[str]:
    """The named split sets a config records besides its own split (an import's papers' splits)."""
    manifest = read_manifest(folder)
    return sorted(manifest["configs"][resolve_config(manifest, config, folder)].get("split_sets", {}))


def _split_set_ids(folder: Path, config: str | None, name: str, check: bool) -> tuple[str, dict, dict[str, list]]:
    """(config, its manifest entry, split -> model ids) of split set `name`, its file checked with `check`."""
    from zoo.storage.manifest import shard_path
    from zoo.storage.integrity import sha256_file
    from zoo.validation.inputs import InputError, read_json_file

    manifest = read_manifest(folder)
    config = resolve_config(manifest, config, folder)
    entry = manifest["configs"][config]
    sets = entry.get("split_sets", {})
    if name not in sets:
        raise ValueError(f"{folder} config {config!r} has no split set {name!r}; it has "
                         f"{sorted(sets) or 'none'} besides its own split (the default)")
    described = sets[name]
    path = shard_path(folder, described["path"], f"{folder}/manifest.json: split set {name}")
    if check and (not path.is_file() or sha256_file(path) != described["sha256"]):
        raise InputError(f"{path}: split set {name!r} is missing or differs from the manifest's sha256")
    wanted = read_json_file(path, 64 * 2**20, strict=True, what="split set")
    if not isinstance(wanted, dict) or not all(isinstance(wanted.get(s), list) for s in ("train", "validation", "test")):
        raise InputError(f"{path}: expected train, validation and test lists of model ids")
    if check:
        check_shards(folder, entry["files"])
    return config, entry, wanted


def _split_set_rows(folder: Path, config: str, entry: dict, name: str, needed: set, columns: list[str] | None
                    ) -> list[pa.Table]:
    """The rows of `needed` model ids, shard by shard (only `columns`, or all)."""
    pieces = []
    for path_of_shard in entry_paths(folder, entry["files"]):
        ids = read_named(path_of_shard, lambda: pq.read_table(path_of_shard, columns=["model_id"]))["model_id"]
        keep = pc.is_in(ids, value_set=pa.array(sorted(needed)))
        if not pc.any(keep).as_py():
            continue
        pieces.append(read_named(path_of_shard, lambda: pq.read_table(path_of_shard, columns=columns,
                                                                       memory_map=True)).filter(keep))
    if not pieces:
        raise ValueError(f"split set {name!r}: none of its models is in config {config!r}")
    return pieces


def _positions(metadata: pd.DataFrame, needed: set, name: str, config: str) -> dict[str, int]:
    position = {model_id: i for i, model_id in enumerate(metadata["model_id"])}
    missing = next((m for m in needed if m not in position), None)
    if missing is not None:
        raise ValueError(f"split set {name!r} lists model {missing}, which config {config!r} does not hold")
    return position


def load_split_set(folder: str | Path, config: str | None, name: str, *, check: bool = True) -> dict[str, ZooSplit]:
    """The train, validation and test splits of the named split set `name` (`zoo.imports.writer.SplitSet`):
    each split's rows in the set's order, a row repeated where the set repeats it.

    The set's file and every shard are checked against the manifest (with `check`); rows are
    gathered a shard at a time, so memory holds the set's rows and one shard.
    """
    folder = Path(folder)
    config, entry, wanted = _split_set_ids(folder, config, name, check)
    needed = {m for ids in wanted.values() for m in ids}
    pieces = [ZooSplit(decode_weights(table["weights"]), table.drop_columns(["weights"]).to_pandas())
              for table in _split_set_rows(folder, config, entry, name, needed, None)]
    metadata = pd.concat([p.metadata for p in pieces], ignore_index=True)
    space = pieces[0].weights.space
    weights = WeightBatch(space, tuple(torch.cat(parts) for parts in zip(*(p.weights.tensors for p in pieces))))
    position = _positions(metadata, needed, name, config)
    splits = {}
    for split in ("train", "validation", "test"):
        rows = torch.tensor([position[m] for m in wanted[split]], dtype=torch.long)
        splits[split] = ZooSplit(weights[rows], metadata.iloc[rows.numpy()].reset_index(drop=True))
    return splits


def read_split_set_metadata(folder: str | Path, config: str | None, name: str, split: str = "test", *,
                            check: bool = True) -> pd.DataFrame:
    """One split of split set `name` as `load_split_set` gives it, metadata columns only (no weights read)."""
    folder = Path(folder)
    config, entry, wanted = _split_set_ids(folder, config, name, check)
    if split not in wanted:
        raise ValueError(f"split set {name!r} has no split {split!r}")
    needed = set(wanted[split])
    files = entry_paths(folder, entry["files"])
    tables = _split_set_rows(folder, config, entry, name, needed, metadata_columns(files[0]))
    metadata = pa.concat_tables(tables).to_pandas()
    position = _positions(metadata, needed, name, config)
    return metadata.iloc[[position[m] for m in wanted[split]]].reset_index(drop=True)
