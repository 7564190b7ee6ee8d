"""Fixtures for benchmark tests: a tiny synthetic zoo and a results file trained on it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks.harness import run_on_splits
from benchmarks.synthetic import small_cnn_space, synthetic_splits
from zoo.storage.integrity import dataset_hash_of
from benchmarks.run_options import RunOptions

FAST_TASK = {"epochs": 3, "batch_size": 32}  # enough to learn the synthetic zoo a little, quickly
DATASET = {"config": "synthetic", "dataset_hash": "ab" * 32, "family": "cnn", "source": None}  # as load_splits


@pytest.fixture
def dataset_info() -> dict[str, str]:
    """The `dataset` block the results of the synthetic splits record."""
    return dict(DATASET)


@pytest.fixture
def fast_task() -> dict:
    """Task overrides that keep a run short (the session's results file uses them too)."""
    return dict(FAST_TASK)


@pytest.fixture
def write_manifest():
    """A factory: write_manifest(folder, {config: dataset_hash}) -> the folder."""
    return _write_manifest


@pytest.fixture(scope="session")
def splits() -> dict:
    """Train/validation/test splits of 240/80/80 synthetic checkpoints, 10% diverged.

    The CNNs have 8 channels instead of 16 (1,338 parameters): the same structure, and a
    quarter of the sorting STATNN does, which keeps the suite fast on two cores.
    """
    return synthetic_splits((240, 80, 80), seed=0, diverged_fraction=0.1, space=small_cnn_space(channels=8))


@pytest.fixture(scope="session")
def results_path(splits, tmp_path_factory) -> Path:
    """A STATNN results file (3 seeds) with its predictions sidecar."""
    path = tmp_path_factory.mktemp("results") / "statnn.json"
    run_on_splits("generalization", "statnn", splits, DATASET,
                  RunOptions([0, 1, 2], task_overrides=FAST_TASK, progress=False), path)
    return path


def _write_manifest(folder: Path, configs: dict[str, str]) -> Path:
    """A dataset folder whose manifest.json names each config's dataset hash (no shards, so no rows)."""
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {"package_version": "0.1.0", "configs": {
        name: {"dataset_hash": digest, "family": "cnn", "splits": {},
               "spec_hash": "0" * 20, "files": [], "planned_checkpoints": 400, "packed_checkpoints": 400,
               "complete": True, "columns": [], "spec": {}, "architectures": {}}
        for name, digest in configs.items()}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


@pytest.fixture
def dataset_folder(tmp_path, splits, monkeypatch) -> Path:
    """A dataset folder with a real manifest.json; its splits come from the synthetic zoo.

    Only `zoo.loader.load_listed` (Parquet decoding) is replaced; the manifest, the config
    resolution and `zoo.loader.dataset_hash` are the real ones.
    """
    from zoo import loader

    # no shards: the hash of an empty shard listing is the one the harness's check recomputes
    folder = _write_manifest(tmp_path / "cnn-zoo", {"synthetic": dataset_hash_of([])})

    def load_listed(listing, split="train", **_):
        assert Path(listing.folder) == folder and listing.config == "synthetic"
        return splits[split]

    monkeypatch.setattr(loader, "load_listed", load_listed)
    return folder
