"""The structure of `manifest.json`, checked once where it is read, and its shard paths confined.

A manifest comes from a local folder or from a Hub snapshot, so it is input like any other.
`check_manifest` holds it to a small schema. So every reader gets a one-line `InputError` naming
the key, not a `KeyError` or `TypeError` deep inside.

The schema is small. Every config is a safe name mapping to an entry. Its `files` are {path, split,
rows, bytes, sha256}, with non-negative counts. It has a `complete` flag, and per-split row counts
that are its shards' sums. Its `split_sets` have safe names, and their files and holding shards are
confined like the shards. Where present, its `machines` are checked as `zoo.distributed.machine`
checks them.

`shard_path` is the only way a manifest's `files[].path` becomes a file to open. The path must be
relative, made of safe names, and stay inside the folder. That is `zoo.storage.nofollow.confine`,
the rule its writers follow too, here as a reader. So `../x` or `/etc/passwd` is refused before
anything outside is touched.

A Hub snapshot's files are symbolic links into the cache's `blobs/`. That is huggingface_hub's
layout, `.../datasets--ORG--NAME/snapshots/<commit>/<path>`. So there the links may lead anywhere
inside the repo's cache folder, and nowhere else.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from zoo.storage.nofollow import confine
from zoo.validation.inputs import InputError, name_problem
from zoo.validation.text import stored_text_problem
from zoo.distributed.machine import check_machines
from zoo.training.reproducibility import MODES
from zoo.validation.schema import SchemaError

MAX_MANIFEST_BYTES = 64 * 2**20  # a 100,000-shard manifest is ~30 MiB
SPLITS = ("train", "validation", "test")
_SHA256 = re.compile(r"[0-9a-f]{64}")


def shard_path(folder: str | Path, relative: Any, what: str) -> Path:
    """`folder / relative` for a manifest's shard path, confined to `folder` (see the module docstring)."""
    folder = Path(folder)
    try:
        return confine(folder, relative, what, follow=True)
    except InputError:
        cache = folder.parent.parent
        lexical = isinstance(relative, str) and not relative.startswith("/") and all(
            name_problem(part) is None for part in relative.split("/"))
        if not (lexical and folder.parent.name == "snapshots" and (cache / "blobs").is_dir()
                and name_problem(folder.name) is None):
            raise
        confine(cache, f"snapshots/{folder.name}/{relative}", what,
                follow=True)  # the blob it links to is in this repo's cache
        return folder / relative


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"{where}: expected a non-negative integer, got {ascii(value)[:40]}")
    return value


def _mapping(value: Any, where: str) -> dict:
    if not isinstance(value, dict):
        raise InputError(f"{where}: expected a mapping, got {type(value).__name__}")
    return value


def _check_listed_file(entry: Any, where: str, folder: Path | None, keys: tuple[str, ...]) -> None:
    """A file the manifest lists (a shard, a split set's file): `keys` present, a 64-hex-digit sha256.

    Its path is confined to `folder`, or without one checked by its form alone."""
    _mapping(entry, where)
    for key in keys:
        if key not in entry:
            raise InputError(f"{where}: missing `{key}` (expected {', '.join(keys)})")
    if folder is not None:
        shard_path(folder, entry["path"], f"{where}.path")
    else:
        _lexical(entry["path"], where)
    if not isinstance(entry["sha256"], str) or not _SHA256.fullmatch(entry["sha256"]):
        raise InputError(f"{where}.sha256: expected 64 lowercase hex digits")


def _check_file(entry: Any, where: str, folder: Path | None) -> None:
    _check_listed_file(entry, where, folder, ("path", "split", "rows", "bytes", "sha256"))
    if entry["split"] not in SPLITS:
        raise InputError(f"{where}.split: expected one of {list(SPLITS)}, got {ascii(entry['split'])[:40]}")
    _count(entry["rows"], f"{where}.rows")
    _count(entry["bytes"], f"{where}.bytes")
    fast = entry.get("xxh3_128")  # the fast checksum a load checks (zoo.storage.integrity); older manifests lack it
    if fast is not None and (not isinstance(fast, str) or not re.fullmatch(r"[0-9a-f]{32}", fast)):
        raise InputError(f"{where}.xxh3_128: expected 32 lowercase hex digits")


def _lexical(relative: Any, where: str) -> None:
    """A path's form alone (for a manifest not read from a folder, e.g. a repo's before merging)."""
    if not isinstance(relative, str) or not relative or relative.startswith("/"):
        raise InputError(f"{where}.path: {ascii(relative)[:80]} is not a relative path")
    for part in relative.split("/"):
        problem = name_problem(part)
        if problem is not None:
            raise InputError(f"{where}.path: path {ascii(relative)[:80]}: {problem}")


def _check_split_set(name: Any, described: Any, where: str, folder: Path | None, shards: set[str]) -> None:
    """A `split_sets` entry: a safe name, its file (path, sha256, bytes) and rows per split.

    It may list the shards holding its rows, each one of the config's own. `zoo.imports.writer`
    writes them; `zoo.split_set_loader` reads them."""
    problem = name_problem(name)
    if problem is not None:
        raise InputError(f"{where}: {problem}")
    where = f"{where}.{name}"
    _check_listed_file(described, where, folder, ("path", "sha256"))
    if "bytes" in described:
        _count(described["bytes"], f"{where}.bytes")
    if "rows" in described:
        for split, count in _mapping(described["rows"], f"{where}.rows").items():
            if split not in SPLITS:
                raise InputError(f"{where}.rows: unknown split {ascii(split)[:40]}; expected {list(SPLITS)}")
            _count(count, f"{where}.rows.{split}")
    description = described.get("description", "")
    if not isinstance(description, str) or stored_text_problem(description, 2_000) is not None:
        raise InputError(f"{where}.description: expected plain text of at most 2,000 characters")
    listed = described.get("shards")  # absent in a zoo imported before the holders were listed
    if listed is not None:
        if not isinstance(listed, list) or not all(isinstance(path, str) for path in listed):
            raise InputError(f"{where}.shards: expected a list of the config's shard paths")
        unknown = next((path for path in listed if path not in shards), None)
        if unknown is not None:
            raise InputError(f"{where}.shards: {ascii(unknown)[:80]} is not a shard of the config's `files`")


def _check_counts(entry: dict, where: str) -> None:
    """Each split's row count is the sum of its shards'.

    A shard's own count is checked against its file when it is read
    (`zoo.storage.integrity.shard_problem`)."""
    counted: dict[str, int] = {}
    for file_entry in entry["files"]:
        counted[file_entry["split"]] = counted.get(file_entry["split"], 0) + file_entry["rows"]
    for split in SPLITS:
        if counted.get(split, 0) != entry["splits"].get(split, 0):
            raise InputError(f"{where}.splits.{split}: {entry['splits'].get(split, 0):,} rows, but its shards' "
                             f"`rows` add up to {counted.get(split, 0):,}; expected the same count")


def check_config(entry: Any, where: str, folder: Path | None) -> None:
    _mapping(entry, where)
    files = entry.get("files")
    if not isinstance(files, list):
        raise InputError(f"{where}.files: expected a list of shards, got "
                         f"{'nothing' if files is None else type(files).__name__}")
    for index, file_entry in enumerate(files):
        _check_file(file_entry, f"{where}.files[{index}]", folder)
    shards = {file_entry["path"] for file_entry in files}
    for name, described in _mapping(entry.get("split_sets", {}), f"{where}.split_sets").items():
        _check_split_set(name, described, f"{where}.split_sets", folder, shards)
    for key in ("planned_checkpoints", "packed_checkpoints"):
        _count(entry.get(key), f"{where}.{key}")
    if not isinstance(entry.get("complete"), bool):
        raise InputError(f"{where}.complete: expected true or false")
    for key in ("splits", "runs", "status", "arrow_bytes"):
        if key in entry or key == "splits":
            for split, count in _mapping(entry.get(key), f"{where}.{key}").items():
                _count(count, f"{where}.{key}.{split}")
    for split in entry["splits"]:
        if split not in SPLITS:
            raise InputError(f"{where}.splits: unknown split {ascii(split)[:40]}; expected {list(SPLITS)}")
    _check_counts(entry, where)
    columns = entry.get("columns")
    if not isinstance(columns, list) or not all(
            isinstance(c, dict) and isinstance(c.get("name"), str) and isinstance(c.get("type"), str) for c in columns):
        raise InputError(f"{where}.columns: expected a list of {{name, type}} strings")
    for key in ("family", "dataset_hash", "spec_hash"):
        if not isinstance(entry.get(key), str):
            raise InputError(f"{where}.{key}: expected a string")
    _mapping(entry.get("spec"), f"{where}.spec")
    _mapping(entry.get("architectures"), f"{where}.architectures")
    if "reproducibility" in entry:  # absent from packs before the modes (`zoo.training.reproducibility`)
        record = _mapping(entry["reproducibility"], f"{where}.reproducibility")
        if record.get("mode") not in MODES:
            raise InputError(f"{where}.reproducibility.mode: expected one of {', '.join(MODES)}, got "
                             f"{ascii(record.get('mode'))[:40]}")
        for key in ("settings", "versions"):
            for name, value in _mapping(record.get(key), f"{where}.reproducibility.{key}").items():
                if not isinstance(name, str) or not (value is None or isinstance(value, str) and len(value) <= 200):
                    raise InputError(f"{where}.reproducibility.{key}.{ascii(name)[:40]}: expected a short string")
    if "machines" in entry:  # absent from packs before it (`zoo.distributed.machine`)
        try:
            check_machines(entry["machines"], f"{where}.machines")
        except SchemaError as error:
            raise InputError(str(error)) from None


def check_manifest(manifest: Any, where: str, folder: str | Path | None = None) -> dict:
    """`manifest` if it has the structure `zoo.dataset.pack` writes, else an `InputError` naming the key.

    With `folder`, every shard path is also confined to it (`shard_path`); without, only its form is checked.
    """
    if not isinstance(manifest, dict) or not isinstance(manifest.get("configs"), dict):
        raise InputError(f"{where}: not a zoo manifest (expected a JSON object with a `configs` mapping)")
    folder = Path(folder) if folder is not None else None
    for name, entry in manifest["configs"].items():
        problem = name_problem(name)
        if problem is not None:
            raise InputError(f"{where}: configs: {problem}")
        check_config(entry, f"{where}: configs.{name}", folder)
    return manifest
