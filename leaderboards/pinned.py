"""A board's pinned test metadata: what re-scoring reads instead of a submission's own targets.

A board registers a dataset from a checked local folder or Hub snapshot. Then it stores that dataset's test
split's metadata columns as `<root>/pinned/<hash12>.test.parquet`. That is every column but the weights:
model_id, status, epoch, the hyperparameters and the targets. The file's sha256 goes in the dataset's record
(`leaderboards.datasets`). Re-scoring (`leaderboards.rescore`) takes the protocol's test rows and their
targets from this file. So a board re-scores every entry without the zoo at hand, since CI has no zoo. A
changed file fails its recorded hash. `pin_dataset` pins an already registered dataset. Run again on a
pinned one, it checks that the dataset's test split still equals the pinned file.

Some zoos have named split sets: an imported zoo's papers' splits (`zoo.split_set_loader.load_split_set`).
Each set's test split is pinned too, as `<root>/pinned/<hash12>.<set>.test.parquet`. Its sha256 goes in the
record's `split_sets`. A result on a split set (its `task_config.splits`) is re-scored from that file
(`split_set_of`).

A pinned file is read within `MAX_PINNED_BYTES`, and only as a regular file. A symbolic link, the file or
`pinned/` itself, is refused in one line naming it, never read through. Pinning holds the board's lock.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
from pathlib import Path
from typing import Mapping

import pandas
import pyarrow as pa
import pyarrow.parquet as pq

from leaderboards.datasets import KnownDataset, load_datasets, register_dataset
from leaderboards.lock import board_lock
from zoo.storage import nofollow
from zoo.storage.atomic import write_bytes_atomic
from zoo.storage.integrity import check_declared_sizes
from zoo.validation.inputs import InputError, check_name, read_capped
from zoo.storage.lock import FolderLock

PINNED_DIR = "pinned"
MAX_PINNED_BYTES = 256 * 2**20  # a test split's metadata: ~1 MB for 20,000 rows


DEFAULT = "default"  # a zoo's own split, as `task_config.splits` names it


def split_set_of(task_config) -> str:
    """The split set a result was measured on (`--set task.splits=NAME`), or the zoo's own split."""
    return str(task_config.get("splits", DEFAULT))


def pinned_name(dataset_hash: str, split_set: str = DEFAULT) -> str:
    """The pinned file of a dataset's test split (or a split set's), relative to the board."""
    middle = "" if split_set == DEFAULT else f".{check_name(split_set, 'split set')}"
    return f"{PINNED_DIR}/{dataset_hash[:12]}{middle}.test.parquet"


def pinned_sets(record: KnownDataset) -> list[str]:
    """What `record` has pinned: `DEFAULT` (the zoo's own test split) where it has, then its split sets."""
    return ([DEFAULT] if record.test_metadata is not None else []) + sorted(record.split_sets)


def test_metadata_bytes(folder: str | Path, config: str, split_set: str = DEFAULT) -> bytes:
    """The test split's metadata (shards checked against the manifest), or a split set's, as Parquet bytes."""
    from zoo.loader import read_metadata
    from zoo.split_set_loader import read_split_set_metadata

    metadata = (read_metadata(folder, config, "test") if split_set == DEFAULT
                else read_split_set_metadata(folder, config, split_set, "test"))
    buffer = io.BytesIO()
    pq.write_table(pa.Table.from_pandas(metadata, preserve_index=False), buffer, compression="zstd")
    return buffer.getvalue()


def missing_pins(record: KnownDataset, folder: str | Path) -> dict[str, bytes]:
    """The test metadata `record` has not pinned yet, read from `folder`: split set -> Parquet bytes."""
    from zoo.split_set_loader import split_set_names

    pinned = pinned_sets(record)
    wanted = [name for name in [DEFAULT, *split_set_names(folder, record.config)] if name not in pinned]
    return {name: test_metadata_bytes(folder, record.config, name) for name in wanted}


def with_pins(record: KnownDataset, pins: dict[str, bytes], files: Mapping[str, str] | None = None) -> KnownDataset:
    """The record naming `pins` (split set -> bytes) as pinned, beside what it pinned already. Given the
    zoo's split sets' `files` (`zoo.reader.split_set_files`), it also records each pinned set's file hash
    where it lacks one."""
    digests = {name: hashlib.sha256(data).hexdigest() for name, data in pins.items()}
    if DEFAULT in digests:
        record = dataclasses.replace(record, test_metadata=pinned_name(record.dataset_hash),
                                     test_metadata_sha256=digests.pop(DEFAULT))
    split_sets = {**record.split_sets, **digests}
    files = {name: digest for name, digest in (files or {}).items() if name in split_sets}
    return dataclasses.replace(record, split_sets=split_sets, split_set_files={**files, **record.split_set_files})


def split_set_file_problem(record: KnownDataset, split_set: str, recorded: str | None,
                           files: Mapping[str, str] | None = None) -> str | None:
    """Why a result on `split_set` is not on the board's pinned set, or None.

    The result's set file had sha256 `recorded`. Where the board has not pinned the set yet, it is compared
    with the set of the zoo being pinned, whose `files` are `set_files`. The dataset hash covers the shards,
    not a set's file. So an edited set, e.g. a test row moved into train, keeps it.
    """
    if split_set == DEFAULT:
        return None
    expected = record.split_set_files.get(split_set) or (files or {}).get(split_set)
    if expected is None:
        return (f"dataset {record.name!r} has no file hash of split set {split_set!r} on this board; pin it again "
                "from the zoo (`nfnzoo leaderboard pin DATASET_DIR`)")
    if recorded is None:
        return (f"the results do not record the sha256 of split set {split_set!r} (dataset.split_set_sha256); run "
                "the benchmark again with this nfnzoo")
    if recorded != expected:
        return (f"split set {split_set!r}: the results read a set file with sha256 {recorded[:12]}…, the board pinned "
                f"{expected[:12]}… (the set lists other train, validation or test rows)")
    return None


def pinned_record(root: str | Path, record: KnownDataset, folder: str | Path) -> tuple[KnownDataset, dict[str, bytes]]:
    """The record with its test metadata pinned from `folder`, and the bytes to write (nothing is written)."""
    from zoo.reader import split_set_files

    pins = missing_pins(record, folder)
    return with_pins(record, pins, split_set_files(folder, record.config)), pins


def write_pinned(root: str | Path, record: KnownDataset, pins: dict[str, bytes]) -> None:
    for name, data in pins.items():
        write_bytes_atomic(Path(root) / pinned_name(record.dataset_hash, name), data)


def pin_dataset(root: str | Path, folder: str | Path, config: str | None = None) -> str:
    """Pins the test metadata of a registered dataset read from `folder`; returns what it did.

    The folder's checked hash must be a registered dataset's. A record already pinned is
    compared with the folder's test split instead (an error if they differ).
    """
    from zoo.reader import config_name

    root, folder = Path(root), Path(folder)
    config = config_name(folder, config)  # the received zoo parsed (its names checked) before the board is touched
    with board_lock(root) as lock:
        return _pin_dataset(root, folder, config, lock)


def _pin_dataset(root: Path, folder: Path, config: str, lock: FolderLock) -> str:
    from zoo.storage.integrity import verified_dataset_hash

    actual = verified_dataset_hash(folder, config)
    record = load_datasets(root).get(actual)
    if record is None:
        raise ValueError(f"the dataset at {folder} (config {config!r}, hash {actual[:12]}…) is not registered on the "
                         f"board {root}; submit a result on it first")
    checked = []
    for name in pinned_sets(record):
        pinned = load_pinned(root, record, name)
        current = pq.read_table(io.BytesIO(test_metadata_bytes(folder, config, name))).to_pandas()
        if not current.equals(pinned):
            raise ValueError(f"{root / pinned_name(record.dataset_hash, name)} differs from the "
                             f"{'' if name == DEFAULT else f'split set {name} '}test split of {folder}")
        checked.append(pinned_name(record.dataset_hash, name))
    pinned, pins = pinned_record(root, record, folder)
    if not pins and pinned != record:  # a record pinned before it kept the split sets' file hashes
        register_dataset(root, pinned, replace=True, lock=lock)
    if not pins:
        said = "equals the test split" if len(checked) == 1 else "equal the test splits (the zoo's, its split sets')"
        return f"{record.name}: the pinned {', '.join(checked)} {said} of {folder}"
    write_pinned(root, pinned, pins)
    register_dataset(root, pinned, replace=True, lock=lock)
    return (f"{record.name}: pinned {sum(map(len, pins.values())):,} bytes of test metadata as "
            f"{', '.join(pinned_name(record.dataset_hash, name) for name in pins)}")


def load_pinned(root: str | Path, record: KnownDataset, split_set: str = DEFAULT) -> pandas.DataFrame:
    """A dataset's pinned test metadata (or a split set's), checked against its recorded sha256."""
    if split_set == DEFAULT:
        expected = record.test_metadata_sha256
        if expected is None:
            raise ValueError(f"dataset {record.name!r} ({record.dataset_hash[:12]}…) has no pinned test metadata on "
                             "this board; pin it with `nfnzoo leaderboard pin DATASET_DIR`")
    else:
        expected = record.split_sets.get(split_set)
        if expected is None:
            raise ValueError(f"dataset {record.name!r} ({record.dataset_hash[:12]}…) has no pinned test metadata of "
                             f"split set {split_set!r} on this board (it has {sorted(record.split_sets) or 'none'}); "
                             "pin it with `nfnzoo leaderboard pin DATASET_DIR`")
    path = Path(root) / pinned_name(record.dataset_hash, split_set)
    try:  # a file of the board: never read through a link, neither the file nor pinned/
        nofollow.check(root, path.parent)
    except nofollow.LinkRefused:
        raise ValueError(f"the pinned test metadata of {record.name!r}: {path.parent}: a symbolic link; a board's "
                         "pinned files are never read through links") from None
    try:
        data = read_capped(path, MAX_PINNED_BYTES, "pinned test metadata file", follow=False)
    except InputError as error:
        raise ValueError(f"the pinned test metadata of {record.name!r}: {error}") from None
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise ValueError(f"{path}: sha256 {actual[:12]}… is not the recorded {expected[:12]}…; "
                         "the pinned test metadata was changed")
    check_declared_sizes(path)  # its footer and pages vouch for their sizes before any column is decoded
    return pq.read_table(io.BytesIO(data)).to_pandas()


def same_runs(root: str | Path):
    """`(hash_a, hash_b) -> bool | None`: whether two registered datasets hold the same runs.

    They do when their pinned test splits list the same model_ids. An example is a zoo regenerated from the
    same spec on a machine whose arithmetic gives other bytes. The answer is None when `hash_b` has no
    pinned test metadata on this board. That is an author's own board, which never registered the official
    pinned zoo, so whether `a` holds its runs cannot be checked here.

    There is one exception. If `hash_b` is a standard suite's zoo and `a` was regenerated from another
    recipe, the answer is False. The recipe is `benchmarks.standard.ZooRef`'s spec and profile. So a
    standard-v1 zoo is no stand-in for standard-v2's, though their CNN cells' protocols agree. Otherwise a
    dataset without pinned test metadata holds the same runs as none.
    """
    from benchmarks.standard import STANDARD_SUITES

    datasets, seen = load_datasets(root), {}
    recipes = {cell.zoo.dataset_hash: cell.zoo.source for name in STANDARD_SUITES.names()
               for cell in STANDARD_SUITES.get(name)().cells}

    def model_ids(dataset_hash: str) -> frozenset | None:
        if dataset_hash not in seen:
            record = datasets.get(dataset_hash)
            seen[dataset_hash] = (None if record is None or record.test_metadata is None
                                  else frozenset(load_pinned(root, record)["model_id"].astype(str)))
        return seen[dataset_hash]

    def same(a: str, b: str) -> bool | None:
        if model_ids(b) is None:
            source = datasets[a].source if a in datasets else ""
            if b in recipes and source.startswith("regenerated from spec ") and source != recipes[b]:
                return False
            return None
        return model_ids(a) is not None and model_ids(a) == model_ids(b)

    return same
