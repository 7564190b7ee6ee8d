"""Which model a run ran, as its results record it: the model's board name, and where its code came from.

A model is loaded however the user names it. That may be a built-in's name (`statnn`) or an import
path (`mypkg.models:LayerSets`). It may be an installed package's `nfnzoo.models` entry point, or a
class or factory handed to `benchmarks.evaluate`. The board shows it by a *name*. The results record
that name as their `model`, apart from how it was loaded (their `model_source`).

The name (`board_name`) is `--name` (`evaluate(name=...)`) where given. Else it is a built-in's or
an entry point's registered name. Else, for an import path or an object, it is the class's
`BOARD_NAME` where it sets one. Failing that, it is the class's own name (`LayerSets`), or a
factory's function name.

It must be a `MODEL_NAME`: 1-64 ASCII letters, digits and `._+-`, starting with a letter or digit.
It is shown on the board, and is part of an entry's file name. It must not be a different built-in
model's name. Nor may it look like a built-in's (`zoo.validation.names.builtin_problem`). Letter
case, `-` and `_` are set aside, and look-alike letters count. So `StatNN`, `stat_nn` and `rnlp`
clash with `statnn` and `mlp`. Plugin registration and `leaderboard submit` apply the same rule and
line. Both checks run before anything trains, and before any data is read. So a run never ends in
results the board refuses by their name.

The source (`model_source`) says how it was loaded. `kind` is built-in, import path, entry point or
object, and `loaded_as` is what the user gave. It holds the import path of the class, or of the
factory. It holds the installed distribution that provides its top-level package, and that
distribution's version. Else these are null, with the package's `__version__`. The board then names
the model's package by its import path's top-level package (`leaderboards.board.model_version`).

It also holds the code's commit. That is the VCS commit pip recorded when it installed the
distribution from a repository (PEP 610's `direct_url.json`). Else it is the commit of the git
checkout that tracks the module's file. `dirty` marks a checkout with uncommitted changes to
tracked files. No path of this machine is recorded."""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.metadata
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from nfn_models.registry import MODELS
from zoo.registry import import_path
from zoo.validation.names import builtin_problem

MODEL_NAME = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9._+-]{0,62}[A-Za-z0-9_+-])?")  # no trailing dot, as a NAME
COMMIT = re.compile(r"[0-9a-f]{40}")
GIT_TIMEOUT_S = 10


class ModelNameError(ValueError):
    """A model's board name the board would refuse, found before anything trains."""


@dataclasses.dataclass(frozen=True)
class ResolvedModel:
    """A model as one run uses it, resolved once where the run starts (`resolve_model`).

    The harness, the results, the suites and the board read these fields, instead of asking the
    registry again."""

    registered: str  # the registry's spelling: a built-in's or an entry point's name, or the import path
    name: str  # the board name the results record as their `model` (`board_name`)
    source: dict[str, Any]  # the results' `model_source`: how it was loaded, its package, version, commit, dirty
    cls: Any = dataclasses.field(repr=False, compare=False, default=None)  # what the registry holds under it


def resolve_model(model: "str | ResolvedModel", name: str | None = None) -> ResolvedModel:
    """`model` resolved once: the registry's lookup, the board name's rules and its source.

    `model` is a registered name, an import path or an entry point's name. A name the board would refuse
    is an error before any data is read. A `ResolvedModel` is returned as it is, or renamed where `name`
    differs."""
    if isinstance(model, ResolvedModel):
        return model if name is None or name == model.name else dataclasses.replace(
            model, name=board_name(model.registered, name))
    registered = MODELS.resolve(model)
    return ResolvedModel(registered, board_name(registered, name), model_source(registered, model),
                         MODELS.get(registered))


def board_name(registered: str, given: str | None = None) -> str:
    """The name the results record for the registered model `registered` (see the module docstring)."""
    registered = MODELS.resolve(registered)
    origin = MODELS.origin(registered)
    cls = MODELS.get(registered)
    if given is not None:
        name, why = given, "--name"
    elif origin in ("built-in", "entry point"):
        name, why = registered, f"the {origin}'s name"
    else:
        wrapped = getattr(cls, "SOURCE", cls)  # a factory's class (`benchmarks.api.factory_model`): the factory
        name = getattr(cls, "BOARD_NAME", None) or getattr(wrapped, "__name__", "")
        why = f"the name of {import_path(wrapped)}"
    if not isinstance(name, str) or not MODEL_NAME.fullmatch(name):
        raise ModelNameError(f"model {registered!r}: its board name {ascii(str(name)[:80])} ({why}) must be 1-64 ASCII "
                             "letters, digits or ._+-, starting with a letter or digit, not ending with a dot; choose "
                             "one with --name NAME (benchmarks.evaluate(..., name=NAME))")
    problem = builtin_problem(MODELS.kind, name, MODELS.builtin_names(), registered if origin == "built-in" else None)
    if problem is not None:
        raise ModelNameError(problem)
    return name


def model_source(registered: str, loaded_as: str | None = None) -> dict[str, Any]:
    """The results' `model_source` block for the registered model (see the module docstring)."""
    registered = MODELS.resolve(registered)
    cls = MODELS.get(registered)
    code = getattr(cls, "SOURCE", cls)
    module = getattr(code, "__module__", "") or ""
    origin = MODELS.origin(registered)
    point = MODELS.entry_points().get(registered) if origin == "entry point" else None
    declared = getattr(getattr(point, "dist", None), "name", None)  # an entry point knows its distribution
    if origin == "built-in":
        import zoo

        distribution, version = "nfnzoo", zoo.__version__
    else:
        distribution, version = _distribution(module.partition(".")[0], declared)
    commit, dirty = _commit(distribution, sys.modules.get(module))
    return {"kind": origin, "loaded_as": (loaded_as if isinstance(loaded_as, str) else registered)[:200],
            "import_path": import_path(code)[:200], "distribution": distribution, "version": version,
            "commit": commit, "dirty": dirty}


@functools.lru_cache(maxsize=8)
def _packages(path: tuple[str, ...]) -> dict[str, list[str]]:
    """Top-level package -> distributions, read once per `sys.path`.

    Reading it is slow: every installed distribution's file list. A folder put on the path, such as a
    package made visible since, reads it again."""
    return importlib.metadata.packages_distributions()


def _distribution(package: str, declared: str | None = None) -> tuple[str | None, str | None]:
    """(the installed distribution providing `package`, its version), else (None, the package's `__version__`).

    The distribution is `declared` where known."""
    names = [declared] if declared else _packages(tuple(sys.path)).get(package, [])
    for name in names:
        try:
            return name, importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    version = getattr(sys.modules.get(package), "__version__", None)
    return None, version if isinstance(version, str) and len(version) <= 100 else None


def _commit(distribution: str | None, module: Any) -> tuple[str | None, bool | None]:
    """(the code's commit, whether its checkout has uncommitted changes; None where unknown)."""
    if distribution is not None:
        try:
            direct = json.loads(importlib.metadata.distribution(distribution).read_text("direct_url.json") or "{}")
        except (importlib.metadata.PackageNotFoundError, ValueError):
            direct = {}
        commit = direct.get("vcs_info", {}).get("commit_id") if isinstance(direct, dict) else None
        if isinstance(commit, str) and COMMIT.fullmatch(commit):
            return commit, None  # installed from the repository at that commit: no checkout to be dirty
    file = getattr(module, "__file__", None)
    return _git_commit(str(Path(file).resolve())) if file else (None, None)


def _git_commit(file: str) -> tuple[str | None, bool | None]:
    """The commit of the git checkout that tracks `file`, and whether it has uncommitted changes."""
    folder = str(Path(file).parent)

    def git(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S)

    try:
        if git("ls-files", "--error-unmatch", file).returncode != 0:  # a file no checkout tracks (site-packages)
            return None, None
        head = git("rev-parse", "HEAD").stdout.strip()
        if not COMMIT.fullmatch(head):
            return None, None
        changed = git("status", "--porcelain", "--untracked-files=no")
        return head, (bool(changed.stdout.strip()) if changed.returncode == 0 else None)
    except (OSError, subprocess.SubprocessError):  # no git on this machine, or it hung
        return None, None
