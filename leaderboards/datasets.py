"""The datasets a leaderboard knows: `<root>/datasets.json`, a data file of dataset records.

Format: `{"datasets": [{"name", "config", "dataset_hash", "family", "source"}, ...]}`. A
submission must name a known `dataset_hash`, or point at a local dataset folder whose
manifest gives that hash (`zoo.loader.dataset_hash`); the latter is then registered here
with `source: "local:<path>"`, so the board records where its data came from.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from benchmarks.files import read_json, write_json_atomic
from zoo.schema import SchemaError, from_data, to_data

DATASETS_FILE = "datasets.json"


@dataclasses.dataclass(frozen=True)
class KnownDataset:
    name: str  # a display name, e.g. the Hub repo or the dataset folder's name
    config: str  # the dataset config, e.g. "cnn-mnist"
    dataset_hash: str  # sha256 of the config's data, from its manifest.json
    family: str  # the zoo family, e.g. "cnn"
    source: str  # where to get it: a Hub repo id, a URL, or "local:<path>"


@dataclasses.dataclass(frozen=True)
class DatasetsFile:
    datasets: tuple[KnownDataset, ...] = ()

    def validate(self, where: str, key: str) -> None:
        hashes = [d.dataset_hash for d in self.datasets]
        duplicates = sorted({h for h in hashes if hashes.count(h) > 1})
        if duplicates:
            raise SchemaError(where, "datasets", f"each dataset_hash must appear once; repeated: {duplicates}")


def load_datasets(root: str | Path) -> dict[str, KnownDataset]:
    """The known datasets of a leaderboard root by hash; a missing file means none."""
    path = Path(root) / DATASETS_FILE
    if not path.exists():
        return {}
    records = from_data(DatasetsFile, read_json(path), where=str(path))
    return {record.dataset_hash: record for record in records.datasets}


def register_dataset(root: str | Path, dataset: KnownDataset) -> None:
    """Adds a dataset record to `<root>/datasets.json` (an error if its hash is already known)."""
    known = load_datasets(root)
    if dataset.dataset_hash in known:
        raise ValueError(f"dataset {dataset.dataset_hash[:12]} is already registered as {known[dataset.dataset_hash].name!r}")
    records = DatasetsFile((*known.values(), dataset))
    write_json_atomic(Path(root) / DATASETS_FILE, to_data(records))
