"""Accepted submissions as data files: `<root>/entries/<task>/<hash12>/<model>-<id32>.json`.

An entry holds the submitted results unchanged plus a `submission` block. The block holds its id and the
sha256 of the results' canonical JSON (the content hash). It holds the acceptance time and the file name it
was submitted from. It says whether it was re-scored (`verified`, `rescoring`). When it was, it names its
predictions' file beside it (`<model>-<id32>.predictions.parquet`) and their sha256. Last is the entry's
seal (`leaderboards.seal`): the sha256 of the whole entry as written.

`hash12` is the first 12 characters of the dataset hash. `id32` is the first `ID_HEX` (32) hex digits of the
content hash. Those 128 bits mean that two different results sharing an id (a birthday pair) would take
about 2**64 tries to find. Older boards used 8 digits, which were far too few; `leaderboards.migrate_ids`
renames their entries. An entry file is created exclusively (`write_new_entry_file`). An existing file is
never overwritten, and a second entry at the same path is an error naming both.

Two submissions are duplicates when they have the same content hash. They are also duplicates when they
share task, model, model config, task config, dataset hash and set of seeds. The task config is the
protocol: a model on the ReLU subset and on the tanh subset are two experiments. So a resubmission cannot
pass as a new experiment by writing the same config differently.

The configs are compared in their canonical form (`canonical_config`). Strings are NFKC-normalised with
invisible characters dropped, and keys are sorted. Numbers compare by value: `256.0` is `256`. The string
`"256"`, the canonical text of a number, is `256` too. The task config is first completed with the task's
defaults. A key left out is its default, so omitting `"x": null` where x defaults to null is the same
protocol.

Entry files are read within `MAX_ENTRY_BYTES`: a results file's bound and room for the submission block.
Only regular files are read (`zoo.validation.inputs.read_json_file`). `entry_files` lists the regular
`*.json` files of real folders. A link is never followed; `leaderboards.audit` reports it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import unicodedata
from pathlib import Path
from typing import Any

from benchmarks.results import Results
from zoo.storage import nofollow
from zoo.validation.inputs import read_json_file
from zoo.validation.schema import SchemaError, from_data, to_data
from zoo.validation.text import unsafe_character

ENTRIES_DIR = "entries"
CODE_URL = re.compile(r"https://[A-Za-z0-9.-]+(:[0-9]+)?(/[A-Za-z0-9._~%/+-]*)?")  # no quotes, spaces or queries
COMMIT = re.compile(r"[0-9a-f]{7,40}")
SHA256 = re.compile(r"[0-9a-f]{64}")
MAX_ENTRY_BYTES = 4 * 2**20 + 2**16  # a results file (submission.MAX_RESULTS_BYTES) and its submission block
MAX_TEXT = 1_000  # characters of the board's own text fields (the re-scoring record, the source's name)
ID_HEX = 32  # hex digits of the content hash in an entry's id: 128 bits
ENTRY_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,63}-[0-9a-f]{32}")  # <model>-<ID_HEX hex digits>
PREDICTIONS_SUFFIX = ".predictions.parquet"


@dataclasses.dataclass(frozen=True)
class SubmissionInfo:
    id: str  # "<model>-<first ID_HEX (32) hex digits of content_hash>", also the file's stem
    content_hash: str  # sha256 of the results' canonical JSON
    accepted: str  # UTC time in ISO 8601
    source: str  # the name of the submitted results file
    verified: bool = False  # re-scored from its predictions on the pinned test metadata (older entries: no)
    rescoring: str = ""  # what was re-scored, or why the entry is unverified
    predictions: str | None = None  # the stored predictions beside the entry (`<stem>.predictions.parquet`)
    predictions_sha256: str | None = None  # their sha256, set exactly when `predictions` is
    code_url: str | None = None  # the code the submitter names (an https URL), shown as the entry's link
    code_commit: str | None = None  # its commit (7-40 hex digits)
    seal: str | None = None  # sha256 of the whole entry without this field (leaderboards.seal); audit checks it

    def validate(self, where: str, key: str) -> None:
        for name in ("content_hash", "predictions_sha256", "seal"):
            value = getattr(self, name)
            if value is not None and not SHA256.fullmatch(value):
                raise SchemaError(where, f"{key}.{name}", f"expected a sha256 hex digest, got {ascii(value[:80])}")
        if not ENTRY_ID.fullmatch(self.id):
            raise SchemaError(where, f"{key}.id", f"expected <model>-<{ID_HEX} hex digits>, got {ascii(self.id[:80])}"
                                                  " (an older board: `nfnzoo leaderboard migrate-ids`)")
        for name in ("accepted", "source", "rescoring"):
            if len(getattr(self, name)) > MAX_TEXT or "\n" in getattr(self, name):
                raise SchemaError(where, f"{key}.{name}", f"expected one line of at most {MAX_TEXT:,} characters")
        if (self.predictions is None) != (self.predictions_sha256 is None):
            raise SchemaError(where, f"{key}.predictions", "expected predictions and predictions_sha256 together")
        if self.predictions is not None and self.predictions != f"{self.id}.predictions.parquet":
            raise SchemaError(where, f"{key}.predictions", f"expected {self.id}.predictions.parquet, "
                                                           f"got {self.predictions!r}")
        if self.code_url is not None and not CODE_URL.fullmatch(self.code_url):
            raise SchemaError(where, f"{key}.code_url", f"expected an https URL, got {self.code_url!r}")
        if self.code_commit is not None and not COMMIT.fullmatch(self.code_commit):
            raise SchemaError(where, f"{key}.code_commit", f"expected 7-40 hex digits, got {self.code_commit!r}")
        if self.verified and self.predictions is None:
            raise SchemaError(where, f"{key}.verified", "a verified entry keeps its predictions")


@dataclasses.dataclass(frozen=True)
class Entry:
    submission: SubmissionInfo
    results: Results


def canonical_json(data: Any) -> str:
    """Key-sorted, whitespace-free JSON: equal data gives equal text."""
    return json.dumps(data, sort_keys=True, separators=(",", ":"), allow_nan=False)


def content_hash(data: Any) -> str:
    return hashlib.sha256(canonical_json(data).encode()).hexdigest()


def canonical_config(value: Any) -> Any:
    """`value` (plain JSON data) in the form two equal configs share. Walked without recursion.

    Strings are NFKC-normalised, with their invisible and control characters dropped (keys too). A float
    with an integer value becomes that integer: `256.0` is `256`, `-0.0` is `0`. A string that is the
    canonical text of a finite number becomes that number (`_number_text`: `"256"`, `"0.1"`, `"1e-05"`). A
    config that is not type-checked, like lightgbm's, may record `num_leaves` as `"256"`. Lists stay in
    order. `canonical_json` then sorts the keys, which stay text. Booleans stay booleans (`true` is not
    `1`).
    """
    def text(item: str) -> str:
        return "".join(c for c in unicodedata.normalize("NFKC", item) if not unsafe_character(c))

    def scalar(item: Any) -> Any:
        if isinstance(item, str):
            item = _number_text(text(item))
            if isinstance(item, str):
                return item
        if isinstance(item, float) and math.isfinite(item) and item.is_integer() and abs(item) < 2**63:
            return int(item)
        return item

    if not isinstance(value, (dict, list, tuple)):
        return scalar(value)
    result: Any = {} if isinstance(value, dict) else []
    stack = [(value, result)]
    while stack:
        source, target = stack.pop()
        for key, item in (source.items() if isinstance(source, dict) else enumerate(source)):
            if isinstance(item, (dict, list, tuple)):
                copy: Any = {} if isinstance(item, dict) else []
                stack.append((item, copy))
                item = copy
            else:
                item = scalar(item)
            if isinstance(target, dict):
                target[text(key) if isinstance(key, str) else key] = item  # a key stays text
            else:
                target.append(item)
    return result


MAX_NUMBER_TEXT = 40  # characters of a string read as a number: repr of any float, an int of 10**38


def _number_text(item: str) -> Any:
    """The number `item` is the canonical text of, else `item` unchanged.

    For an integer that text is `str(int)`: no sign `+`, no leading zeros, no `-0`. For a finite float it is
    `repr(float)`: `"0.1"`, `"1e-05"`, `"256.0"`. So `"1e5"`, `"0256"`, `" 256"`, `"nan"` and `"inf"` stay
    strings.
    """
    if not 0 < len(item) <= MAX_NUMBER_TEXT or not item.isascii():
        return item
    try:
        number = int(item)
        return number if str(number) == item else item
    except ValueError:
        pass
    try:
        number = float(item)
    except ValueError:
        return item
    return number if math.isfinite(number) and repr(number) == item else item


def completed_task_config(task: str, task_config: Any) -> Any:
    """`task_config` with every field of task `task`'s Config that it leaves out set to its default.

    The defaults come from `benchmarks.tasks.registry`. So a results file that omits a key defaulting to
    null, and one that writes it, are the same experiment. A task that is not registered (a plugin not
    installed) is returned as it is. So is a config that is not a mapping.
    """
    if not isinstance(task_config, dict):
        return task_config
    from benchmarks.tasks.registry import get_task_class

    try:
        defaults = to_data(get_task_class(task).Config())
    except (KeyError, ValueError, TypeError, ImportError):  # unknown (UnknownNameError), unloadable (PluginError)
        return task_config
    return {**defaults, **task_config}


def duplicate_key(results: Results) -> tuple:
    """What makes two submissions the same experiment. The configs are canonical, and the task config is
    completed with the task's defaults. The seeds' order does not matter."""
    return (results.task, results.model, canonical_json(canonical_config(results.model_config)),
            canonical_json(canonical_config(completed_task_config(results.task, results.task_config))),
            results.dataset.dataset_hash, tuple(sorted(results.seeds)))


def entry_id(model: str, hash_of_content: str) -> str:
    """An entry's id: `<model>-<the content hash's first ID_HEX hex digits>`."""
    return f"{model}-{hash_of_content[:ID_HEX]}"


def entry_path(root: str | Path, results: Results, hash_of_content: str) -> Path:
    folder = Path(root) / ENTRIES_DIR / results.task / results.dataset.dataset_hash[:12]
    return folder / f"{entry_id(results.model, hash_of_content)}.json"


def stored_predictions_path(entry: str | Path) -> Path:
    """Where an entry keeps its predictions: `<stem>.predictions.parquet` beside it."""
    entry = Path(entry)
    return entry.with_name(f"{entry.stem}{PREDICTIONS_SUFFIX}")


def _real_folders(folder: Path) -> list[Path]:
    try:
        children = sorted(os.scandir(folder), key=lambda child: child.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    return [Path(child.path) for child in children if child.is_dir(follow_symlinks=False)]


def entry_files(root: str | Path) -> list[Path]:
    """The entry files under `root`, sorted by path: regular `*.json` files in real folders
    `entries/<task>/<hash12>/`. A link, file or folder out of place is skipped here; audit reports it."""
    found = []
    for task in _real_folders(Path(root) / ENTRIES_DIR):
        for dataset in _real_folders(task):
            found += [Path(child.path) for child in os.scandir(dataset)
                      if child.name.endswith(".json") and child.is_file(follow_symlinks=False)]
    return sorted(found)


class EntryCollision(ValueError):
    """An entry file already exists where a new entry was to be written; never overwritten."""


def write_new_entry_file(root: str | Path, path: str | Path, data: bytes, new_entry: str) -> Path:
    """Writes `data` to `path` below board `root`, created exclusively.

    Its folders are made without following a link (`zoo.storage.nofollow`). It is written to a fresh
    temporary file beside it, then hard-linked into place. `link` fails when anything, even a dangling link,
    holds the name. And the file appears whole. An existing file is an `EntryCollision` naming it and
    `new_entry`.
    """
    path = Path(path)
    nofollow.makedirs(root, path.parent)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.new")
    descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path, follow_symlinks=False)
        except FileExistsError:
            raise EntryCollision(f"{path} already exists; the new entry {new_entry} would overwrite it (the board "
                                 "never overwrites an entry: two entries with one id are an error)") from None
    finally:
        os.unlink(temporary)
    return path


def entry_bytes(data: dict[str, Any]) -> bytes:
    """An entry file's bytes: its data as indented JSON (what `nfnzoo leaderboard submit` writes)."""
    return (json.dumps(data, indent=2, allow_nan=False) + "\n").encode()


def read_entry(path: str | Path) -> tuple[dict[str, Any], Entry]:
    """An entry file's data and its parsed entry; a malformed or oversized file is an error naming it."""
    data = read_json_file(path, MAX_ENTRY_BYTES, strict=True, what="leaderboard entry", follow=False)  # a board's file
    return data, from_data(Entry, data, where=str(path))


def load_entries(root: str | Path) -> list[tuple[Path, Entry]]:
    """Every accepted entry under `root`, sorted by path; a malformed entry is an error naming it."""
    return [(path, read_entry(path)[1]) for path in entry_files(root)]
