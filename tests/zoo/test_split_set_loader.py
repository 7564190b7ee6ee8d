"""A split set reads and checks only the shards holding its rows, and still records a checked dataset hash.

The importer writes a set's rows in shards of their own and lists them (`split_sets.<name>.shards`);
the other shards can be corrupted or gone and the set still loads, with the config's dataset hash
recomputed from the listing (`zoo.storage.listing.Listing.checked_hash`). A corrupted shard that
holds the set's rows is refused, naming the file (the negative control).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the hand-made Small CNN Zoo fixture

from small_cnn_fixture import make_zoo

CONFIG_SHARD_BYTES = 12 * 20_000  # about a dozen rows a shard: many shards from a small zoo


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    from zoo.imports.small_cnn_zoo import import_zoo

    root = tmp_path_factory.mktemp("split_set_shards")
    make_zoo(root / "src", runs=24, steps=(0, 40, 86))
    import_zoo(root / "src", root / "out", max_shard_bytes=CONFIG_SHARD_BYTES)
    return root / "out"


def _entry(folder: Path) -> dict:
    from zoo.storage.folder import read_manifest

    (entry,) = read_manifest(folder)["configs"].values()
    return entry


def _copy(imported: Path, tmp_path: Path) -> Path:
    shutil.copytree(imported, tmp_path / "zoo")
    return tmp_path / "zoo"


def _flip_middle_byte(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))


def _same(ours: dict, theirs: dict) -> None:
    for name in ("train", "validation", "test"):
        assert ours[name].metadata.equals(theirs[name].metadata), name
        assert all(torch.equal(a, b) for a, b in zip(ours[name].weights.tensors, theirs[name].weights.tensors)), name


def test_the_importer_writes_a_sets_rows_in_shards_of_their_own(imported):
    import pyarrow.parquet as pq

    entry = _entry(imported)
    listed = entry["split_sets"]["nfn"]["shards"]
    assert 0 < len(listed) < len(entry["files"])
    members = {m for ids in json.loads((imported / entry["split_sets"]["nfn"]["path"]).read_text()).values()
               for m in ids}
    for shard in entry["files"]:
        ids = set(pq.read_table(imported / shard["path"], columns=["model_id"])["model_id"].to_pylist())
        assert (ids <= members) if shard["path"] in listed else not (ids & members), shard["path"]


def test_a_split_set_loads_with_its_other_shards_corrupted_or_gone(imported, tmp_path):
    from benchmarks.harness import load_splits
    from zoo.split_set_loader import load_split_set

    expected = load_split_set(imported, None, "nfn")
    folder = _copy(imported, tmp_path)
    entry = _entry(folder)
    others = [shard["path"] for shard in entry["files"] if shard["path"] not in entry["split_sets"]["nfn"]["shards"]]
    assert len(others) >= 2
    _flip_middle_byte(folder / others[0])
    (folder / others[1]).unlink()
    _same(load_split_set(folder, None, "nfn"), expected)
    splits, dataset = load_splits(folder, None, "nfn")
    assert dataset["dataset_hash"] == entry["dataset_hash"]
    _same(splits, expected)


def test_a_corrupted_shard_holding_the_sets_rows_is_refused_naming_it(imported, tmp_path):
    from benchmarks.harness import load_splits
    from zoo.split_set_loader import load_split_set
    from zoo.storage.integrity import CorruptShardError

    folder = _copy(imported, tmp_path)
    holder = folder / _entry(folder)["split_sets"]["nfn"]["shards"][-1]
    _flip_middle_byte(holder)
    with pytest.raises(CorruptShardError, match=f"{holder}: xxh3_128 differs from the manifest"):
        load_split_set(folder, None, "nfn")
    with pytest.raises(CorruptShardError, match=str(holder)):
        load_splits(folder, None, "nfn")


def test_an_edited_dataset_hash_is_refused_without_reading_a_shard(imported, tmp_path):
    from benchmarks.harness import load_splits
    from zoo.storage.integrity import CorruptShardError

    folder = _copy(imported, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    (entry,) = manifest["configs"].values()
    entry["dataset_hash"] = "0" * 64
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(CorruptShardError, match="records dataset hash 000000000000"):
        load_splits(folder, None, "nfn")


def test_a_manifest_without_the_shard_listing_finds_the_holders_by_their_ids(imported, tmp_path):
    from zoo.dataset.verify import verify
    from zoo.split_set_loader import load_split_set

    expected = load_split_set(imported, None, "nfn")
    folder = _copy(imported, tmp_path)
    manifest = json.loads((folder / "manifest.json").read_text())
    (entry,) = manifest["configs"].values()
    holders = entry["split_sets"]["nfn"].pop("shards")
    (folder / "manifest.json").write_text(json.dumps(manifest))
    _same(load_split_set(folder, None, "nfn"), expected)
    entry["split_sets"]["nfn"]["shards"] = holders[1:]  # a listing that leaves a holder out
    (folder / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="split set 'nfn' lists model"):
        load_split_set(folder, None, "nfn")
    assert any("`shards` listing omits" in problem for problem in verify(folder).problems)
