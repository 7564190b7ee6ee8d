"""The datasets a leaderboard knows: `<root>/datasets.json`, a data file of dataset records.

Format: `{"datasets": [{"name", "config", "dataset_hash", "family", "source", "test_metadata",
"test_metadata_sha256", "split_sets"}, ...]}`. A submission must name a known `dataset_hash`. Or it points
at a local dataset folder (or a Hub snapshot) whose checked shards give that hash. That dataset is then
registered here with its `source`, so the board records where its data came from. Its test split's metadata
is pinned (`leaderboards.pinned`). `test_metadata` is the pinned file, relative to the board, and
`test_metadata_sha256` its hash.

A source says how anyone gets the same bytes, never where one machine keeps them (`SOURCE_FORMS`). It takes
one of these forms:

(1) `ORG/NAME@<40-hex commit>`: a Hub dataset at a revision.

(2) `regenerated from spec SPEC (PROFILE)`: a zoo any machine regenerates with `nfnzoo generate SPEC
--profile PROFILE`. The spec and profile are those its manifest records.

(3) `imported from URL`: a zoo imported from a paper's release.

(4) `track:NAME`: a track's benchmark definition.

(5) An https URL.

A local path, absolute or relative, is refused (`source_problem`). `zoo_source` derives the source of a zoo
folder from its manifest.

The file is read within `MAX_DATASETS_BYTES`, regular files only. Every record's fields are bounded. A
display name has `leaderboards.names.DATASET_NAME`'s characters, at most `MAX_NAME` of them. The config and
family are names, the hash a sha256, and the source one line. Writers hold the board's lock
(`leaderboards.lock`). So two submissions registering datasets at once cannot lose either record.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from benchmarks.files import write_json_atomic
from benchmarks.results import line_problem
from leaderboards.names import dataset_name_problem
from zoo.validation.inputs import name_problem, read_json_file
from zoo.storage.lock import FolderLock
from zoo.validation.schema import SchemaError, from_data, to_data

DATASETS_FILE = "datasets.json"
MAX_DATASETS_BYTES = 4 * 2**20  # a record is a few hundred bytes
MAX_NAME = 200  # characters of a dataset's display name (a Hub repo id, a folder's name)
MAX_SOURCE = 4_096  # characters of its source (a Hub repo at a commit, a spec and profile, a URL)
SHA256 = re.compile(r"[0-9a-f]{64}")
_NAME = r"[A-Za-z0-9][A-Za-z0-9._+-]{0,127}"
_URL = r"https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%/+-]*)?"
# what a dataset's `source` may be, each a full match; anything else (a local path above all) is refused
SOURCE_FORMS = {
    "ORG/NAME@<40-hex commit>": re.compile(rf"{_NAME}/{_NAME}@[0-9a-f]{{40}}"),
    "regenerated from spec SPEC (PROFILE)": re.compile(rf"regenerated from spec {_NAME} \({_NAME}\)"),
    "imported from URL": re.compile(rf"imported from {_URL}"),
    "track:NAME": re.compile(rf"track:{_NAME}"),
    "an https URL": re.compile(_URL),
}
HUB_SNAPSHOT = re.compile(r"datasets--(?P<org>[^/]+?)--(?P<name>[^/]+)/snapshots/(?P<commit>[0-9a-f]{40})")


def source_problem(source: str) -> str | None:
    """Why `source` is not one of `SOURCE_FORMS` (say, it is a local path), or None."""
    if any(form.fullmatch(source) for form in SOURCE_FORMS.values()):
        return None
    return (f"expected one of {', '.join(SOURCE_FORMS)}, got {ascii(source[:120])}: a source says how anyone gets "
            "the bytes, never a path on one machine")


def zoo_source(folder: str | Path, config: str) -> str:
    """The source of the zoo `folder` holds (`config` of its manifest). That is the Hub repo and commit of a
    Hub cache snapshot. Else it is the paper's release it was imported from. Else it is the spec and profile
    it was generated from (`SOURCE_FORMS`). An error when the manifest records none of them."""
    from zoo.reader import config_record, config_sources

    folder = Path(folder).resolve()
    hub = HUB_SNAPSHOT.search(folder.as_posix())
    if hub is not None and hub.end() == len(folder.as_posix()):
        return f"{hub['org']}/{hub['name']}@{hub['commit']}"
    for source in config_sources(config_record(folder, config)):
        if source_problem(source) is None:
            return source
    raise ValueError(f"{folder}/manifest.json: config {config!r} records neither the spec it was generated from "
                     "(spec.name, a name) nor an import's https url; the board cannot say where its bytes come from")


@dataclasses.dataclass(frozen=True)
class KnownDataset:
    name: str  # a display name, e.g. the Hub repo or the dataset folder's name
    config: str  # the dataset config, e.g. "cnn-mnist"
    dataset_hash: str  # sha256 of the config's data, from its manifest.json
    family: str  # the zoo family, e.g. "cnn"
    source: str  # how to get its bytes (`SOURCE_FORMS`): a Hub id at a commit, a spec and profile, ...; never a path
    test_metadata: str | None = None  # the pinned test-split metadata, relative to the board (leaderboards.pinned)
    test_metadata_sha256: str | None = None  # its sha256; set exactly when test_metadata is
    # split set -> sha256 of its pinned test metadata, pinned/<hash12>.<set>.test.parquet (an imported
    # zoo's papers' splits, `leaderboards.pinned`)
    split_sets: dict[str, str] = dataclasses.field(default_factory=dict)
    # split set -> sha256 of the set's own file in the zoo pinned from (which train, validation and test rows
    # it lists); a result on the set must record the same (`leaderboards.submission`)
    split_set_files: dict[str, str] = dataclasses.field(default_factory=dict)

    def validate(self, where: str, key: str) -> None:
        problem = dataset_name_problem(self.name)
        if problem is not None:
            raise SchemaError(where, f"{key}.name", problem)
        for field, limit in (("name", MAX_NAME), ("source", MAX_SOURCE)):
            problem = line_problem(getattr(self, field), limit)
            if problem is not None:
                raise SchemaError(where, f"{key}.{field}", problem)
        problem = source_problem(self.source)
        if problem is not None:
            raise SchemaError(where, f"{key}.source", problem)
        for field in ("config", "family"):
            problem = name_problem(getattr(self, field))
            if problem is not None:
                raise SchemaError(where, f"{key}.{field}", problem)
        for field in ("dataset_hash", "test_metadata_sha256"):
            value = getattr(self, field)
            if value is not None and not SHA256.fullmatch(value):
                raise SchemaError(where, f"{key}.{field}", f"expected a sha256 hex digest, got {ascii(value[:80])}")
        if (self.test_metadata is None) != (self.test_metadata_sha256 is None):
            raise SchemaError(where, f"{key}.test_metadata", "expected test_metadata and test_metadata_sha256 together")
        for split_set, digest in self.split_sets.items():
            problem = name_problem(split_set)
            if problem is not None or split_set == "default":
                raise SchemaError(where, f"{key}.split_sets", f"{ascii(split_set[:80])}: "
                                  f"{problem or 'the zoo own split is test_metadata'}")
            if not isinstance(digest, str) or not SHA256.fullmatch(digest):
                raise SchemaError(where, f"{key}.split_sets.{split_set}",
                                  f"expected a sha256 hex digest, got {ascii(str(digest)[:80])}")
        for split_set, digest in self.split_set_files.items():
            if split_set not in self.split_sets:
                raise SchemaError(where, f"{key}.split_set_files", f"{ascii(split_set[:80])}: not a pinned split set")
            if not isinstance(digest, str) or not SHA256.fullmatch(digest):
                raise SchemaError(where, f"{key}.split_set_files.{split_set}", "expected a sha256 hex digest")
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
    data = read_json_file(path, MAX_DATASETS_BYTES, strict=True, what="datasets file", follow=False)  # a board's file
    records = from_data(DatasetsFile, data, where=str(path))
    return {record.dataset_hash: record for record in records.datasets}


def register_dataset(root: str | Path, dataset: KnownDataset, *, replace: bool = False,
                     lock: FolderLock | None = None) -> None:
    """Adds a dataset record to `<root>/datasets.json`; an error if its hash is already known. With
    `replace` it updates the record of its hash instead, e.g. to add the pinned test metadata. `lock`: the
    board's lock, held by the caller; without it, it is taken here."""
    from leaderboards.lock import board_lock

    if lock is None or not lock.held:
        with board_lock(root) as held:
            return register_dataset(root, dataset, replace=replace, lock=held)
    dataset.validate(str(Path(root) / DATASETS_FILE), "the new record")  # a path as its source never gets in
    known = load_datasets(root)
    if (dataset.dataset_hash in known) != replace:
        raise ValueError(f"dataset {dataset.dataset_hash[:12]} is already registered as "
                         f"{known[dataset.dataset_hash].name!r}" if not replace else
                         f"dataset {dataset.dataset_hash[:12]} is not registered; nothing to replace")
    known[dataset.dataset_hash] = dataset  # a replaced record keeps its place
    write_json_atomic(Path(root) / DATASETS_FILE, to_data(DatasetsFile(tuple(known.values()))))
