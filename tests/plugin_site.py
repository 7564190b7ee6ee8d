"""Packages outside nfnzoo, made visible to `importlib.metadata` without pip (offline, fast).

`add_metadata(site, name, entry_points)` writes `<site>/<name>-<version>.dist-info` (METADATA and
entry_points.txt, what an installer writes); with `site` and the package's source folder on the
path, `importlib.metadata.entry_points` finds the entry points, in this process or a subprocess.
`example_site(site)` does so for `examples/my_nfn`, reading its entry points from its pyproject.toml.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tomllib
from pathlib import Path
from typing import Iterator, Mapping

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "my_nfn"


def add_metadata(site: Path, name: str, entry_points: Mapping[str, Mapping[str, str]], version: str = "0.1.0") -> Path:
    """`site/<name>-<version>.dist-info` declaring `entry_points` ({group: {name: "module:attr"}})."""
    info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{key} = {value}\n" for key, value in points.items()) + "\n"
        for group, points in entry_points.items()))
    return info


def example_site(site: Path) -> list[Path]:
    """The example package's metadata in `site`; returns the folders to put on the path."""
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    add_metadata(site, project["name"], project["entry-points"], project["version"])
    return [site, EXAMPLE]


def subprocess_env(paths: list[Path]) -> dict[str, str]:
    """This environment with `paths` in front of PYTHONPATH (and the package root, for `-m`)."""
    existing = os.environ.get("PYTHONPATH")
    joined = os.pathsep.join([*map(str, paths), str(ROOT), *([existing] if existing else [])])
    return {**os.environ, "PYTHONPATH": joined, "RAY_AUTH_MODE": "disabled", "HF_HUB_OFFLINE": "1"}


@contextlib.contextmanager
def on_path(paths: list[Path], *registries) -> Iterator[None]:
    """`paths` on sys.path for the block; the registries' entry points re-read, and what they
    loaded from plugins forgotten afterwards (so other tests see the built-ins only)."""
    saved = [(registry, dict(registry._items), set(registry._plugins)) for registry in registries]
    sys.path[:0] = [str(p) for p in paths]
    for registry in registries:
        registry.refresh()
    try:
        yield
    finally:
        del sys.path[:len(paths)]
        for registry, items, plugins in saved:
            registry._items.clear()
            registry._items.update(items)
            registry._plugins.clear()
            registry._plugins.update(plugins)
            registry.refresh()
        for module in [m for m in sys.modules if m == "my_nfn" or m.startswith(("my_nfn.", "lazy_plugin"))]:
            del sys.modules[module]
