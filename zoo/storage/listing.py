"""One config's shard listing, parsed once from the manifest: what every reader of a config takes.

A read of a zoo parses `manifest.json` once (`Listing.read`). The loaders, the split-set loader
and the integrity checks then take the `Listing`, never the folder again. A config's dataset hash
is the hash of its shards' (path, sha256) listing (`dataset_hash_of`). Shard paths come out
confined to the folder (`entry_paths`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from zoo.storage.folder import MANIFEST, read_manifest, resolve_config
from zoo.storage.manifest import shard_path
from zoo.storage.shard_file import CorruptShardError


def dataset_hash_of(files: Iterable[dict]) -> str:
    """A config's content hash: its shards' paths and checksums (not versions or times)."""
    listing = sorted((f["path"], f["sha256"]) for f in files)
    return hashlib.sha256(json.dumps(listing).encode()).hexdigest()


def entry_paths(folder: str | Path, entries: list[dict]) -> list[Path]:
    """The files of manifest shard entries, each confined to `folder` (`zoo.storage.manifest.shard_path`)."""
    return [shard_path(folder, entry["path"], f"{Path(folder) / MANIFEST}: shard {ascii(entry['path'])[:80]}")
            for entry in entries]


@dataclasses.dataclass(frozen=True)
class Listing:
    """A packed zoo's config: its folder, its name and its manifest entry (checked by `read_manifest`)."""
    folder: Path
    config: str
    record: dict[str, Any]

    @classmethod
    def read(cls, folder: str | Path, config: str | None = None) -> "Listing":
        """`config` (the only config when None) of the manifest in `folder`, parsed and checked once."""
        folder = Path(folder)
        manifest = read_manifest(folder)
        config = resolve_config(manifest, config, folder)
        return cls(folder, config, manifest["configs"][config])

    @property
    def files(self) -> list[dict[str, Any]]:
        """Every shard entry (path, split, rows, bytes, checksums), in manifest order."""
        return self.record["files"]

    def split(self, split: str) -> list[dict[str, Any]]:
        """The shard entries of one split; a split the config lacks is an error naming those it has."""
        entries = [entry for entry in self.files if entry["split"] == split]
        if not entries:
            raise ValueError(f"{self.folder} config {self.config!r} has no split {split!r}; "
                             f"it has {sorted(self.record['splits'])}")
        return entries

    def paths(self, entries: list[dict[str, Any]]) -> list[Path]:
        """The files of `entries`, each confined to the folder."""
        return entry_paths(self.folder, entries)

    def checked_hash(self) -> str:
        """The dataset hash recomputed from the shard listing and checked against the recorded one.

        No shard is read. A reader that checks each shard it reads against this listing may record it.
        """
        recorded = dataset_hash_of(self.files)
        if recorded != self.record["dataset_hash"]:
            raise CorruptShardError(
                f"{self.folder / MANIFEST}: config {self.config!r} records dataset hash "
                f"{self.record['dataset_hash'][:12]}…, but its shards' checksums give {recorded[:12]}…")
        return recorded
