"""Atomic file writes and JSON reading with errors that name the file.

A results file, a plot or a leaderboard entry is either complete or absent: we write a
temporary file in the target folder and `os.replace` it, so an interrupted run never leaves
half a file behind for the next reader.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator


@contextlib.contextmanager
def replacing(path: str | Path) -> Iterator[Path]:
    """Yields a temporary path beside `path`; on success it replaces `path`, on error it is removed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        yield Path(temporary)
        os.replace(temporary, path)
    finally:
        Path(temporary).unlink(missing_ok=True)


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Writes `text` to `path` (creating parent folders) via a temporary file and a rename."""
    with replacing(path) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return Path(path)


def write_json_atomic(path: str | Path, data: Any) -> Path:
    """Writes strict JSON (NaN and infinities are an error), indented, with a final newline."""
    return write_text_atomic(path, json.dumps(data, indent=2, allow_nan=False) + "\n")


def read_json(path: str | Path) -> Any:
    """Reads a JSON file; a missing or malformed file raises ValueError naming it."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from None
