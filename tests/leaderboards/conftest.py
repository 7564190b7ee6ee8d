"""Fixtures for leaderboard tests: a board root, results files and a local dataset folder.

Results files are written directly (no training): what the leaderboard checks is the file.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Callable

import pytest

from benchmarks.results import summarize
from zoo.storage.integrity import dataset_hash_of

KNOWN_HASH = "11" * 32  # listed in the board's datasets.json
KNOWN_SOURCE = "org/cnn-zoo@" + "ab" * 20  # a Hub dataset at a commit: where the known dataset's bytes are
# the local dataset folder's one shard: the leaderboard checks its bytes, not what is in it
LOCAL_SHARD = {"path": "data/cnn-mnist/train-00000-of-00001.parquet", "split": "train", "rows": 700,
               "bytes": 11, "sha256": hashlib.sha256(b"shard bytes").hexdigest()}
LOCAL_HASH = dataset_hash_of([LOCAL_SHARD])  # only in a local dataset folder's manifest.json


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A leaderboard root that knows one published dataset."""
    board = tmp_path / "board"
    board.mkdir()
    known = {"name": "org/cnn-zoo", "config": "cnn-mnist", "dataset_hash": KNOWN_HASH, "family": "cnn",
             "source": KNOWN_SOURCE}
    (board / "datasets.json").write_text(json.dumps({"datasets": [known]}))
    return board


@pytest.fixture
def local_dataset(tmp_path: Path) -> Path:
    """A dataset folder with a manifest.json as `nfnzoo pack` writes it and one stand-in shard
    whose size and sha256 match it."""
    folder = tmp_path / "runs" / "cnn-local"
    (folder / "data" / "cnn-mnist").mkdir(parents=True)
    (folder / LOCAL_SHARD["path"]).write_bytes(b"shard bytes")
    manifest = {"package_version": "0.1.0", "format_version": 1, "configs": {"cnn-mnist": {
        "dataset_hash": LOCAL_HASH, "family": "cnn", "splits": {"train": 700, "validation": 0, "test": 0},
        "spec_hash": "3" * 20, "spec": {"name": "cnn-mnist", "profile": "tiny"}, "architectures": {},
        "planned_checkpoints": 1000,
        "packed_checkpoints": 1000, "complete": True, "columns": [], "files": [LOCAL_SHARD]}}}
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return folder


def results_data(model: str = "statnn", seeds: tuple[int, ...] = (0, 1, 2),
                 taus: tuple[float, ...] = (0.80, 0.82, 0.84), rmse: float = 0.05,
                 dataset_hash: str = KNOWN_HASH, dataset_path: str | None = None,
                 model_config: dict | None = None) -> dict[str, Any]:
    """A valid results file's data, as `benchmarks.harness` writes it (no folder); `dataset_path`: the
    `dataset.path` of an older version's file (a folder submit verifies an unknown hash against)."""
    per_seed = [{"seed": seed, "metrics": {"kendall_tau": tau, "r2": 0.9 * tau, "rmse": rmse + 0.001 * i},
                 "train_time_s": 2.0 + i, "peak_memory_mb": 512.0, "selection": {"epoch": 10 + i}}
                for i, (seed, tau) in enumerate(zip(seeds, taus))]
    return {
        "schema_version": 1, "task": "generalization", "model": model,
        "model_config": model_config or {"hidden_sizes": [128, 128], "activation": "relu", "dropout": 0.0,
                                         "out_features": 1},
        "task_config": {"epochs": 30, "batch_size": 64, "lr": 0.001, "weight_decay": 0.0001, "eval_batch_size": 1024},
        "dataset": {"config": "cnn-mnist", "dataset_hash": dataset_hash, "family": "cnn",
                    **({"path": dataset_path} if dataset_path is not None else {})},
        "seeds": list(seeds), "per_seed": per_seed,
        "summary": summarize([entry["metrics"] for entry in per_seed]),
        "num_params": 23937, "package_version": "0.1.0", "created": "2026-01-01T00:00:00+00:00",
        "hardware": {"platform": "Linux", "python": "3.11.7", "torch": "2.14.1", "device": "cpu"},
        "predictions": None,
    }


@pytest.fixture
def write_results(tmp_path: Path) -> Callable[..., Path]:
    """A factory: write_results(data=None, name=..., **results_data kwargs) -> the file's path."""
    counter = iter(range(10**6))

    def write(data: dict | None = None, name: str | None = None, **kwargs: Any) -> Path:
        path = tmp_path / "submissions" / (name or f"results-{next(counter)}.json")
        path.parent.mkdir(exist_ok=True)
        path.write_text(json.dumps(data if data is not None else results_data(**kwargs)))
        return path

    return write


@pytest.fixture
def make_data() -> Callable[..., dict[str, Any]]:
    """A factory for valid results data (see `results_data`), to mutate in a test."""
    return results_data


@pytest.fixture
def hashes() -> dict[str, str]:
    return {"known": KNOWN_HASH, "local": LOCAL_HASH}


@pytest.fixture
def board_cli(cli, tmp_path):
    """board_cli(*argv) -> the finished `nfnzoo ARGV` (exit code, stdout, stderr), run in an empty folder
    through the session's forked CLI (tests/conftest.py), with the Hub offline and a default board of its own."""
    working = tmp_path / "cwd"
    working.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "PYTHONWARNINGS": "ignore",
           "HF_HOME": str(tmp_path / "hf"), "NFNZOO_LEADERBOARD": str(tmp_path / "default-board")}
    return lambda *argv: cli.run(list(argv), cwd=working, env=env, timeout=120)
