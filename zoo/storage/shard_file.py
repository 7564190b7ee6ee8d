"""Opening a shard: a regular file only, never blocking, and an error that names it.

`zoo.storage.integrity` (checksums) and `zoo.storage.declared_sizes` (declared sizes) open shards
through here. Otherwise a FIFO swapped in for a shard would hang a reader forever.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class CorruptShardError(ValueError):
    """A shard on disk does not match its manifest entry (missing, resized or changed bytes)."""


NOT_REGULAR = "not a regular file (a pipe, socket or device)"


def regular_file_problem(path: Path) -> str | None:
    """Why `path` cannot be read as a shard without blocking, or None for a regular file.

    The reasons are "missing", "a folder, not a file", or `NOT_REGULAR`. A FIFO's open would wait for
    a writer forever."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "missing"
    except OSError as error:
        return f"cannot be read ({error.strerror or error})"
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    return None if stat.S_ISREG(mode) else NOT_REGULAR


def open_regular(path: Path):
    """`path` opened for binary reading, never blocking.

    It is opened non-blocking, then checked to be a regular file by its descriptor. So a FIFO swapped
    in after a check is refused, not waited on. Anything else is `CorruptShardError` naming the file."""
    try:
        descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except IsADirectoryError:
        raise CorruptShardError(f"{path}: a folder, not a file") from None
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise CorruptShardError(f"{path}: {NOT_REGULAR}")
    return os.fdopen(descriptor, "rb")
