"""A packed zoo loads with plain `datasets.load_dataset(folder, config)`: no custom code, no zoo."""

from __future__ import annotations

import hashlib

import pyarrow.parquet as pq

from zoo.folder import read_manifest
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
