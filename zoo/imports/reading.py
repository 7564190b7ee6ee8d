"""How an importer reads a published zoo's files: regular files only, and one error path.

Everything an importer reads is opened with `zoo.validation.inputs.open_regular(..., follow=False)`.
That covers a `.pth`, `weights.npy`, a CSV, a JSON file, a sidecar and an archive. The file is not
opened through a symbolic link (`O_NOFOLLOW`). It is opened non-blocking, so a FIFO or a device cannot
hang the import. Then `fstat` checks that it is a regular file before a byte is read. `read_capped(...,
follow=False)` reads one whole, within a bound.

`reading(path, member)` is the one place where a library's own exception becomes the user's one line.
Inside it, what zipfile, tarfile, lzma, gzip, zlib, csv, pandas, NumPy, pickle or torch raise on a
malformed file becomes an `InputError`. So do int/float conversions' `ValueError` and `OverflowError`.
The error names the file, the member (an archive member, a key, a row) and what was expected. A full
disk stays an `OSError` naming the file, and the CLI says so. An `InputError` passes unchanged.

`as_int64`/`as_float` convert a value read from a file, refusing what Arrow could not store.

One link rule holds for every importer: nothing below an import source's root is read through a symbolic
link. Every file or folder an importer opens, lists or walks below the source is reached through
`within`, `listing`, `files_below` or `source_path`. `source_path` takes a path read from a file:
`zoo.storage.nofollow.confine`'s safe names, then `within`. Each `lstat`s every component below the
root. A link among them, or among the entries of a listed folder, is refused in one line naming it,
wherever it leads.

Links are refused rather than skipped, so a source is never imported with members silently missing. They
are refused inside the source too: telling inside from outside means resolving the link, and a release
holds no links. An archive's links are refused when it is unpacked (`zoo.imports.archive`).

The root itself may be a link, since the user named it. So may a file named by an option (`--splits`,
`--nfn-split`). The walk stops what arrives planted in a source. It does not stop a process racing the
import with the user's own rights (as in `zoo.storage.nofollow`).
"""

from __future__ import annotations

import contextlib
import csv
import errno
import lzma
import os
import pickle
import stat
import tarfile
import zipfile
import zlib
from pathlib import Path
from typing import Any, Iterable, Iterator

from zoo.storage.nofollow import confine
from zoo.validation.bounds import MAX_MEMBER_LAYERS
from zoo.validation.inputs import MAX_INT, InputError, name_problem

_DISK_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}


# what a library raises on a malformed file: archives, compression, CSV, text, pickles and torch.load, NumPy's
# header parser, int()/float() of a value, a mapping or sequence without the entry a format promises
LIBRARY_ERRORS: tuple[type[BaseException], ...] = (
    zipfile.BadZipFile, zipfile.LargeZipFile, NotImplementedError, RuntimeError, lzma.LZMAError, tarfile.TarError,
    EOFError, zlib.error, csv.Error, UnicodeError, pickle.UnpicklingError, ValueError, OverflowError, TypeError,
    KeyError, IndexError, AttributeError, SyntaxError, RecursionError, MemoryError, OSError)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    lines = str(error).strip().splitlines()
    text = lines[0] if lines else type(error).__name__
    if isinstance(error, KeyError):
        text = f"no {text}"
    elif isinstance(error, MemoryError):
        text = "does not fit in memory"
    elif isinstance(error, RecursionError):
        text = "nested too deeply"
    return ascii(text)[1:-1][:160]


@contextlib.contextmanager
def reading(path: str | Path, member: str | None = None, expected: str | None = None) -> Iterator[None]:
    """Library errors raised inside become one `InputError`: "`path`: `member`: `expected` (why)"."""
    try:
        yield
    except InputError:
        raise
    except LIBRARY_ERRORS as error:
        if isinstance(error, OSError) and error.errno in _DISK_FULL:  # the disk's fault, not the file's
            raise OSError(error.errno, error.strerror, error.filename or str(path)) from None
        where = f"{path}: {member}" if member else str(path)
        what = f"not {expected}" if expected else "cannot be read"
        raise InputError(f"{where}: {what} ({_reason(error)})") from None


def is_regular(path: Path) -> bool:
    """Whether `path` is a regular file, the link itself examined (`lstat`): a listing's filter."""
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


# --- the source's files and folders: the one link rule (module docstring) --------------------------

def link_refused(path: str | Path, what: str | None = None) -> InputError:
    return InputError(f"{what + ': ' if what else ''}{path} is a symbolic link inside the import source; nfnzoo "
                      "reads nothing there through a link (it could lead outside the source): put the file or "
                      "folder itself there")


def within(root: str | Path, path: str | Path, what: str | None = None) -> Path:
    """`path` once no existing component of it below the source `root` is a symbolic link (`lstat`).

    The root itself may be one. A missing component ends the walk; the reader then says it is missing.
    """
    root, path = Path(root), Path(path)
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if relative == ".":
        return path
    if relative == ".." or relative.startswith(".." + os.sep):
        raise ValueError(f"{path} is not inside {root}")  # a programming error: importers build paths from root
    current = root
    for part in relative.split(os.sep):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except (OSError, ValueError):  # missing, a file on the way, a NUL in a name
            break
        if stat.S_ISLNK(mode):
            raise link_refused(current, what)
    return path


def listing(root: str | Path, folder: str | Path) -> list[Path]:
    """The entries of `folder` (below the source `root`, or the root) sorted by name.

    Neither the folder nor any entry in it may be a link. A missing folder lists nothing.
    """
    folder = within(root, folder)
    try:
        with os.scandir(folder) as scan:
            entries = sorted(scan, key=lambda entry: entry.name)
    except (FileNotFoundError, NotADirectoryError):
        return []
    for entry in entries:
        if entry.is_symlink():
            raise link_refused(folder / entry.name)
    return [folder / entry.name for entry in entries]


def files_below(root: str | Path, folder: str | Path) -> list[Path]:
    """Every entry below `folder` that is not a folder (at any depth, `listing` at each), sorted."""
    found, folders = [], [Path(folder)]
    while folders:
        for entry in listing(root, folders.pop()):
            (folders if entry.is_dir() else found).append(entry)  # not a link: is_dir follows none
    return sorted(found)


def source_path(root: str | Path, relative: object, what: str) -> Path:
    """`root / relative` for a relative path read from a source's file, such as a metadata row's `ckpt_file`.

    It must be safe names inside `root` (`zoo.storage.nofollow.confine`), reached through no link
    (`within`).
    """
    if isinstance(relative, str) and not any(name_problem(part) for part in relative.split("/")):
        within(root, Path(root) / relative, what)  # first, so that a link is named as one wherever it leads
    return confine(root, relative, what, follow=True)


def is_source_file(root: str | Path, relative: str) -> bool:
    """Whether `relative` is a regular file below `root`; a link on the way is refused (`within`).

    `relative` must be safe names (`zoo.validation.inputs.NAME`).
    """
    if any(name_problem(part) for part in relative.split("/")):
        return False
    return is_regular(within(root, Path(root) / relative))


# --- values read from a file ----------------------------------------------------------------------

def as_int64(value: Any, where: str) -> int:
    """`value` (an int, a whole float, a numeral) as a 64-bit integer; anything else is an `InputError`."""
    if isinstance(value, bool):
        raise InputError(f"{where}: {value!r} is not an integer")
    try:
        number = int(value)
        if isinstance(value, float) and number != value:
            raise ValueError
    except (TypeError, ValueError, OverflowError):
        digits = str(value).strip().lstrip("+-").isdigit()  # a numeral past Python's 4,300 digits is one too
        raise InputError(f"{where}: {ascii(str(value))[1:-1][:40]}{'…' if len(str(value)) > 40 else ''} is "
                         f"{'beyond 64 bits' if digits else 'not an integer'}") from None
    if not -MAX_INT - 1 <= number <= MAX_INT:
        raise InputError(f"{where}: {ascii(str(value))[1:-1][:40]}{'…' if len(str(value)) > 40 else ''} "
                         "is beyond 64 bits")
    return number


def as_float(value: Any, where: str) -> float:
    """`value` as a float; NaN and infinities are kept, since a row's status says diverged.

    A value no float holds (a 400-digit integer, text) is an `InputError`.
    """
    if isinstance(value, bool):
        raise InputError(f"{where}: {value!r} is not a number")
    try:
        return float(value)
    except (TypeError, ValueError, OverflowError):
        shown = ascii(str(value))[1:-1]
        raise InputError(f"{where}: {shown[:40]}{'…' if len(shown) > 40 else ''} is not a number a float "
                         "holds") from None


def first_repeat(keys: Iterable[Any]) -> tuple[int, int] | None:
    """(first position, repeated position) of the first key that appears twice, or None."""
    seen: dict[Any, int] = {}
    for position, key in enumerate(keys):
        if key in seen:
            return seen[key], position
        seen[key] = position
    return None


def check_layers(where: str, name: str, layers: int) -> None:
    """A declared layer or block count within 1..`MAX_MEMBER_LAYERS` (checked before anything is built)."""
    if not 0 < layers <= MAX_MEMBER_LAYERS:
        raise InputError(f"{where}: {name} {layers:,} is outside 1..{MAX_MEMBER_LAYERS:,} "
                         "(zoo.validation.bounds.MAX_MEMBER_LAYERS)")
