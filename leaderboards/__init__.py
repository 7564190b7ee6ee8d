"""Leaderboards: the submission schema and its validation, accepted entries, the renderer.

`submit(results_path, root, dataset_dir)` validates a benchmark results file (SCHEMA.md)
and stores it as a data file under `<root>/entries/`; `render(root, out_dir)` writes the
ranked Markdown tables and plots. The default root is this package's folder, so accepted
submissions are committed with a pull request; tests and demos pass their own root.

The public names load lazily (PEP 562), so the CLI can register `nfnzoo leaderboard`
without importing torch.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

DEFAULT_ROOT = Path(__file__).resolve().parent  # accepted entries are data files of this package

_EXPORTS = {
    "submit": "leaderboards.submission",
    "Accepted": "leaderboards.submission",
    "SubmissionRejected": "leaderboards.submission",
    "render": "leaderboards.renderer",
}

__all__ = ["DEFAULT_ROOT", *_EXPORTS]


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value  # later lookups skip this hook
        return value
    raise AttributeError(f"module 'leaderboards' has no attribute {name!r}")
