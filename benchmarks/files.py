"""Atomic file writes (`zoo.storage.atomic`) and bounded JSON reading with errors that name the file.

A results file, a plot or a leaderboard entry is either complete or absent. It is written to a
temporary file in the target folder, and renamed over the target, with the user's normal file
mode. A results file and its sidecars (predictions, figure arrays) commit together
(`write_with_sidecars`). They are never written through a link in the results folder
(`zoo.storage.nofollow`). Every JSON or .npz read here is bounded (`zoo.validation.inputs`): a
regular file, a capped size, a bounded nesting depth, array shapes checked against the bytes."""

from __future__ import annotations

import hashlib
import io
import os
import re
import zipfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from zoo.storage import nofollow
from zoo.storage.atomic import replacing, write_bytes_atomic, write_json_atomic, write_text_atomic
from zoo.validation.inputs import InputError, load_json_bytes, read_capped

# the most a JSON file we read may hold: a results file is kilobytes, a job record with a seed's
# predictions a few megabytes; past this it is not ours
MAX_JSON_BYTES = 64 * 2**20
MAX_NPZ_BYTES = 1 * 2**30  # a task's figure arrays (INR renders, accuracy matrices) are megabytes
MAX_NPZ_UNPACKED = 4 * 2**30  # and the arrays it unpacks to

__all__ = ["check_targets", "npz_bytes", "read_json",
           "read_npz", "replacing", "save_figure", "write_json_atomic", "write_npz_atomic",
           "write_text_atomic", "write_with_sidecars"]


def save_figure(figure, path: str | Path, dpi: int = 110, *, tight: bool = True) -> Path:
    """Writes a matplotlib figure as a PNG atomically, and closes it.

    It calls `tight_layout` first, unless the figure lays itself out; `tight=False` keeps a
    constrained layout."""
    import matplotlib.pyplot as plt

    if tight:
        figure.tight_layout()
    try:
        with replacing(path) as temporary:
            figure.savefig(temporary, format="png", dpi=dpi)
    finally:
        plt.close(figure)
    return Path(path)


def npz_bytes(arrays: Mapping[str, Any], where: str = "arrays") -> bytes:
    """Plain numeric or string arrays as the bytes of one compressed .npz (object arrays are refused: no pickles)."""
    converted = {name: np.asarray(value) for name, value in arrays.items()}
    odd = [name for name, value in converted.items() if value.dtype == object]
    if odd:
        raise ValueError(f"{where}: the arrays {odd} are object arrays; only plain numbers and strings are saved")
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **converted)
    return buffer.getvalue()


def write_npz_atomic(path: str | Path, arrays: Mapping[str, Any]) -> Path:
    """Plain numeric or string arrays as one .npz (`npz_bytes`), written atomically."""
    return write_bytes_atomic(path, npz_bytes(arrays, str(path)))


def read_npz(path: str | Path, *, limit: int = MAX_NPZ_BYTES) -> dict[str, np.ndarray]:
    """The arrays of an .npz written by `write_npz_atomic`; pickled content is refused.

    It is read with a cap (`zoo.validation.inputs.read_capped`): a regular file, at most `limit`
    bytes. Each member's declared shape is checked against the bytes the archive says it holds, before
    numpy allocates it. So a header declaring a 200000 x 200000 array is an error naming the member,
    not a 320 GB allocation."""
    data = read_capped(path, limit, ".npz file")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            unpacked = sum(member.file_size for member in archive.infolist())
            if unpacked > MAX_NPZ_UNPACKED:
                raise InputError(f"{path}: unpacks to {unpacked:,} bytes; at most {MAX_NPZ_UNPACKED:,}")
            for member in archive.infolist():
                with archive.open(member) as stream:
                    version = np.lib.format.read_magic(stream)
                    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read_header(stream)
                    declared = int(np.prod(shape, dtype=object)) * dtype.itemsize
                if declared > member.file_size:
                    raise InputError(f"{path}: member {ascii(member.filename)[:80]} declares a {shape} {dtype} array "
                                     f"({declared:,} bytes) but holds {member.file_size:,}")
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            return {name: arrays[name] for name in arrays.files}
    except InputError:
        raise
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, TypeError) as error:
        raise InputError(f"{path}: not a plain .npz of arrays ({ascii(str(error))[1:-1][:200]})") from None


def read_json(path: str | Path, *, strict: bool = False, limit: int = MAX_JSON_BYTES) -> Any:
    """Reads a JSON file; a missing, unreadable, oversized or malformed file raises ValueError naming it.

    It reads through `zoo.validation.inputs`. Only a regular file is read; a FIFO or a device is
    refused, not waited on. At most `limit` bytes are actually read, nested at most
    `zoo.validation.inputs.MAX_DEPTH` deep. `strict` also refuses NaN and Infinity, and numbers that
    overflow to infinity (`1e999`). It refuses an object with a repeated key too, as for a submission."""
    path = Path(path)
    if not os.path.lexists(path):
        raise InputError(f"{path}: no such file")
    return load_json_bytes(read_capped(path, limit, "JSON file"), str(path), strict=strict)


def _staged_name(name: str, data: bytes) -> str:
    """`mlp.predictions.csv` -> `mlp.predictions.<16 hex of the bytes' sha256>.csv`."""
    base, dot, suffix = name.rpartition(".")
    digest = hashlib.sha256(data).hexdigest()[:16]
    return f"{base}.{digest}.{suffix}" if dot else f"{name}.{digest}"


def _staged_pattern(name: str) -> re.Pattern:
    base, dot, suffix = name.rpartition(".")
    return re.compile(rf"{re.escape(base)}\.[0-9a-f]{{16}}\.{re.escape(suffix)}" if dot
                      else rf"{re.escape(name)}\.[0-9a-f]{{16}}")


def check_targets(path: str | Path, names: Sequence[str]) -> Path:
    """Refuses any link among the names a results file at `path` and its sidecars `names` would write.

    The refusal is `zoo.storage.nofollow.LinkRefused`, one line naming it. The names are the results
    file and each sidecar's usual name. They include an existing entry with a sidecar's staged name
    (`mlp.predictions.<sha>.csv`). It is called before anything is trained or written. So a refused
    link leaves nothing written."""
    path = Path(path)
    folder = path.parent
    for target in [path, *(path.with_name(name) for name in names)]:
        nofollow.check(folder, target)
    patterns = [_staged_pattern(name) for name in names]
    try:
        with os.scandir(folder) as entries:
            for entry in entries:
                if entry.is_symlink() and any(pattern.fullmatch(entry.name) for pattern in patterns):
                    raise nofollow.LinkRefused(nofollow.link_message(folder / entry.name))
    except (FileNotFoundError, NotADirectoryError):
        pass
    return path


def write_with_sidecars(path: str | Path, document: Mapping[str, Any], sidecars: Mapping[str, tuple[str, bytes]]
                        ) -> Path:
    """Writes a results JSON and the sidecar files it names as one commit.

    `sidecars` maps a field of `document` to (file name beside `path`, bytes). The document names the
    file in that field. Two renames cannot be one, so it goes in three steps.

    1. The sidecars are written under names made of their content's hash
       (`mlp.predictions.<sha>.csv`), never the current one. Then the document naming those is
       written: the commit point.
    2. The sidecars are written under their usual names. The document naming those replaces it.
    3. The hashed copies are removed, with any a killed run left.

    Killed at any point, the JSON at `path` is one of two. It is the old one with its old sidecars. Or
    it is the new one, with files holding exactly the new sidecars' bytes. It is never a results file
    beside another run's predictions."""
    path = Path(path)
    folder = path.parent  # the results folder: no link in it is written through or removed
    check_targets(path, [name for name, _ in sidecars.values()])  # every target first: a refusal writes nothing
    staged = {field: _staged_name(name, data) for field, (name, data) in sidecars.items()}
    for field, (_, data) in sidecars.items():
        write_bytes_atomic(path.with_name(staged[field]), data, root=folder)
    write_json_atomic(path, {**document, **staged}, root=folder)  # the commit: the new results, naming the new bytes
    for name, data in sidecars.values():
        write_bytes_atomic(path.with_name(name), data, root=folder)
    write_json_atomic(path, {**document, **{field: name for field, (name, _) in sidecars.items()}}, root=folder)
    patterns = [_staged_pattern(name) for name, _ in sidecars.values()]
    for leftover in folder.iterdir():
        if any(pattern.fullmatch(leftover.name) for pattern in patterns):
            nofollow.unlink(folder, leftover)
    return path
