"""A folder planted with modules that shadow what nfnzoo imports, each leaving a marker when imported.

`numpy.py`, `torch.py`, `yaml.py`, `benchmarks/`, `zoo/cli.py`, ...: what a hostile zoo folder, or an
ordinary ML project, may hold. A command run there must import none of them (docs/security.md).
"""

from __future__ import annotations

from pathlib import Path

MODULES = ("numpy", "torch", "yaml", "platform", "safetensors", "pyarrow")  # a dependency or the standard library
PACKAGES = ("zoo", "benchmarks", "leaderboards", "nfn_models")  # nfnzoo's own names (zoo/cli.py too)


def plant(folder: Path, markers: Path) -> None:
    """Shadowing modules and packages in `folder`, each leaving `markers/<name>` when imported."""
    markers.mkdir(parents=True, exist_ok=True)

    def body(name: str) -> str:
        return (f"open({str(markers / name)!r}, 'w').close()\n"
                f"raise ImportError('the working folder\\'s {name} was imported')\n")

    for name in MODULES:
        (folder / f"{name}.py").write_text(body(name))
    for name in PACKAGES:
        (folder / name).mkdir(exist_ok=True)
        (folder / name / "__init__.py").write_text(body(name))
    (folder / "zoo" / "cli.py").write_text(body("zoo.cli"))


def imported(markers: Path) -> list[str]:
    """The planted modules that were imported."""
    return sorted(path.name for path in markers.iterdir())
