"""Atomic file writes (`zoo.atomic`) and JSON reading with errors that name the file.

A results file, a plot or a leaderboard entry is either complete or absent: it is written to
a temporary file in the target folder and renamed over the target, with the user's normal
file mode.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from zoo.atomic import replacing, write_json_atomic, write_text_atomic

__all__ = ["read_json", "replacing", "write_json_atomic", "write_text_atomic"]


def read_json(path: str | Path) -> Any:
    """Reads a JSON file; a missing, unreadable or malformed file raises ValueError naming it."""
    path = Path(path)
    if path.is_dir():
        raise ValueError(f"{path}: is a folder; expected a JSON file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except UnicodeDecodeError as error:
        raise ValueError(f"{path}: not a text file (byte {error.start} is not UTF-8); expected a JSON file") from None
    except OSError as error:
        raise ValueError(f"{path}: cannot be read ({error.strerror or error})") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
