"""The layout of a zoo output folder, and its small JSON files.

`specs/<config>.json` holds the resolved spec of every config generated into the folder.
`staging/` holds one safetensors file per finished checkpoint (`zoo.storage.staging`).
`data/<config>/` holds the packed Parquet shards (`zoo.dataset.pack`).
`manifest.json` holds the checksums, counts and hashes of the packed shards.
`README.md` is the dataset card (`zoo.dataset.card`).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from zoo.storage import atomic, nofollow
from zoo.validation.inputs import InputError, check_name, read_capped, read_json_file
from zoo.planning.spec import ZooSpec, spec_from_data

SPECS_FOLDER = "specs"
STAGING_FOLDER = "staging"
MANIFEST = "manifest.json"
MAX_SPEC_JSON_BYTES = 4 * 2**20  # a resolved spec is a few kilobytes


def write_json_atomic(path: Path, data: dict) -> None:
    """Key-sorted strict JSON, written atomically (`zoo.storage.atomic`)."""
    atomic.write_json_atomic(path, data, sort_keys=True)


def _spec_path(folder: str | Path, name: str) -> Path:
    """specs/<name>.json, for a name that is a safe path component only (`zoo.validation.inputs.NAME`)."""
    return Path(folder) / SPECS_FOLDER / f"{check_name(name, 'spec name')}.json"


def _read_saved_spec(path: Path) -> ZooSpec:
    """A saved spec, read within bounds, whose `name` must be its file's stem.

    `pack` turns the name into data/<name>/, so a hand-edited file may not point it elsewhere."""
    spec = spec_from_data(read_json_file(path, MAX_SPEC_JSON_BYTES, strict=True, what="saved spec"), str(path))
    if spec.name != path.stem:
        raise InputError(f"{path}: name: {ascii(spec.name)[:80]} is not the file's name {path.stem!r}; "
                         "a saved spec is specs/<name>.json")
    return spec


def save_spec(spec: ZooSpec, folder: Path) -> Path:
    path = _spec_path(folder, spec.name)
    nofollow.makedirs(folder, path.parent)  # no link below the folder is followed (`zoo.storage.nofollow`)
    nofollow.check(folder, path)
    text = json.dumps(spec.to_data(), indent=2, sort_keys=True) + "\n"
    if path.exists() and read_capped(path, MAX_SPEC_JSON_BYTES, "saved spec").decode(errors="replace") != text:
        # the same spec written before an option with a default existed (its hash leaves such
        # defaults out) is kept as written; a different spec of the same name would mix its runs
        # in silently at packing time
        if _read_saved_spec(path).hash() == spec.hash():
            return path
        raise ValueError(f"{folder} already holds a different spec named {spec.name!r} ({path}); "
                         "use another --out folder or remove that one")
    atomic.write_text_atomic(path, text, root=folder)
    return path


def load_saved_specs(folder: str | Path) -> list[ZooSpec]:
    """Every spec saved in the folder (specs/*.json), each checked as `_read_saved_spec` says.

    They are read with the readers' rule (`zoo.storage.nofollow.confine`). A link, of the file or of
    specs/, may not lead outside."""
    return [_read_saved_spec(nofollow.confine(folder, f"{SPECS_FOLDER}/{p.name}", str(p), follow=True))
            for p in sorted((Path(folder) / SPECS_FOLDER).glob("*.json"))]


def read_manifest(folder: str | Path) -> dict:
    """The folder's manifest; a missing, unreadable or malformed one is an error naming the file."""
    folder = Path(folder)
    path = folder / MANIFEST
    if path.exists() and not path.is_file():  # a folder or a FIFO: named as such, never opened
        from zoo.validation.inputs import InputError

        what = "a folder" if path.is_dir() else "not a regular file (a pipe, socket or device)"
        raise InputError(f"{path}: {what}; a packed zoo's {MANIFEST} is a JSON file "
                                "(re-run `nfnzoo pack` to rewrite it)")
    if not path.is_file():
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such folder (give the folder `nfnzoo generate` wrote)")
        hint = (f"it has staged checkpoints: run `nfnzoo pack {folder}`" if (folder / SPECS_FOLDER).is_dir()
                else "give the folder that `nfnzoo generate` or `nfnzoo pack` wrote")
        raise FileNotFoundError(f"{folder} is not a packed zoo: no {MANIFEST} ({hint})")
    from zoo.validation.inputs import InputError, read_json_file
    from zoo.storage.manifest import MAX_MANIFEST_BYTES, check_manifest

    try:
        manifest = read_json_file(path, MAX_MANIFEST_BYTES, strict=True, what="manifest")
    except InputError as error:
        raise InputError(f"{path}: not a readable manifest ({str(error).removeprefix(f'{path}: ')}); it may be "
                         "truncated: re-run `nfnzoo pack` to rewrite it") from None
    check_manifest(manifest, str(path), folder)  # its structure, and every shard path inside the folder
    return manifest


def resolve_config(manifest: dict, config: str | None, folder: str | Path = "") -> str:
    """The named config, or the folder's only one."""
    names = sorted(manifest["configs"])
    if config is None:
        if len(names) != 1:
            raise ValueError(f"{folder} holds the configs {names}; choose one with --config")
        return names[0]
    if config not in manifest["configs"]:
        raise ValueError(f"{folder} has no config {config!r}; it holds {names}")
    return config


def check_writable(path: str | Path, root: str | Path | None = None) -> Path:
    """Makes folder `path` (and its parents) if missing and proves it writable, or raises.

    Run it before any expensive work; `nfnzoo generate` checks its output folders before Ray starts.
    Then a failure is a one-line `InputError` (a `ValueError`), not a traceback later. It names the
    path and the operating system's reason. Such failures are a read-only folder, a path below a
    regular file, or a folder that cannot be created. The probe writes and removes a file:
    permission bits alone do not tell (root, ACLs, read-only mounts). Below `root` (or a held lock's
    folder) no link is followed (`zoo.storage.nofollow`). `path` itself, the folder a user named,
    may be one.
    """
    path = Path(path)
    base = nofollow.root_for(path, root)
    probe = path / f".nfnzoo-write-probe-{os.getpid()}"
    try:
        existing = next((p for p in (path, *path.parents) if p.exists()), None)
        if existing is not None and not existing.is_dir():
            where = "is" if existing == path else f"is below {existing}, which is"
            raise InputError(f"cannot write to {path}: it {where} a file, not a folder")
        if base is None:
            path.mkdir(parents=True, exist_ok=True)
        else:
            nofollow.makedirs(base, path)
        nofollow.write_new(path, probe, b"")
        probe.unlink()
    except OSError as error:
        reason = error.strerror or type(error).__name__
        where = f" ({error.filename})" if error.filename and Path(error.filename) not in (path, probe) else ""
        raise InputError(f"cannot write to {path}: {reason}{where}") from None
    return path
