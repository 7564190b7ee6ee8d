"""Leaderboards: the submission schema and its validation, accepted entries, the renderer.

`submit(results_path, root, dataset_dir)` validates a benchmark results file (SCHEMA.md). It stores it as a
data file under `<root>/entries/`. `render(root, out_dir)` writes the ranked Markdown tables and plots.

There are two kinds of board. A user's own is `default_root()`: `$NFNZOO_LEADERBOARD`, else
`runs/leaderboard` under the working directory. That sits beside the zoos `nfnzoo generate` writes to
`runs/`. It is where `nfnzoo leaderboard submit` writes unless told otherwise. The project's official board
is `OFFICIAL_ROOT`, this package's folder. Its entries are data files committed by pull request. Maintainers
submit to it explicitly with `--root leaderboards`. Following README's product path must never edit tracked
files.

The public names load lazily (PEP 562), so the CLI can register `nfnzoo leaderboard` without importing
torch.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

OFFICIAL_ROOT = Path(__file__).resolve().parent  # the official board: entries are data files of this package
USER_ROOT_VARIABLE = "NFNZOO_LEADERBOARD"


def default_root() -> Path:
    """A user's own board: `$NFNZOO_LEADERBOARD`, else `runs/leaderboard` in the working directory."""
    return Path(os.environ.get(USER_ROOT_VARIABLE) or Path("runs") / "leaderboard")


_EXPORTS = {
    "submit": "leaderboards.submission",
    "Accepted": "leaderboards.submission",
    "SubmissionRejected": "leaderboards.submission",
    "render": "leaderboards.renderer",
}

__all__ = ["OFFICIAL_ROOT", "default_root", *_EXPORTS]  # noqa: PLE0604 (the keys are strings; ruff cannot tell)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # later lookups skip this hook
        return value
    raise AttributeError(f"module 'leaderboards' has no attribute {name!r}")
