"""A published zoo as it is downloaded: a `.zip` (the Small Transformer Zoo, the DWSNets INRs, the Model
Zoos) or a `.tar`/`.tar.gz`/`.tar.xz` (the Small CNN Zoo) is unpacked, checked member by member, into a
scratch folder beside the output and imported from there; a folder is imported as it is.

Nothing in an archive is trusted: a member whose path is absolute or climbs out (`../`), a link, a
device or another special file, more than `MAX_MEMBERS` members, or more bytes unpacked than the disk
holds is refused before anything is written, in one line naming the archive and the member. Tar members
go through Python's `data` extraction filter as well. The scratch folder is removed whatever happens, so
a refused or interrupted import leaves the output folder as it was. An archive whose members all sit in
one top folder (`mnist_transformer/...`) is imported from that folder.
"""

from __future__ import annotations

import contextlib
import shutil
import stat
import tarfile
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import Iterator

from zoo.validation.inputs import InputError

MAX_MEMBERS = 2_000_000  # the largest release (70,000 SIRENs, 270,000-row matrices) has far fewer files
TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2")
IGNORED_TOP = {"__MACOSX"}  # what macOS's archiver adds beside the real top folder


def is_archive(path: Path) -> bool:
    return path.is_file() and (path.suffix == ".zip" or path.name.endswith(TAR_SUFFIXES))


def _member_problem(name: str) -> str | None:
    """Why a member's path may not be written under the scratch folder, or None."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or (path.parts and path.parts[0].endswith(":")):
        return "an absolute path"
    if ".." in path.parts:
        return "a path that leaves the folder it is unpacked into"
    return None


def _check_zip(archive: Path, handle: zipfile.ZipFile) -> int:
    members = handle.infolist()
    if len(members) > MAX_MEMBERS:
        raise InputError(f"{archive}: {len(members):,} members; at most {MAX_MEMBERS:,}")
    for member in members:
        problem = _member_problem(member.filename)
        kind = stat.S_IFMT(member.external_attr >> 16)
        if problem is None and kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            problem = "a link or special file, not a regular file or folder"
        if problem is not None:
            raise InputError(f"{archive}: member {ascii(member.filename)[:200]} is {problem}; nothing was unpacked")
    return sum(member.file_size for member in members)


def _check_tar(archive: Path, handle: tarfile.TarFile) -> int:
    total, count = 0, 0
    for member in handle:
        count += 1
        if count > MAX_MEMBERS:
            raise InputError(f"{archive}: more than {MAX_MEMBERS:,} members")
        problem = _member_problem(member.name)
        if problem is None and not (member.isfile() or member.isdir()):
            problem = "a link or special file, not a regular file or folder"
        if problem is not None:
            raise InputError(f"{archive}: member {ascii(member.name)[:200]} is {problem}; nothing was unpacked")
        total += member.size
    return total


def _check_room(archive: Path, total: int, scratch: Path) -> None:
    free = shutil.disk_usage(scratch).free
    if total > free:
        raise InputError(f"{archive}: unpacks to {total / 2**30:.2f} GiB; {scratch} has {free / 2**30:.2f} GiB free")


def _top(folder: Path) -> Path:
    entries = [p for p in folder.iterdir() if p.name not in IGNORED_TOP]
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else folder


@contextlib.contextmanager
def unpacked(source: str | Path, out: str | Path) -> Iterator[Path]:
    """The folder to import from: `source` itself, or the archive `source` unpacked beside `out`."""
    source, out = Path(source), Path(out)
    if not is_archive(source):
        yield source
        return
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}.unpack-") as scratch:
        scratch = Path(scratch)
        try:
            if source.suffix == ".zip":
                with zipfile.ZipFile(source) as handle:
                    _check_room(source, _check_zip(source, handle), scratch)
                    handle.extractall(scratch)
            else:
                with tarfile.open(source) as handle:
                    _check_room(source, _check_tar(source, handle), scratch)
                    handle.extractall(scratch, filter="data")
        except (zipfile.BadZipFile, tarfile.TarError, EOFError) as error:
            raise InputError(f"{source}: not a readable archive ({error})") from None
        yield _top(scratch)


def import_from(importer, source: str | Path, out: str | Path, **options) -> dict:
    """`importer(folder, out, **options)` on `source` unpacked (`unpacked`); an error that names a file
    inside the scratch folder names it inside the archive instead (`archive.zip/member`)."""
    with unpacked(source, out) as folder:
        try:
            return importer(folder, out, **options)
        except (InputError, ValueError) as error:
            if Path(folder) == Path(source):
                raise
            scratch = Path(folder) if Path(folder).name.startswith(f".{Path(out).name}.unpack-") else Path(folder).parent
            kind = InputError if isinstance(error, InputError) else ValueError
            raise kind(str(error).replace(str(scratch), str(source))) from None
