"""A packed zoo loads with plain `datasets.load_dataset(folder, config)`: no custom code, no zoo."""

from __future__ import annotations

import hashlib
import shutil

import pyarrow.parquet as pq
import pytest

from zoo.storage.folder import read_manifest
from zoo.loader import load_split

CONFIG = "cnn-mnist"


def test_load_dataset_sees_every_split_row_and_tensor(tiny_zoo, read_with_datasets):
    seen = read_with_datasets(tiny_zoo, CONFIG)
    assert seen["imported_zoo"] is False
    entry = read_manifest(tiny_zoo)["configs"][CONFIG]
    assert {split: s["rows"] for split, s in seen["splits"].items()} == entry["splits"]
    space = {layer["name"]: layer["shape"] for layer in next(iter(entry["architectures"].values()))["layers"]}
    for split, got in seen["splits"].items():
        assert got["columns"] == [c["name"] for c in entry["columns"]]
        assert got["features"]["epoch"] == "Value('int64')"
        assert got["features"]["learning_rate"] == "Value('float64')"
        assert got["features"]["optimizer"] == "Value('string')"
        assert "binary" in got["features"]["weights"]
        loaded = load_split(tiny_zoo, CONFIG, split)
        assert got["model_ids"] == loaded.metadata["model_id"].tolist()  # same rows, same order
        shards = [f for f in entry["files"] if f["split"] == split]
        stored = [w for f in shards for w in pq.read_table(tiny_zoo / f["path"], columns=["weights"])["weights"]
                  .to_pylist()]
        assert got["weights_sha256"] == [hashlib.sha256(w).hexdigest() for w in stored]  # bytes untouched
        first = got["first_row"]
        assert {name: t["shape"] for name, t in first.items()} == space
        assert {t["dtype"] for t in first.values()} == {"float32"}
        for name, tensor in loaded.weights.state_dict(0).items():
            assert first[name]["values"] == tensor.reshape(-1).tolist(), name


# --- Formatting `weights` without losing trailing NUL bytes (zoo.hf_datasets) ---------------------------------

def _load_in_process(folder, tmp_path, config: str = CONFIG):
    import datasets

    return datasets.load_dataset(str(folder), config, cache_dir=str(tmp_path / "hf_cache"))


def _epoch0_row_ending_in_zeros(split) -> int:
    """A row whose last tensor ends in zeros: an epoch-0 CNN checkpoint (its last bias starts at 0)."""
    for index, (epoch, weights) in enumerate(zip(split["epoch"], split["weights"])):
        if epoch == 0 and weights.endswith(b"\0" * 4):
            return index
    raise AssertionError(f"the tiny zoo has no epoch-0 row ending in zeros (epochs {split['epoch']})")


@pytest.mark.parametrize("framework", ["numpy", "torch"])
def test_with_format_truncates_a_checkpoint_ending_in_zeros(tiny_zoo, tmp_path, offline_hf, framework):
    """The defect `zoo.hf_datasets` exists for (a negative control): datasets' NumPy/torch formatting of a binary
    column drops trailing NUL bytes, and safetensors refuses the shortened file."""
    import safetensors.torch

    train = _load_in_process(tiny_zoo, tmp_path)["train"]
    index = _epoch0_row_ending_in_zeros(train)
    exact = train[index]["weights"]
    safetensors.torch.load(exact)  # the stored bytes are a valid file
    truncated = bytes(train.with_format(framework)[index]["weights"])
    assert len(truncated) < len(exact) and exact.startswith(truncated)
    with pytest.raises(Exception, match="incomplete metadata|not fully covered"):
        safetensors.torch.load(truncated)


def test_formatted_and_decode_weights_return_the_exact_tensors(tiny_zoo, tmp_path, offline_hf):
    import torch

    from zoo.hf_datasets import decode_weights, formatted

    zoo = _load_in_process(tiny_zoo, tmp_path)
    train = zoo["train"]
    index = _epoch0_row_ending_in_zeros(train)
    expected = load_split(tiny_zoo, CONFIG, "train").weights.state_dict(index)
    assert not expected[list(expected)[-1]].any()  # the last bias is all zeros

    for got in (train.with_transform(decode_weights)[index]["weights"], formatted(train, "torch")[index]["weights"],
                formatted(zoo, "torch")["train"][index]["weights"]):
        assert list(got) == list(expected)  # layer order, not safetensors' sorted names
        for name, tensor in expected.items():
            assert got[name].dtype == tensor.dtype and torch.equal(got[name], tensor), name
    row = formatted(train, "numpy")[index]
    for name, tensor in expected.items():
        assert (row["weights"][name] == tensor.numpy()).all() and row["weights"][name].shape == tuple(tensor.shape)
    assert row["epoch"] == 0 and row["status"] == "ok"

    batch = formatted(train, "torch")[:4]  # numbers as tensors, strings as lists, as with_format("torch") gives
    assert batch["epoch"].dtype == torch.int64 and batch["learning_rate"].dtype == torch.float64
    assert batch["model_id"] == train["model_id"][:4]
    stacked = next(iter(torch.utils.data.DataLoader(formatted(train, "torch"), batch_size=len(train))))
    for name, tensor in expected.items():  # same-architecture state dicts stack with the default collate
        assert stacked["weights"][name].shape == (len(train), *tensor.shape)
        assert torch.equal(stacked["weights"][name][index], tensor)


def test_decoding_refuses_truncated_or_preformatted_weights(tiny_zoo):
    from zoo.hf_datasets import decode_checkpoint

    stored = pq.read_table(tiny_zoo / read_manifest(tiny_zoo)["configs"][CONFIG]["files"][0]["path"],
                           columns=["weights"])["weights"][0].as_py()
    with pytest.raises(ValueError, match="not a safetensors buffer"):
        decode_checkpoint(stored[:-4])
    with pytest.raises(TypeError, match="zoo.hf_datasets"):
        decode_checkpoint(stored.decode("latin-1"))
    with pytest.raises(ValueError, match="unknown framework"):
        decode_checkpoint(stored, "jax")


def test_zoo_hf_datasets_imports_without_datasets():
    import subprocess
    import sys

    code = ("import sys; sys.modules['datasets'] = None; import zoo.hf_datasets, zoo.dataset.card, zoo.dataset.pack; "
            "print('datasets' in sys.modules and sys.modules['datasets'] is not None)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "False"


# --- The card's dataset_info: load_dataset checks every split's row count -------------------------------------

@pytest.fixture
def sharded_zoo(tiny_zoo, tiny_zoo_copy):
    """The tiny zoo packed with 5 rows per shard: train is 3 shards, so one can go missing."""
    from zoo.dataset.pack import pack

    row_bytes = len(pq.read_table(tiny_zoo / read_manifest(tiny_zoo)["configs"][CONFIG]["files"][0]["path"],
                                  columns=["weights"])["weights"][0].as_py())
    pack(tiny_zoo_copy, max_shard_bytes=5 * row_bytes)
    return tiny_zoo_copy


def _train_shards(folder):
    return sorted((folder / "data" / CONFIG).glob("train-*.parquet"))


def test_an_intact_sharded_zoo_loads(sharded_zoo, tmp_path, offline_hf):
    assert len(_train_shards(sharded_zoo)) == 3
    zoo = _load_in_process(sharded_zoo, tmp_path)
    assert {split: rows.num_rows
            for split, rows in zoo.items()} == read_manifest(sharded_zoo)["configs"][CONFIG]["splits"]


def test_a_stray_extra_shard_is_not_read(sharded_zoo, tmp_path, offline_hf):
    card = (sharded_zoo / "README.md").read_bytes()
    first = _train_shards(sharded_zoo)[0]
    shutil.copyfile(first, first.with_name("train-00003-of-00003.parquet"))  # e.g. left by an interrupted pack
    assert (sharded_zoo / "README.md").read_bytes() == card
    zoo = _load_in_process(sharded_zoo, tmp_path)  # the card names each split's files: a leftover is never read
    assert {split: rows.num_rows
            for split, rows in zoo.items()} == read_manifest(sharded_zoo)["configs"][CONFIG]["splits"]


def test_a_missing_shard_makes_load_dataset_raise(sharded_zoo, tmp_path, offline_hf):
    missing = _train_shards(sharded_zoo)[1]
    missing.unlink()  # e.g. an interrupted download or upload
    with pytest.raises(FileNotFoundError, match=missing.name):
        _load_in_process(sharded_zoo, tmp_path)
