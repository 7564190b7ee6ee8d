"""The layout of a zoo output folder, and its small JSON files.

    specs/<config>.json   the resolved spec of every config generated into the folder
    staging/              one safetensors file per finished checkpoint (`zoo.staging`)
    data/<config>/        the packed Parquet shards (`zoo.pack`)
    manifest.json         checksums, counts and hashes of the packed shards
    README.md             the dataset card (`zoo.card`)
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from zoo.spec import ZooSpec, spec_from_data

SPECS_FOLDER = "specs"
STAGING_FOLDER = "staging"
MANIFEST = "manifest.json"


def write_json_atomic(path: Path, data: dict) -> None:
    temporary = path.with_name(f".{path.name}.tmp")
    temporary.write_text(json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")
    os.replace(temporary, path)


def save_spec(spec: ZooSpec, folder: Path) -> Path:
    path = Path(folder) / SPECS_FOLDER / f"{spec.name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(spec.to_data(), indent=2, sort_keys=True) + "\n"
    if path.exists() and path.read_text() != text:
        # A different spec of the same name would mix its runs in silently at packing time.
        raise ValueError(f"{folder} already holds a different spec named {spec.name!r} ({path}); "
                         "use another --out folder or remove that one")
    path.write_text(text)
    return path


def load_saved_specs(folder: str | Path) -> list[ZooSpec]:
    return [spec_from_data(json.loads(p.read_text()), str(p))
            for p in sorted((Path(folder) / SPECS_FOLDER).glob("*.json"))]


def read_manifest(folder: str | Path) -> dict:
    path = Path(folder) / MANIFEST
    if not path.exists():
        raise FileNotFoundError(f"{folder} is not a packed zoo: no {MANIFEST} (run `nfnzoo pack {folder}`)")
    return json.loads(path.read_text())


def resolve_config(manifest: dict, config: str | None, folder: str | Path = "") -> str:
    """The named config, or the folder's only one."""
    names = sorted(manifest["configs"])
    if config is None:
        if len(names) != 1:
            raise ValueError(f"{folder} holds configs {names}; name one")
        return names[0]
    if config not in manifest["configs"]:
        raise ValueError(f"{folder} has no config {config!r}; it holds {names}")
    return config
