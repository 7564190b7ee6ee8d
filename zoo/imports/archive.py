"""A published zoo as it is downloaded: an archive is unpacked into a scratch folder, checked, and imported.

The Small Transformer Zoo, the DWSNets INRs and the Model Zoos come as a `.zip`. The Small CNN Zoo comes
as a `.tar`/`.tar.gz`/`.tar.xz`. The archive is unpacked member by member into a scratch folder beside
the output, and imported from there. A folder is imported as it is.

Nothing in an archive is trusted. Before anything is written, every member is checked. A path
that is absolute or climbs out (`../`) is refused, and so is a link, a device or another special
file. So are a name that occurs twice, an encrypted member and a compression method Python cannot
unpack. So are more than `MAX_MEMBERS` members.

Also refused are more unpacked bytes than the smallest of three bounds (`zoo.validation.bounds`). The
first is `MAX_UNPACKED_BYTES`. The second is `MAX_ARCHIVE_RATIO` times the archive's own size: a zip
bomb inflates ~1,000x, weights ~1.1x. The third is the free disk, less `FREE_DISK_MARGIN_BYTES` and the
shards the import then writes (about as large again).

A tar's members are found by decompressing it. So that scan is itself counted
(`zoo.validation.decompress`) and stops at the bound.

Then we copy each member out ourselves, never with `extractall`. Its bytes are counted as they are
written, and a member that holds more than it declared is refused. Each refusal, and each library error
(a damaged stream, a CRC error), is one line naming the archive and the member
(`zoo.imports.reading.reading`).

The scratch folder is removed whatever happens. So a refused or interrupted import leaves the output
folder as it was. An archive whose members all sit in one top folder (`mnist_transformer/...`) is
imported from that folder.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tarfile
import tempfile
import zipfile
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Iterator

from zoo.imports.reading import reading
from zoo.validation.inputs import open_regular
from zoo.validation.bounds import (ARCHIVE_RATIO_SLACK_BYTES, FREE_DISK_MARGIN_BYTES, MAX_ARCHIVE_RATIO, MAX_MEMBERS,
                                   MAX_UNPACKED_BYTES)
from zoo.validation.decompress import BoundedReader, compression_of, decompressing
from zoo.validation.inputs import InputError

TAR_SUFFIXES = (".tar", ".tar.gz", ".tgz", ".tar.xz", ".txz", ".tar.bz2")
IGNORED_TOP = {"__MACOSX"}  # what macOS's archiver adds beside the real top folder
ZIP_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate", zipfile.ZIP_BZIP2: "bzip2",
               zipfile.ZIP_LZMA: "lzma"}  # what Python's zipfile unpacks
CHUNK = 2**20


def is_archive(path: Path) -> bool:
    return path.is_file() and (path.suffix == ".zip" or path.name.endswith(TAR_SUFFIXES))


def _member_problem(name: str) -> str | None:
    """Why a member's path may not be written under the scratch folder, or None."""
    path = PurePosixPath(name.replace("\\", "/"))
    if path.is_absolute() or (path.parts and path.parts[0].endswith(":")):
        return "an absolute path"
    if ".." in path.parts:
        return "a path that leaves the folder it is unpacked into"
    if "\x00" in name:
        return "a name holding a NUL character"
    return None


def _refuse(archive: Path, name: str, problem: str) -> InputError:
    return InputError(f"{archive}: member {ascii(name)[:200]} is {problem}; nothing was unpacked")


class Limit:
    """The most bytes an archive may unpack to, and which bound says so (module docstring)."""

    def __init__(self, archive: Path, compressed: int, scratch: Path):
        free = shutil.disk_usage(scratch).free
        room = (free - FREE_DISK_MARGIN_BYTES) // 2  # the members, then the shards written from them
        bounds = [(MAX_UNPACKED_BYTES, f"at most {MAX_UNPACKED_BYTES / 2**30:.0f} GiB are unpacked "
                                       "(zoo.validation.bounds.MAX_UNPACKED_BYTES)"),
                  (MAX_ARCHIVE_RATIO * compressed + ARCHIVE_RATIO_SLACK_BYTES,
                   f"at most {MAX_ARCHIVE_RATIO}x the archive's {compressed:,} bytes (a compression bomb?)"),
                  (max(0, room), f"{scratch} has {free:,} bytes free, and the import needs the unpacked members, "
                                 f"the shards written from them (as much again) and {FREE_DISK_MARGIN_BYTES:,} "
                                 "bytes to spare")]
        self.archive = archive
        self.stream = min(bounds[0][0], bounds[1][0])  # what a scan may decompress (nothing is written)
        self.bytes, self.reason = min(bounds, key=lambda bound: bound[0])

    def check(self, total: int, name: str) -> None:
        if total > self.bytes:
            raise InputError(f"{self.archive}: unpacks to more than {self.bytes:,} bytes (at member "
                             f"{ascii(name)[:120]}): {self.reason}; nothing was unpacked")


def _check_zip(archive: Path, handle: zipfile.ZipFile, limit: Limit) -> list[zipfile.ZipInfo]:
    members = handle.infolist()
    if len(members) > MAX_MEMBERS:
        raise InputError(f"{archive}: {len(members):,} members; at most {MAX_MEMBERS:,}")
    total, names = 0, set()
    for member in members:
        problem = _member_problem(member.filename)
        kind = stat.S_IFMT(member.external_attr >> 16)
        if problem is None and kind not in (0, stat.S_IFREG, stat.S_IFDIR):
            problem = "a link or special file, not a regular file or folder"
        if problem is None and member.flag_bits & 0x1:
            problem = "encrypted (a password is needed); the releases are not"
        if problem is None and member.compress_type not in ZIP_METHODS:
            problem = (f"compressed with method {member.compress_type}, which cannot be unpacked here (expected "
                       f"one of {sorted(ZIP_METHODS.values())})")
        key = member.filename.rstrip("/")
        if problem is None and key in names:
            problem = "in the archive twice"
        if problem is not None:
            raise _refuse(archive, member.filename, problem)
        names.add(key)
        total += member.file_size
        limit.check(total, member.filename)
    return members


def _copy(source: BinaryIO, target: Path, declared: int, archive: Path, name: str) -> int:
    """Copies one member's bytes to a new file `target`, counting them: more than `declared` is refused."""
    target.parent.mkdir(parents=True, exist_ok=True)
    written = 0
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o644)
    with os.fdopen(descriptor, "wb") as out:
        while chunk := source.read(min(CHUNK, declared - written + 1)):
            written += len(chunk)
            if written > declared:
                raise InputError(f"{archive}: member {ascii(name)[:200]} holds more than the {declared:,} bytes it "
                                 "declares")
            out.write(chunk)
    return written


def _declared_members(archive: Path, raw: BinaryIO) -> None:
    """The member count the end of the central directory declares, checked before zipfile lists them all."""
    with reading(archive, expected="a readable archive"):
        end = zipfile._EndRecData(raw)  # private, but the record zipfile itself reads first
    if end is not None and end[zipfile._ECD_ENTRIES_TOTAL] > MAX_MEMBERS:
        raise InputError(f"{archive}: declares {end[zipfile._ECD_ENTRIES_TOTAL]:,} members; at most {MAX_MEMBERS:,}")


def _unpack_zip(archive: Path, raw: BinaryIO, scratch: Path, limit: Limit) -> None:
    _declared_members(archive, raw)
    with reading(archive, expected="a readable archive"):
        handle = zipfile.ZipFile(raw)
    with handle:
        members = _check_zip(archive, handle, limit)
        for member in members:
            target = scratch / member.filename
            if member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            with reading(archive, f"member {ascii(member.filename)[:200]}", "a readable zip member"):
                with handle.open(member) as source:
                    _copy(source, target, member.file_size, archive, member.filename)


def _tar_stream(archive: Path, limit: Limit) -> tarfile.TarFile:
    """The archive opened as a sequential tar stream, its decompressed bytes counted (`Limit.stream`)."""
    raw = open_regular(archive, "archive", follow=True)
    counted = BoundedReader(decompressing(raw, compression_of(archive.name)), limit.stream, str(archive),
                            "bytes once decompressed (zoo.validation.bounds: MAX_UNPACKED_BYTES, MAX_ARCHIVE_RATIO)")
    return tarfile.open(fileobj=counted, mode="r|")


def _tar_member(archive: Path, member: tarfile.TarInfo) -> None:
    problem = _member_problem(member.name)
    if problem is None and not (member.isfile() or member.isdir()):
        problem = "a link or special file, not a regular file or folder"
    if problem is None and member.issparse():
        problem = "a sparse file"
    if problem is not None:
        raise _refuse(archive, member.name, problem)


def _unpack_tar(archive: Path, scratch: Path, limit: Limit) -> None:
    with reading(archive, expected="a readable archive"):
        with _tar_stream(archive, limit) as handle:  # first pass: check every member, nothing written
            total, count, names = 0, 0, set()
            for member in handle:
                count += 1
                if count > MAX_MEMBERS:
                    raise InputError(f"{archive}: more than {MAX_MEMBERS:,} members")
                _tar_member(archive, member)
                key = member.name.rstrip("/")
                if key in names and not member.isdir():
                    raise _refuse(archive, member.name, "in the archive twice")
                names.add(key)
                total += member.size
                limit.check(total, member.name)
        with _tar_stream(archive, limit) as handle:  # second pass: copy, counting what is written
            total = 0
            for member in handle:
                _tar_member(archive, member)
                total += member.size
                limit.check(total, member.name)
                target = scratch / member.name
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                with reading(archive, f"member {ascii(member.name)[:200]}", "a readable tar member"):
                    source = handle.extractfile(member)
                    _copy(source, target, member.size, archive, member.name)


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
        with open_regular(source, "archive", follow=True) as raw:
            limit = Limit(source, os.fstat(raw.fileno()).st_size, scratch)
            if source.suffix == ".zip":
                _unpack_zip(source, raw, scratch, limit)
        if source.suffix != ".zip":
            _unpack_tar(source, scratch, limit)
        yield _top(scratch)


def import_from(importer, source: str | Path, out: str | Path, **options) -> dict:
    """`importer(folder, out, **options)` on `source` unpacked (`unpacked`).

    An error naming a file in the scratch folder names it inside the archive instead
    (`archive.zip/member`). A `ValueError` the writer raises about the rows (a model twice, no rows)
    becomes an `InputError` naming the source.
    """
    with unpacked(source, out) as folder:
        try:
            return importer(folder, out, **options)
        except OSError as error:
            if error.strerror is not None or error.filename is not None:
                raise  # the operating system's own: the CLI names its file and reason
            # an OSError made from a message alone (`FileNotFoundError("...")`) or from nothing: its text, or
            # what it is, naming the source, never a bare class name
            raise InputError(_named(error, source, folder, out)) from None
        except ValueError as error:
            raise InputError(_named(error, source, folder, out)) from None


def _named(error: Exception, source: str | Path, folder: str | Path, out: str | Path) -> str:
    """The first line of `error`, with the scratch folder named as the archive.

    It names `source` unless it names it already. An error with no message is shown as its kind, named
    by `source`, never as a bare class name.
    """
    message = str(error)
    if Path(folder) != Path(source):
        scratch = (Path(folder) if Path(folder).name.startswith(f".{Path(out).name}.unpack-")
                   else Path(folder).parent)
        message = message.replace(str(scratch), str(source))
    if not message.strip():
        return f"{source}: the import failed with {type(error).__name__} and no message"
    if str(source) not in message and not isinstance(error, InputError):
        message = f"{source}: {message}"  # an InputError names its file
    return message.splitlines()[0]
