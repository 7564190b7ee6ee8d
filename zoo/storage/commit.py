"""Atomic commit of a pack: after a SIGKILL or a full disk, one complete pack remains.

At any point the folder holds the old pack or the new one, never a mix.

Shard names carry a content tag: `<split>-NNNNN-of-MMMMM-<sha256[:8]>.parquet` (`zoo.dataset.pack`).
So the old and the new pack's shards can sit side by side in `data/<config>/`. A same-named file
there holds the same bytes.

The commit runs these steps in order.

1. Fsync every shard built in `data/.<config>.building/` and move it into `data/<config>/`.
   A same-named file there is replaced; it has the same bytes. Then fsync the folder.
2. Write `manifest.json` atomically and durably. This is the commit point for nfnzoo's readers,
   which read only the shards a manifest lists.
3. Write `README.md`, the card, atomically. Its YAML `data_files` name the exact shard files of
   each split. So `datasets.load_dataset` reads the pack the card describes, never a leftover.
4. Only then delete the files in `data/<config>/` that the new manifest does not list. Delete the
   scratch folders of interrupted packs too (`remove_leftovers`).

A kill before step 2 leaves the old manifest and card with their shards untouched. It also leaves
unlisted new shards; `nfnzoo verify` warns about them, and nothing reads them. A kill between 2 and
3 leaves the new manifest with the old card. Each names shards that are all present. A kill during
4 leaves only unlisted leftovers. A failure before the manifest is written (a full disk) removes the
shards this commit added. So the old pack stays as it was. The next pack removes every leftover.
Only files a manifest listed are ever replaced, and only by the same bytes.

No link below the folder is followed (`zoo.storage.nofollow`). Before anything moves,
`check_no_links` refuses a link at `data/`. It also refuses one at any config's `data/<config>/` or
scratch folder, or among the files there. So shards never move into a folder a link leads to, such
as another dataset's. Nor are leftovers ever deleted from one.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from zoo.storage import nofollow
from zoo.storage.atomic import replacing

MANIFEST = "manifest.json"
CARD = "README.md"


def building_folder(folder: Path, name: str) -> Path:
    """The scratch folder one config's new shards are written to (a dot folder: never read)."""
    return Path(folder) / "data" / f".{name}.building"


def fsync_path(path: Path, *, folder: bool = False) -> None:
    descriptor = os.open(path, os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if folder else 0))
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def _named(error: OSError, path: Path) -> OSError:
    """`error` naming `path` when it names no file (a full disk inside a write names none)."""
    if error.filename is not None:
        return error
    named = OSError(error.errno, error.strerror or type(error).__name__, str(path))
    named.__cause__ = error
    return named


def check_no_links(folder: str | Path, names) -> None:
    """For each config name: no link at `data/`, `data/<name>/` or its scratch folder.

    No link among the files directly in them either. A `LinkRefused` names the first one met (see
    the module)."""
    folder = Path(folder)
    nofollow.check(folder, folder / MANIFEST)
    nofollow.check(folder, folder / CARD)
    nofollow.check_entries(folder, folder / "data")
    for name in names:
        nofollow.check_entries(folder, folder / "data" / name)
        nofollow.check_entries(folder, building_folder(folder, name))


def _write(folder: Path, path: Path, text: str) -> None:
    try:
        with replacing(path, durable=True, root=folder) as temporary:
            temporary.write_text(text, encoding="utf-8")
    except OSError as error:
        raise _named(error, path) from None


def _move_shards(folder: Path, names: list[str], added: list[Path]) -> None:
    """Step 1: the built shards into data/<config>/; `added` collects the paths that did not exist."""
    for name in names:
        building, final = building_folder(folder, name), Path(folder) / "data" / name
        nofollow.makedirs(folder, final)
        for shard in sorted(p for p in building.iterdir() if not p.name.startswith(".")):
            target = final / shard.name
            try:
                fsync_path(shard)
                existed = os.path.lexists(target)
                nofollow.replace(folder, shard, target)
            except OSError as error:
                raise _named(error, shard) from None
            if not existed:
                added.append(target)
        fsync_path(final, folder=True)


def commit_pack(folder: str | Path, names: list[str], manifest: dict, card: str) -> None:
    """Commits the shards built for configs `names`, then `manifest` and `card` (module docstring)."""
    folder = Path(folder)
    added: list[Path] = []
    try:
        check_no_links(folder, sorted({*names, *manifest["configs"]}))
        _move_shards(folder, names, added)
        _write(folder, folder / MANIFEST, json.dumps(manifest, indent=2, sort_keys=True, allow_nan=False) + "\n")
    except BaseException:  # the old manifest still rules: take back what this commit added
        for path in added:
            nofollow.unlink(folder, path)
        for name in names:
            nofollow.rmtree(folder, building_folder(folder, name), ignore_errors=True)
        raise
    fsync_path(folder, folder=True)
    _write(folder, folder / CARD, card)
    fsync_path(folder, folder=True)
    remove_leftovers(folder, manifest)


def leftovers(folder: str | Path, manifest: dict) -> list[Path]:
    """Shards in data/<config>/ of the manifest's configs that it does not list (an interrupted pack's)."""
    folder = Path(folder)
    listed = {f["path"] for entry in manifest["configs"].values() for f in entry["files"]}
    found = []
    for name in sorted(manifest["configs"]):
        config_folder = folder / "data" / name
        if config_folder.is_dir():
            found += [path for path in sorted(config_folder.glob("*.parquet"))
                      if path.is_file() and f"data/{name}/{path.name}" not in listed]
    return found


def remove_leftovers(folder: str | Path, manifest: dict) -> None:
    """Step 4: unlisted shards, scratch folders and temporary files of interrupted packs."""
    folder = Path(folder)
    check_no_links(folder, sorted(manifest["configs"]))
    for path in leftovers(folder, manifest):
        nofollow.unlink(folder, path)
    data = folder / "data"
    if data.is_dir():
        for scratch in [*data.glob(".*.building"), *data.glob(".*.retired")]:
            nofollow.rmtree(folder, scratch, ignore_errors=True)
    for temporary in [*folder.glob(f".{MANIFEST}.*.tmp"), *folder.glob(f".{CARD}.*.tmp")]:
        nofollow.unlink(folder, temporary)
