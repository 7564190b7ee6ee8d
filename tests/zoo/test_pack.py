"""Packing staging into Parquet shards, manifest and card: complete, split by run, reproducible."""

from __future__ import annotations

import collections
import json
import shutil
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import safetensors.torch
import torch
import yaml

from zoo.training.train import CLASSIFICATION_METRICS as METRIC_NAMES
from zoo.storage.folder import MANIFEST, STAGING_FOLDER, read_manifest
from zoo.loader import load_split
from zoo.dataset.pack import IncompleteZooError, pack, sha256_file
from zoo.planning.plan import assign_splits, plan_runs
from zoo.storage.record import from_row
from zoo.storage.staging import Staging
from zoo.dataset.verify import verify

CONFIG = "cnn-mnist"
SHARD_NAME = re.compile(r"^(train|validation|test)-(\d{5})-of-(\d{5})-([0-9a-f]{8})\.parquet$")
HPARAM_NAMES = ("optimizer", "learning_rate", "l2", "init", "init_std", "activation", "dropout", "train_fraction")


def shard_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in (folder / "data").rglob("*") if p.is_file())


def read_rows(folder: Path) -> dict[str, list[dict]]:
    """Every packed row by split, in shard order, straight from Parquet."""
    manifest = read_manifest(folder)
    rows = collections.defaultdict(list)
    for entry in manifest["configs"][CONFIG]["files"]:
        rows[entry["split"]].extend(pq.read_table(folder / entry["path"]).to_pylist())
    return rows


@pytest.fixture(scope="module")
def staged(tiny_zoo: Path) -> dict:
    staging = Staging(tiny_zoo / STAGING_FOLDER)
    return {model_id: staging.read(model_id) for model_id in staging.model_ids()}


def test_every_staged_record_is_packed_once_in_its_runs_split(tiny_zoo, tiny_zoo_spec, staged, assert_same_record):
    split_of = assign_splits([r.run_id for r in plan_runs(tiny_zoo_spec)], tiny_zoo_spec)
    rows = read_rows(tiny_zoo)
    seen = collections.Counter(row["model_id"] for split_rows in rows.values() for row in split_rows)
    assert seen == collections.Counter(list(staged))  # each staged checkpoint exactly once, nothing else
    for split, split_rows in rows.items():
        for row in split_rows:
            record = staged[row["model_id"]]
            assert split == split_of[record.run_id]
            assert row["architecture"] == record.architecture_id
            assert_same_record(from_row(row, HPARAM_NAMES, METRIC_NAMES), record)
            loaded = safetensors.torch.load(row["weights"])
            assert all(torch.equal(loaded[name], tensor) for name, tensor in record.weights.items())
    runs_per_split = {split: {row["run_id"] for row in split_rows} for split, split_rows in rows.items()}
    assert sum(len(r) for r in runs_per_split.values()) == len(set().union(*runs_per_split.values()))


def test_load_split_matches_the_staged_records(tiny_zoo, staged):
    for split in ("train", "validation", "test"):
        loaded = load_split(tiny_zoo, CONFIG, split)
        assert len(loaded) == len(loaded.weights) > 0
        for i, row in loaded.metadata.iterrows():
            record = staged[row["model_id"]]
            assert (row["run_id"], row["epoch"], row["seed"], row["status"]) == (
                record.run_id, record.epoch, record.seed, record.status)
            assert {name: row[name] for name in HPARAM_NAMES} == record.hparams
            assert {name: row[name] for name in METRIC_NAMES} == record.metrics
            state_dict = loaded.weights.state_dict(i)
            assert list(state_dict) == list(record.weights)
            assert all(torch.equal(state_dict[n], t) for n, t in record.weights.items())


def test_rows_are_ordered_by_plan_position_then_epoch(tiny_zoo, tiny_zoo_spec):
    position = {r.run_id: r.index for r in plan_runs(tiny_zoo_spec)}
    for split_rows in read_rows(tiny_zoo).values():
        keys = [(position[row["run_id"]], row["epoch"]) for row in split_rows]
        assert keys == sorted(keys)


def test_packing_twice_is_byte_identical(tiny_zoo, tiny_zoo_copy):
    pack(tiny_zoo_copy)
    assert shard_files(tiny_zoo_copy) == shard_files(tiny_zoo)
    for name in shard_files(tiny_zoo) + [MANIFEST, "README.md"]:
        assert (tiny_zoo_copy / name).read_bytes() == (tiny_zoo / name).read_bytes(), name


def test_shards_are_named_by_split_index_and_count(tiny_zoo):
    manifest = read_manifest(tiny_zoo)
    files = manifest["configs"][CONFIG]["files"]
    assert shard_files(tiny_zoo) == sorted(f["path"] for f in files)  # no leftovers, nothing unlisted
    for entry in files:
        folder, name = entry["path"].rsplit("/", 1)
        assert folder == f"data/{CONFIG}"
        match = SHARD_NAME.match(name)
        assert match and match.group(1) == entry["split"]
        assert (int(match.group(2)), int(match.group(3))) == (0, 1)  # one shard per split at the default size
        assert match.group(4) == entry["sha256"][:8]  # the content tag: old and new shards coexist until commit


def test_manifest_counts_and_checksums_match_the_files(tiny_zoo, tiny_zoo_spec):
    manifest = read_manifest(tiny_zoo)
    entry = manifest["configs"][CONFIG]
    rows = read_rows(tiny_zoo)
    for file in entry["files"]:
        path = tiny_zoo / file["path"]
        assert file["sha256"] == sha256_file(path)
        assert file["bytes"] == path.stat().st_size
        assert file["rows"] == pq.ParquetFile(path).metadata.num_rows
    assert entry["splits"] == {split: len(r) for split, r in rows.items()}
    assert entry["runs"] == {split: len({row["run_id"] for row in r}) for split, r in rows.items()}
    assert entry["packed_checkpoints"] == entry["planned_checkpoints"] == 18 and entry["complete"] is True
    assert entry["status"] == dict(collections.Counter(row["status"] for r in rows.values() for row in r))
    assert entry["spec_hash"] == tiny_zoo_spec.hash() and entry["spec"] == tiny_zoo_spec.to_data()
    (arch_id, arch), = entry["architectures"].items()
    assert arch["num_params"] == 4970 and arch["architecture"] == tiny_zoo_spec.architecture
    assert {row["architecture"] for r in rows.values() for row in r} == {arch_id}
    assert [c["name"] for c in entry["columns"]][-2:] == ["status", "weights"]


def test_card_lists_every_split_with_its_exact_shards(tiny_zoo):
    text = (tiny_zoo / "README.md").read_text()
    header = yaml.safe_load(text.split("---\n")[1])
    (config,) = header["configs"]
    assert config["config_name"] == CONFIG
    files = read_manifest(tiny_zoo)["configs"][CONFIG]["files"]
    assert config["data_files"] == [{"split": s, "path": [f["path"] for f in files if f["split"] == s]}
                                    for s in ("train", "validation", "test")]  # exact files: never a leftover
    assert "4,970 parameters" in text and "Incomplete" not in text


def test_small_shards_split_a_config_and_load_in_order(tiny_zoo, tiny_zoo_copy):
    row_bytes = len(read_rows(tiny_zoo)["train"][0]["weights"])
    manifest = pack(tiny_zoo_copy, max_shard_bytes=5 * row_bytes)
    files = manifest["configs"][CONFIG]["files"]
    by_split = collections.defaultdict(list)
    for entry in files:
        by_split[entry["split"]].append(entry)
    for split, entries in by_split.items():
        count = len(entries)
        assert [e["path"].rsplit("/", 1)[1] for e in entries] == [
            f"{split}-{i:05d}-of-{count:05d}-{e['sha256'][:8]}.parquet" for i, e in enumerate(entries)]
        assert all(e["rows"] <= 5 for e in entries)
    assert len(by_split["train"]) == 3  # 12 train rows at 5 per shard
    assert shard_files(tiny_zoo_copy) == sorted(e["path"] for e in files)  # the old single shards are gone
    for split in by_split:
        many, one = load_split(tiny_zoo_copy, CONFIG, split), load_split(tiny_zoo, CONFIG, split)
        assert many.metadata.equals(one.metadata)
        assert torch.equal(many.weights.flatten(), one.weights.flatten())
    assert verify(tiny_zoo_copy).ok


def test_a_partly_staged_zoo_is_packed_only_when_asked_and_then_marked_incomplete(tiny_zoo_copy, tiny_zoo_spec):
    staging = Staging(tiny_zoo_copy / STAGING_FOLDER)
    removed = plan_runs(tiny_zoo_spec)[0].model_ids
    for model_id in removed:
        staging.path(model_id).unlink()
    before = {p: p.read_bytes() for p in sorted((tiny_zoo_copy / "data").rglob("*")) if p.is_file()}
    with pytest.raises(IncompleteZooError, match=r"incomplete: 15 of 18 planned .* --allow-incomplete"):
        pack(tiny_zoo_copy)
    after = {p: p.read_bytes() for p in sorted((tiny_zoo_copy / "data").rglob("*")) if p.is_file()}
    assert after == before  # the last complete pack is untouched
    assert json.loads((tiny_zoo_copy / MANIFEST).read_text())["configs"][CONFIG]["complete"] is True
    entry = pack(tiny_zoo_copy, allow_incomplete=True)["configs"][CONFIG]
    assert (entry["packed_checkpoints"], entry["planned_checkpoints"], entry["complete"]) == (15, 18, False)
    packed = {row["model_id"] for rows in read_rows(tiny_zoo_copy).values() for row in rows}
    assert packed.isdisjoint(removed) and len(packed) == 15
    assert "**Incomplete:** 15 of 18 planned checkpoints." in (tiny_zoo_copy / "README.md").read_text()
    assert json.loads((tiny_zoo_copy / MANIFEST).read_text())["configs"][CONFIG]["complete"] is False


def test_nothing_staged_is_never_packed(tiny_zoo_copy):
    shutil.rmtree(tiny_zoo_copy / STAGING_FOLDER)
    for allow in (False, True):
        with pytest.raises(IncompleteZooError, match=r"no staged checkpoints \(0 of 18 planned\)"):
            pack(tiny_zoo_copy, allow_incomplete=allow)
    assert json.loads((tiny_zoo_copy / MANIFEST).read_text())["configs"][CONFIG]["complete"] is True


def test_pack_without_a_staged_zoo_explains_what_to_run(tmp_path):
    with pytest.raises(FileNotFoundError, match="no staged zoo .* run `nfnzoo generate` first"):
        pack(tmp_path)


def test_pack_of_an_unknown_config_names_the_staged_ones(tiny_zoo_copy):
    with pytest.raises(ValueError, match=r"no staged config 'cnn-cifar' .* staged: \['cnn-mnist'\]"):
        pack(tiny_zoo_copy, configs=["cnn-cifar"])


def test_rows_carry_the_name_of_the_config_they_are_packed_into(tiny_zoo_copy, tiny_zoo_spec):
    import dataclasses

    from zoo.storage.folder import save_spec

    twin = dataclasses.replace(tiny_zoo_spec, name="cnn-mnist-twin")  # same runs, another config name
    save_spec(twin, tiny_zoo_copy)
    entry = pack(tiny_zoo_copy, configs=[twin.name])["configs"][twin.name]
    assert entry["complete"]  # every run was already staged by the first config
    configs = {row["config"] for f in entry["files"] for row in pq.read_table(tiny_zoo_copy / f["path"]).to_pylist()}
    assert configs == {twin.name}


def test_shards_carry_a_page_index_and_keep_the_fast_loaders_direct_path(tiny_zoo):
    from zoo.storage.parquet_pages import fixed_width_pages

    for entry in read_manifest(tiny_zoo)["configs"][CONFIG]["files"]:
        path = tiny_zoo / entry["path"]
        metadata = pq.ParquetFile(path).metadata
        for group in range(metadata.num_row_groups):
            columns = [metadata.row_group(group).column(i) for i in range(metadata.num_columns)]
            assert all(c.has_offset_index for c in columns)  # what the Hub's dataset viewer pages by
            assert [c.has_column_index for c in columns] == [c.path_in_schema != "weights" for c in columns]
        pages = fixed_width_pages(path, "weights")
        assert pages is not None and sum(len(page) for page in pages[1]) == entry["rows"]


def test_the_manifest_records_each_splits_arrow_size_for_the_card(tiny_zoo):
    entry = read_manifest(tiny_zoo)["configs"][CONFIG]
    for split in entry["splits"]:
        tables = [pq.read_table(tiny_zoo / f["path"]) for f in entry["files"] if f["split"] == split]
        read_back = sum(t.nbytes for t in tables)  # a few bytes more: validity bitmaps allocated on reading
        assert read_back - 64 * len(tables[0].schema) <= entry["arrow_bytes"][split] <= read_back


def test_a_spec_saved_before_an_option_existed_is_the_same_spec(tmp_path):
    """A folder generated before `training.drop_last` existed resumes; a changed spec is refused."""
    import json

    from zoo.storage.folder import save_spec
    from zoo.planning.spec import load_spec

    spec = load_spec("cnn-mnist", "tiny")
    old = spec.to_data()
    del old["training"]["drop_last"]  # what an older nfnzoo wrote
    path = tmp_path / "specs" / f"{spec.name}.json"
    path.parent.mkdir()
    path.write_text(json.dumps(old, indent=2, sort_keys=True) + "\n")
    written = path.read_text()
    assert save_spec(spec, tmp_path) == path and path.read_text() == written  # kept as written
    changed = json.loads(written)
    changed["training"]["epochs"] += 1
    path.write_text(json.dumps(changed, indent=2, sort_keys=True) + "\n")
    with pytest.raises(ValueError, match="already holds a different spec named 'cnn-mnist'"):
        save_spec(spec, tmp_path)
