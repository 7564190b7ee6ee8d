"""A board's pinned test metadata: what re-scoring reads instead of a submission's own targets.

When a board registers a dataset (a checked local folder or Hub snapshot), it stores that
dataset's test split's metadata columns (every column but the weights: model_id, status,
epoch, the hyperparameters, the targets) as `<root>/pinned/<hash12>.test.parquet`, and its
sha256 in the dataset's record (`leaderboards.datasets`). Re-scoring (`leaderboards.rescore`)
takes the protocol's test rows and their targets from this file, so a board re-scores every
entry without the zoo at hand (CI has no zoo), and a changed file fails its recorded hash.
`pin_dataset` pins an already registered dataset; run again on a pinned one, it checks that
the dataset's test split still equals the pinned file. A pinned file is read within
`MAX_PINNED_BYTES` (a regular file only), and pinning holds the board's lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
from pathlib import Path

import pandas
import pyarrow as pa
import pyarrow.parquet as pq

from leaderboards.datasets import KnownDataset, load_datasets, register_dataset
from leaderboards.lock import board_lock
from zoo.storage.atomic import write_bytes_atomic
from zoo.validation.inputs import InputError, read_capped
from zoo.storage.lock import FolderLock

PINNED_DIR = "pinned"
MAX_PINNED_BYTES = 256 * 2**20  # a test split's metadata: ~1 MB for 20,000 rows


def pinned_name(dataset_hash: str) -> str:
    """The pinned file of a dataset, relative to the board."""
    return f"{PINNED_DIR}/{dataset_hash[:12]}.test.parquet"


def test_metadata_bytes(folder: str | Path, config: str) -> bytes:
    """The test split's metadata (shards checked against the manifest) as Parquet bytes."""
    from zoo.loader import read_metadata

    metadata = read_metadata(folder, config, "test")
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(metadata, preserve_index=False), buffer, compression="zstd")
    return buffer.getvalue()


def pinned_record(root: str | Path, record: KnownDataset, folder: str | Path) -> tuple[KnownDataset, bytes]:
    """The record with its test metadata pinned from `folder`, and the bytes to write (nothing is written)."""
    data = test_metadata_bytes(folder, record.config)
    return dataclasses.replace(record, test_metadata=pinned_name(record.dataset_hash),
                               test_metadata_sha256=hashlib.sha256(data).hexdigest()), data


def write_pinned(root: str | Path, record: KnownDataset, data: bytes) -> None:
    write_bytes_atomic(Path(root) / record.test_metadata, data)


def pin_dataset(root: str | Path, folder: str | Path, config: str | None = None) -> str:
    """Pins the test metadata of a registered dataset read from `folder`; returns what it did.

    The folder's checked hash must be a registered dataset's. A record already pinned is
    compared with the folder's test split instead (an error if they differ).
    """
    root, folder = Path(root), Path(folder)
    with board_lock(root) as lock:
        return _pin_dataset(root, folder, config, lock)


def _pin_dataset(root: Path, folder: Path, config: str | None, lock: FolderLock) -> str:
    from zoo.storage.folder import read_manifest
    from zoo.storage.integrity import verified_dataset_hash

    configs = read_manifest(folder)["configs"]
    if config is None:
        if len(configs) != 1:
            raise ValueError(f"{folder} holds the configs {sorted(configs)}; choose one with --config")
        config = next(iter(configs))
    actual = verified_dataset_hash(folder, config)
    record = load_datasets(root).get(actual)
    if record is None:
        raise ValueError(f"the dataset at {folder} (config {config!r}, hash {actual[:12]}…) is not registered on the "
                         f"board {root}; submit a result on it first")
    if record.test_metadata is not None:
        pinned = load_pinned(root, record)
        current = pq.read_table(io.BytesIO(test_metadata_bytes(folder, config))).to_pandas()
        if not current.equals(pinned):
            raise ValueError(f"{root / record.test_metadata} differs from the test split of {folder}")
        return f"{record.name}: the pinned {record.test_metadata} equals the test split of {folder}"
    pinned, data = pinned_record(root, record, folder)
    write_pinned(root, pinned, data)
    register_dataset(root, pinned, replace=True, lock=lock)
    return f"{record.name}: pinned {len(data):,} bytes of test metadata as {pinned.test_metadata}"


def load_pinned(root: str | Path, record: KnownDataset) -> pandas.DataFrame:
    """A dataset's pinned test metadata, checked against its recorded sha256."""
    if record.test_metadata is None:
        raise ValueError(f"dataset {record.name!r} ({record.dataset_hash[:12]}…) has no pinned test metadata on this "
                         "board; pin it with `nfnzoo leaderboard pin DATASET_DIR`")
    path = Path(root) / record.test_metadata
    try:
        data = read_capped(path, MAX_PINNED_BYTES, "pinned test metadata file")
    except InputError as error:
        raise ValueError(f"the pinned test metadata of {record.name!r}: {error}") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != record.test_metadata_sha256:
        raise ValueError(f"{path}: sha256 {actual[:12]}… is not the recorded {record.test_metadata_sha256[:12]}…; "
                         "the pinned test metadata was changed")
    return pq.read_table(io.BytesIO(data)).to_pandas()
