"""Spec files: finding, reading and extending the YAML files one spec is made of.

A spec is a path, or the name of a bundled spec (``cnn-mnist`` -> zoo/specs/cnn-mnist.yaml).
A spec is user input, so reading one is bounded (`zoo.validation.inputs`).
Every YAML file is read with a size cap and an alias-expansion bound.
That covers the spec and each `extends` target.
`extends` names a bundled spec or a file inside the extending spec's own folder tree.
Symbolic links are resolved first.
The caller may allow files anywhere (`nfnzoo generate --allow-extends-anywhere`).
A spec deep-merges onto its base, as a profile deep-merges onto the spec.
This module works on the raw mappings; `zoo.planning.spec` validates what they make.
It is apart from the spec's dataclasses so `zoo.planning.declared` reads files the same way, unvalidated.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

from zoo.validation.inputs import NAME, InputError, load_yaml
from zoo.validation.schema import SchemaError

SPECS_DIR = Path(__file__).resolve().parents[1] / "specs"
MAX_SPEC_BYTES = 2**20  # a bundled spec is under 8 KB
MAX_SPEC_NODES = 100_000  # YAML values once aliases are expanded; a bundled spec has a few hundred


def merge(base: Any, override: Any) -> Any:
    """Deep-merges a profile into the base spec; `null` in a profile deletes a key."""
    if not isinstance(base, dict) or not isinstance(override, dict):
        return copy.deepcopy(override)
    merged = copy.deepcopy(base)
    for key, value in override.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge(merged.get(key), value) if key in merged else copy.deepcopy(value)
    return merged


def resolve_spec_path(spec: str | Path) -> Path:
    """A path, or the name of a bundled spec (``cnn-mnist`` -> zoo/specs/cnn-mnist.yaml)."""
    path = Path(spec)
    if path.is_file():
        return path
    bundled = SPECS_DIR / f"{spec}.yaml"
    if NAME.fullmatch(str(spec)) and bundled.is_file():
        return bundled
    if os.path.lexists(path):  # a folder, a pipe, a device: `load_yaml` says which, without reading it
        return path
    names = sorted(p.stem for p in SPECS_DIR.glob("*.yaml"))
    raise FileNotFoundError(f"no spec file {ascii(str(spec))[1:-1][:200]!r}; bundled specs: {', '.join(names)}")


def read_spec_yaml(path: Path, where: str) -> dict:
    """One spec file (the spec or an `extends` target) as a mapping, read within bounds."""
    top = where == str(path)
    try:
        raw = load_yaml(path, limit=MAX_SPEC_BYTES, max_nodes=MAX_SPEC_NODES, what="spec file")
    except InputError as error:
        if top:
            raise SchemaError(where, "", str(error).removeprefix(f"{where}: ")) from None
        raise SchemaError(where, "extends", str(error)) from None
    if not isinstance(raw, dict):
        raise SchemaError(where, "" if top else "extends", f"expected a mapping at the top level (a spec)"
                                                          f"{'' if top else f' of {path}'}, got {type(raw).__name__}")
    return raw


def _inside(path: Path, folder: Path) -> bool:
    real, root = os.path.realpath(path), os.path.realpath(folder)
    return os.path.commonpath([real, root]) == root


def _extends_target(base: str, path: Path, root: Path, where: str, allow_anywhere: bool) -> Path:
    """The file `extends: base` of spec `path` names: a file beside it, else a bundled spec.

    With `allow_anywhere`, it may also be a path from the working directory.
    Without it, the file must lie in `root` (the top spec's folder tree) or among the bundled specs.
    That is checked once symbolic links are resolved.
    """
    shown = ascii(base)[1:-1][:120]
    beside = path.parent / base
    if beside.is_file():
        target = beside
    elif NAME.fullmatch(base) and (SPECS_DIR / f"{base}.yaml").is_file():
        return SPECS_DIR / f"{base}.yaml"
    elif allow_anywhere and Path(base).is_file():
        target = Path(base)
    else:
        names = ", ".join(sorted(p.stem for p in SPECS_DIR.glob("*.yaml")))
        raise SchemaError(where, "extends", f"no spec file {shown!r} beside {path} and no bundled spec of that "
                                            f"name; bundled specs: {names}")
    if not allow_anywhere and not (_inside(target, root) or _inside(target, SPECS_DIR)):
        raise SchemaError(where, "extends", f"{shown!r} leads outside {root} (the spec's folder tree) and is not a "
                                            "bundled spec; move the base spec beside this one, or pass "
                                            "--allow-extends-anywhere")
    return target


def resolve_extends(raw: dict, path: Path, where: str, root: Path, allow_anywhere: bool,
                    seen: tuple[Path, ...] = ()) -> dict:
    """`extends: NAME` (a bundled spec or a path beside this one) deep-merges this file onto it."""
    base = raw.pop("extends", None)
    if base is None:
        return raw
    if not isinstance(base, str) or not base:
        raise SchemaError(where, "extends", f"expected a spec name or path, got {type(base).__name__}")
    base_path = _extends_target(base, path, root, where, allow_anywhere)
    if base_path.resolve() in seen or base_path.resolve() == path.resolve():
        raise SchemaError(where, "extends", f"{ascii(base)[1:-1][:120]} extends itself")
    base_raw = read_spec_yaml(base_path, where)
    base_raw = resolve_extends(base_raw, base_path, str(base_path), root, allow_anywhere, seen + (path.resolve(),))
    _check_inherited_descriptions(base_raw, raw, base, where)
    return merge(base_raw, raw)


def _check_inherited_descriptions(base_raw: dict, raw: dict, base: str, where: str) -> None:
    """A spec that describes its own data may not inherit a profile description of the base's.

    It would name the base's data set in the card: MNIST images in a CIFAR-10 spec's card, say.
    """
    if "description" not in raw or not isinstance(base_raw.get("profiles"), dict):
        return
    own = raw.get("profiles") if isinstance(raw.get("profiles"), dict) else {}
    for name, overrides in base_raw["profiles"].items():
        if isinstance(overrides, dict) and "description" in overrides \
                and not (isinstance(own.get(name), dict) and "description" in own[name]):
            raise SchemaError(where, f"profiles.{name}.description",
                              f"the {base!r} spec's {name!r} profile describes {base}'s data; this spec sets its "
                              f"own description, so give profiles.{name} its own description too")
