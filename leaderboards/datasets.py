"""The datasets a leaderboard knows: `<root>/datasets.json`, a data file of dataset records.

Format: `{"datasets": [{"name", "config", "dataset_hash", "family", "source", "test_metadata",
"test_metadata_sha256"}, ...]}`. A submission must name a known `dataset_hash`, or point at a
local dataset folder (or a Hub snapshot) whose checked shards give that hash; the latter is then
registered here with its `source` (`local:<path>` or `ORG/NAME@<commit>`), so the board records
where its data came from, and its test split's metadata is pinned (`leaderboards.pinned`):
`test_metadata` is the pinned file, relative to the board, and `test_metadata_sha256` its hash.
"""

from __future__ import annotations

import dataclasses
import re
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
    test_metadata: str | None = None  # the pinned test-split metadata, relative to the board (leaderboards.pinned)
    test_metadata_sha256: str | None = None  # its sha256; set exactly when test_metadata is

    def validate(self, where: str, key: str) -> None:
        if (self.test_metadata is None) != (self.test_metadata_sha256 is None):
            raise SchemaError(where, f"{key}.test_metadata", "expected test_metadata and test_metadata_sha256 together")
        if self.test_metadata is not None and not re.fullmatch(r"pinned/[0-9a-f]{12}\.test\.parquet",
                                                               self.test_metadata):
            raise SchemaError(where, f"{key}.test_metadata",
                              f"expected pinned/<12 hex digits>.test.parquet, got {self.test_metadata!r}")


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


def register_dataset(root: str | Path, dataset: KnownDataset, *, replace: bool = False) -> None:
    """Adds a dataset record to `<root>/datasets.json` (an error if its hash is already known),
    or with `replace` updates the record of its hash (e.g. to add the pinned test metadata)."""
    known = load_datasets(root)
    if (dataset.dataset_hash in known) != replace:
        raise ValueError(f"dataset {dataset.dataset_hash[:12]} is already registered as "
                         f"{known[dataset.dataset_hash].name!r}" if not replace else
                         f"dataset {dataset.dataset_hash[:12]} is not registered; nothing to replace")
    known[dataset.dataset_hash] = dataset  # a replaced record keeps its place
    write_json_atomic(Path(root) / DATASETS_FILE, to_data(DatasetsFile(tuple(known.values()))))
