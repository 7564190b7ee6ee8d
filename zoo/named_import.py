"""Importing the one module a user named, and nothing else, from the working folder.

`--model mypkg.models:MyNFN` resolves from the folder that holds `mypkg/`, without an install, as
uvicorn resolves `module:attr`. The folder itself is never put on `sys.path`. Otherwise a `numpy.py`,
`benchmarks/` or `zoo/` beside `mypkg/` would shadow the real ones in every command.

So `import_named` looks the named top-level module up on the normal path first: the standard library,
installed packages, nfnzoo itself. Only if it is missing there is that one name looked up in the folder.
A finder appended to `sys.meta_path` answers for that name alone. Submodules then import through the
package's own `__path__`.

Ray workers import the model again, and their working folder is not the user's. So the folder each name
was found in travels to them in `NAMED_MODULES_VARIABLE` (`worker_environment`). It is JSON: top-level
name -> folder.

A Python process that nfnzoo starts runs `python_command()`, i.e. `python -P`. That leaves the working
folder off the child's `sys.path`; `python -m` would put it first.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
from types import ModuleType
from typing import Sequence

NAMED_MODULES_VARIABLE = "NFNZOO_NAMED_MODULES"


class _OneName(importlib.abc.MetaPathFinder):
    """Finds the top-level module `name` in `folder`, and no other name."""

    def __init__(self, name: str, folder: str):
        self.name, self.folder = name, folder

    def find_spec(self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None):
        if fullname != self.name or path is not None:
            return None
        return importlib.machinery.PathFinder.find_spec(fullname, [self.folder])


def _named_folders() -> dict[str, str]:
    """The folders names were found in, as this process inherited them (malformed: none)."""
    try:
        value = json.loads(os.environ.get(NAMED_MODULES_VARIABLE) or "{}")
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _finder_for(name: str) -> _OneName | None:
    return next((f for f in sys.meta_path if isinstance(f, _OneName) and f.name == name), None)


def _working_folder() -> str | None:
    try:
        return os.getcwd()
    except OSError:  # the working folder was deleted
        return None


def import_named(module_name: str) -> ModuleType:
    """`module_name` imported, its top-level module from the normal path first (module docstring).

    Else it comes from the working folder, or from the folder an earlier process found it in.
    """
    top = module_name.partition(".")[0]
    if top not in sys.modules and _finder_for(top) is None:
        importlib.invalidate_caches()  # a package written since this process last looked
        if importlib.util.find_spec(top) is None:
            folder = _named_folders().get(top) or _working_folder()
            if folder is not None and importlib.machinery.PathFinder.find_spec(top, [folder]) is not None:
                sys.meta_path.append(_OneName(top, folder))
    return importlib.import_module(module_name)


def shadowed_in_working_folder(module_name: str) -> bool:
    """Whether the working folder holds a top-level module named like `module_name`'s that the normal path shadows.

    An import error mentions it, since it is the likely cause.
    """
    top, folder = module_name.partition(".")[0], _working_folder()
    if folder is None or _finder_for(top) is not None:
        return False
    return importlib.machinery.PathFinder.find_spec(top, [folder]) is not None


def worker_environment() -> dict[str, str]:
    """The variables a worker needs to import the named modules this process found in a folder."""
    found = {f.name: f.folder for f in sys.meta_path if isinstance(f, _OneName)}
    return {NAMED_MODULES_VARIABLE: json.dumps(found, sort_keys=True)} if found else {}


def python_command(*arguments: str) -> list[str]:
    """`python -P ARGUMENTS` for this interpreter: a child that does not import from its working folder."""
    return [sys.executable, "-P", *arguments]
