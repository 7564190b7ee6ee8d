"""What a spec file declares, read before the spec is validated: its reproducibility mode.

Validating a spec imports its family, and with it torch and NumPy.
The portable mode refuses a processor without x86-64-v3 (`zoo.training.reproducibility.processor_problem`).
On a processor below NumPy's own baseline, NumPy's import fails with a traceback.
So `nfnzoo generate` reads the declared mode from the file's mappings alone, and refuses first.
It merges the `extends` chain and the profile as `load_spec` merges them.
This module imports no family, torch or NumPy.
"""

from __future__ import annotations

from pathlib import Path

from zoo.planning.spec_files import merge, read_spec_yaml, resolve_extends, resolve_spec_path


def declared_mode(spec: str | Path, profile: str | None = None, *, allow_outside_extends: bool = False) -> str:
    """`training.reproducibility` of a spec (a path or a bundled spec's name) with `profile` applied.

    The file is read and its `extends` resolved with `load_spec`'s checks, whose errors it raises.
    What is not a mapping, or a profile that is not there, counts as declaring nothing (``native``).
    `load_spec` reports those.
    """
    path = resolve_spec_path(spec)
    where = str(path)
    raw = resolve_extends(read_spec_yaml(path, where), path, where, path.parent, allow_outside_extends)
    profiles = raw.get("profiles")
    overrides = profiles.get(profile) if isinstance(profiles, dict) and profile is not None else None
    merged = merge(raw, overrides) if isinstance(overrides, dict) else raw
    training = merged.get("training")
    mode = training.get("reproducibility", "native") if isinstance(training, dict) else "native"
    return mode if isinstance(mode, str) else "native"
