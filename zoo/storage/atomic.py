"""Atomic file writes: a file is either complete or absent, never half written.

Each write goes to a uniquely named temporary file beside the target. It is then renamed over the
target (`os.replace`). So an interrupted run never leaves half a file for the next reader. With
`durable=True` the bytes are fsynced first. Staged checkpoints use it, since a resumed job trusts
them.

`tempfile.mkstemp` creates its file with mode 0600. The result gets the mode a plain `open()`
would give it: 0666 less the user's umask. So a shared results folder or a leaderboard entry is as
readable as any other file the user writes.

An `OSError` that names no file (a write on a full disk) is raised again naming the target. So the
one line a user sees says which file could not be written.

No link is followed inside a folder the user named (`zoo.storage.nofollow`). That folder is `root`,
or one whose `zoo.storage.lock.FolderLock` this process holds. Parent folders are created without
following a link. A link on the way or at the target is refused with one line naming it.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Iterator

from zoo.storage import nofollow


def _umask() -> int:
    """The process's umask, read without changing it where Linux allows (os.umask sets it)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except OSError:
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def default_file_mode() -> int:
    """The mode `open(path, "w")` gives a new file: 0666 less the umask."""
    return 0o666 & ~_umask()


@contextlib.contextmanager
def replacing(path: str | Path, *, durable: bool = False, root: str | Path | None = None) -> Iterator[Path]:
    """Yields a temporary path beside `path`. On success it replaces `path`; on error it is removed.

    Below `root` (or a held lock's folder: `zoo.storage.nofollow.root_for`) no link is followed."""
    path = Path(path)
    base = nofollow.root_for(path, root)
    if base is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    else:
        nofollow.makedirs(base, path.parent)
        nofollow.check(base, path)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(handle)
    try:
        yield Path(temporary)
        os.chmod(temporary, default_file_mode())
        if durable:
            with open(temporary, "rb") as written:
                os.fsync(written.fileno())
        if base is not None:
            nofollow.check(base, path)  # once more: what the caller wrote may have taken a while
        os.replace(temporary, path)
    except OSError as error:
        if error.filename is None and error.errno is not None:  # a write on a full disk names no file
            raise OSError(error.errno, error.strerror or str(error), str(path)) from error
        raise
    finally:
        Path(temporary).unlink(missing_ok=True)


def write_bytes_atomic(path: str | Path, data: bytes, *, durable: bool = False, root: str | Path | None = None) -> Path:
    with replacing(path, durable=durable, root=root) as temporary:
        temporary.write_bytes(data)
    return Path(path)


def write_text_atomic(path: str | Path, text: str, *, root: str | Path | None = None) -> Path:
    """Writes `text` (UTF-8) to `path`, creating parent folders, via a temporary file and a rename."""
    with replacing(path, root=root) as temporary:
        temporary.write_text(text, encoding="utf-8")
    return Path(path)


def write_json_atomic(path: str | Path, data: Any, *, sort_keys: bool = False, root: str | Path | None = None) -> Path:
    """Writes strict JSON (NaN and infinities are an error), indented, with a final newline."""
    return write_text_atomic(path, json.dumps(data, indent=2, sort_keys=sort_keys, allow_nan=False) + "\n", root=root)

