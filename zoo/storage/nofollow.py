"""Writes that never follow a symbolic link: the one way to change a folder a user named.

A zoo folder, a staging folder, an import's scratch folder or a leaderboard arrives from elsewhere.
It may come from a copy, an archive or a pull request. So anything below its root may be a planted
link. `OUT/.nfnzoo.lock -> ../victim.txt` would have the lock's JSON written into the victim.
`OUT/data/<config> -> /other/zoo/data/<config>` would have `pack` move shards into another dataset
and delete its files. So every mkdir, write, rename and delete inside such a folder goes through
here. Each works relative to the folder's root.

`check(root, path)` runs an `lstat` of every existing component of `path` below `root`. A symbolic
link is refused with `LinkRefused`, an `InputError`: one line naming the link. So is a file where a
folder must be. The root itself may be a link: that is the user's choice.

`makedirs`, `replace`, `unlink`, `rmtree` and `write_new` are the operations, each run after
`check`. `rmtree` removes a real folder with the standard library's file-descriptor walk. That walk
never descends through a link; it removes the link itself. A link given to `rmtree` is refused.

`open_lock(root, path)` creates a lock file exclusively without following a link
(`O_CREAT | O_EXCL | O_NOFOLLOW`). An existing one is opened `O_NOFOLLOW | O_NONBLOCK`. It must be a
regular file with one link before anything is written into it. So there is no FIFO to block on, and
no hard link to a victim.

`confine(root, relative, what, follow=...)` is the one rule for a relative path read from a file,
such as a manifest's shard path. Writers (`follow=False`) refuse every link below the root. Readers
(`follow=True`) accept a link only when it resolves inside the root. They must, since a Hub
snapshot's files are links into its cache.

`hold(root)` and `release(root)` are called by `zoo.storage.lock.FolderLock`. While a folder's lock
is held, writes below it are checked against it (`root_for`). That covers every atomic write
(`zoo.storage.atomic`) and `check_writable`. So a writer that only knows a path is held to the rule
too: a leaderboard's entry, `machines.json`, a staged checkpoint.

The checks are `lstat` walks, not `openat` chains. They stop what arrives planted in a folder. They
do not stop a process racing the writer with the same user's rights, which could write the victim
itself.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import threading
from pathlib import Path
from typing import Iterator

from zoo.validation.inputs import InputError, name_problem

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
# `rmtree` relies on the standard library's descriptor walk, which removes a link inside the tree
# instead of descending through it (Linux and the BSDs)
assert shutil.rmtree.avoids_symlink_attacks or os.name != "posix"


class LinkRefused(InputError):
    """A symbolic link (or a hard-linked or special lock file) where nfnzoo was to write."""


def link_message(path: str | Path) -> str:
    return f"{path} is a symbolic link; nfnzoo never writes through links: remove it"


def _parts(root: Path, path: Path) -> list[str]:
    """The components of `path` below `root`, lexically (`..` resolved on the text, links not)."""
    relative = os.path.relpath(os.path.abspath(path), os.path.abspath(root))
    if relative == ".":
        return []
    if relative == ".." or relative.startswith(".." + os.sep):
        raise ValueError(f"{path} is not inside {root}")  # a programming error: callers build paths from root
    return relative.split(os.sep)


def check(root: str | Path, path: str | Path) -> Path:
    """`path`, once no existing component of it below `root` is a link.

    Every component but the last must be a folder. A missing component ends the walk, since nothing
    below it exists yet."""
    root, path = Path(root), Path(path)
    current = root
    parts = _parts(root, path)
    for index, part in enumerate(parts):
        current = current / part
        try:
            mode = os.lstat(current).st_mode
        except (FileNotFoundError, NotADirectoryError):
            break
        if stat.S_ISLNK(mode):
            raise LinkRefused(link_message(current))
        if index < len(parts) - 1 and not stat.S_ISDIR(mode):
            raise InputError(f"{current} is a file, not a folder (on the way to {path})")
    return path


def check_entries(root: str | Path, folder: str | Path) -> Path:
    """`check(root, folder)`, and no entry directly inside `folder` is a link.

    It guards a folder whose files a writer may replace or delete, such as `data/<config>/`."""
    folder = check(root, folder)
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_symlink():
                    raise LinkRefused(link_message(folder / entry.name))
    except (FileNotFoundError, NotADirectoryError):
        pass
    return folder


def makedirs(root: str | Path, path: str | Path) -> Path:
    """Creates `path` and its missing parents below `root`, never through a link.

    The root is made as `mkdir -p` would make it. An existing folder is fine."""
    root, path = Path(root), Path(path)
    root.mkdir(parents=True, exist_ok=True)
    current = root
    for part in _parts(root, path):
        current = current / part
        try:
            os.mkdir(current)
        except FileExistsError:
            mode = os.lstat(current).st_mode
            if stat.S_ISLNK(mode):
                raise LinkRefused(link_message(current)) from None
            if not stat.S_ISDIR(mode):
                raise InputError(f"{current} is a file, not a folder (on the way to {path})") from None
    return path


def replace(root: str | Path, source: str | Path, target: str | Path) -> Path:
    """`os.replace(source, target)`, both below `root` and neither through a link."""
    check(root, source)
    check(root, target)
    os.replace(source, target)
    return Path(target)


def unlink(root: str | Path, path: str | Path) -> None:
    """Removes file `path` below `root` (absent is fine).

    A link on the way, or a file that is itself a link, is refused."""
    check(root, path)
    Path(path).unlink(missing_ok=True)


def rmtree(root: str | Path, path: str | Path, *, ignore_errors: bool = False) -> None:
    """Removes folder `path` below `root` and everything in it (absent is fine), never through a link.

    A link on the way or at `path` is refused; `ignore_errors` leaves it alone instead. Links inside
    are removed, not followed."""
    try:
        check(root, path)
    except InputError:
        if ignore_errors:  # best effort (a cleanup after a failure): a link is left alone, never followed
            return
        raise
    if os.path.lexists(path):
        shutil.rmtree(path, ignore_errors=ignore_errors)


def write_new(root: str | Path, path: str | Path, data: bytes) -> Path:
    """Writes `data` to a new file `path` below `root` (created exclusively: never an existing file or link)."""
    check(root, path)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(descriptor, view):]
    finally:
        os.close(descriptor)
    return Path(path)


def open_lock(root: str | Path, path: str | Path) -> int:
    """A read-write descriptor of lock file `path` below `root` (see the module).

    The file is created exclusively, or is an existing regular file with a single link. Anything else
    is refused before a byte is written."""
    check(root, path)
    for _ in range(100):  # another process may create or remove it between our two opens
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o644)
        except FileExistsError:
            pass
        try:
            descriptor = os.open(path, os.O_RDWR | _NOFOLLOW | os.O_NONBLOCK | _CLOEXEC)
        except FileNotFoundError:
            continue
        except OSError:
            if os.path.islink(path):  # ELOOP: O_NOFOLLOW met a link
                raise LinkRefused(link_message(path)) from None
            raise
        try:
            status = os.fstat(descriptor)
            if not stat.S_ISREG(status.st_mode):
                raise LinkRefused(f"{path} is not a regular file (a pipe, socket or device); nfnzoo writes its "
                                  "lock only into a plain file: remove it")
            if status.st_nlink != 1:
                raise LinkRefused(f"{path} has {status.st_nlink} hard links; nfnzoo never writes through links: "
                                  "remove it")
            os.set_blocking(descriptor, True)
        except BaseException:
            os.close(descriptor)
            raise
        return descriptor
    raise OSError(f"{path}: created and removed by another process over and over; try again")


def confine(root: str | Path, relative: object, what: str, *, follow: bool) -> Path:
    """`root / relative` for a relative POSIX path of safe names (`zoo.validation.inputs.NAME`) inside `root`.

    With `follow` (readers), links are resolved and must stay inside `root`. Without it (writers), no
    existing component below `root` may be a link. Anything else is an `InputError` naming `what`."""
    if not isinstance(relative, str) or not relative or relative.startswith("/") or "\\" in relative:
        raise InputError(f"{what}: {ascii(relative)[:80]} is not a relative path inside {root}")
    for part in relative.split("/"):
        problem = name_problem(part)
        if problem is not None:
            raise InputError(f"{what}: path {ascii(relative)[:80]}: {problem}")
    root = Path(root)
    path = root / relative
    if not follow:
        return check(root, path)
    real_root = os.path.realpath(root)
    if os.path.commonpath([real_root, os.path.realpath(path)]) != real_root:
        raise InputError(f"{what}: {relative} leads outside {root} (through a symbolic link)")
    return path


# --- roots held by a lock -------------------------------------------------------------------------

_held: dict[str, tuple[Path, int]] = {}  # absolute root -> (the root as named, how many hold it)
_held_guard = threading.Lock()


def hold(root: str | Path) -> None:
    """From now on, writes below `root` by path alone are checked against it (`root_for`).

    `release` undoes it."""
    key = os.path.abspath(root)
    with _held_guard:
        named, count = _held.get(key, (Path(root), 0))
        _held[key] = (named, count + 1)


def release(root: str | Path) -> None:
    key = os.path.abspath(root)
    with _held_guard:
        named, count = _held.get(key, (Path(root), 0))
        if count > 1:
            _held[key] = (named, count - 1)
        else:
            _held.pop(key, None)


@contextlib.contextmanager
def holding(root: str | Path) -> Iterator[None]:
    """`hold` for the duration of a block."""
    hold(root)
    try:
        yield
    finally:
        release(root)


def root_for(path: str | Path, root: str | Path | None = None) -> Path | None:
    """The outermost of `root` and the held roots (`hold`) that `path` lies below (or is), or None."""
    target = os.path.abspath(path)
    with _held_guard:
        candidates = {key: named for key, (named, _) in _held.items()}
    if root is not None:
        candidates.setdefault(os.path.abspath(root), Path(root))
    inside = [key for key in candidates if target == key or target.startswith(key.rstrip(os.sep) + os.sep)]
    return candidates[min(inside, key=len)] if inside else None
