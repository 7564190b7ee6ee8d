"""Auditing a board: every accepted entry file checked again, whole, as CI does for the official board.

`audit(root)` re-reads each entry file under `<root>/entries`. Per entry, it reports what no longer holds.

(1) The file itself. It parses within its size bound and matches the schema. Its seal recomputes
(`leaderboards.seal`: the sha256 of the whole entry as accepted). So a hand edit of the submission block is
caught, as a hand edit of the results is. That block holds the code URL, the re-scoring record and the
acceptance time.

(2) Its structure. The id is the file's stem and `<model>-<content hash[:32]>`. The file sits at
`entries.entry_path(...)`. `verified` holds exactly when predictions are stored. The re-scoring record is
the task's: `re-scored: <RESCORING>`, or an `unverified: ...` reason on an unverified entry. `accepted` is
an ISO 8601 time, and the results' content hash recomputes.

(3) For a verified entry, its stored predictions' sha256 and the dataset's pinned test metadata and its
sha256. Also the re-scoring itself (`leaderboards.rescore`) of every seed's metrics.

An entry accepted unverified (no predictions) is listed as such, not as a problem. `require_verified` makes
it one; the official board holds only verified entries. A file that cannot be read or parsed is a problem of
that entry, not an error of the whole audit.

Anything else under `entries/` is a problem of its own, one per path (`stray_audits`). Only real folders
`<task>/<12 hex digits>/` belong there. They hold regular entry files (`*.json`), and beside a verified
entry its predictions (`<id>.predictions.parquet`). An HTML page, a stray Parquet file or an extra folder
fails the audit, as a hand-edited entry does. So do a FIFO and a symbolic link. A link is never followed: a
link to a system file is named, not read.

Nothing is read through a link. An entry's stored predictions and the board's pinned files
(`leaderboards.pinned.load_pinned`) are opened as regular files only (`open_regular(follow=False)`). A link
among them is a problem naming it. If `entries/` itself is a link, it is a stray, and no entry is read
through it. If `datasets.json` is a link, or not a regular file, the audit stops with one line naming it.
"""

from __future__ import annotations

import dataclasses
import datetime
import hashlib
import os
import re
from pathlib import Path

from benchmarks.tasks import get_task_class
from leaderboards.datasets import DATASETS_FILE, load_datasets
from leaderboards.entries import (ENTRIES_DIR, PREDICTIONS_SUFFIX, Entry, content_hash, entry_files, entry_path,
                                  read_entry, stored_predictions_path)
from leaderboards.pinned import load_pinned, split_set_of
from leaderboards.rescore import MAX_PREDICTIONS_BYTES, read_stored_predictions, rescore
from leaderboards.seal import seal_problem
from zoo.validation.inputs import InputError, open_regular, read_capped
from zoo.registry import UnknownNameError
from zoo.validation.schema import SchemaError


HASH12 = re.compile(r"[0-9a-f]{12}")  # an entries/<task>/ folder: the dataset hash's first 12 hex digits


@dataclasses.dataclass(frozen=True)
class EntryAudit:
    path: Path
    verified: bool
    problems: tuple[str, ...]
    stray: bool = False  # not an entry: a path under entries/ that does not belong there


def structure_problems(root: Path, path: Path, data: dict, entry: Entry) -> list[str]:
    """What the entry file's submission block claims that its place and results contradict."""
    info, results = entry.submission, entry.results
    problems = []
    problem = seal_problem(data)
    if problem is not None:
        problems.append(problem)
    if content_hash(data["results"]) != info.content_hash:
        problems.append("the results differ from those accepted (their content hash changed)")
    expected = entry_path(root, results, info.content_hash)
    if info.id != expected.stem or path.stem != info.id:
        problems.append(f"the id {info.id!r} is not the file's stem {path.stem!r} and <model>-<content hash[:32]> "
                        f"({expected.stem!r})")
    if path.resolve() != expected.resolve():
        problems.append(f"the entry is filed at {path.relative_to(root)}, not at {expected.relative_to(root)}")
    try:
        datetime.datetime.fromisoformat(info.accepted)
    except ValueError:
        problems.append(f"accepted {ascii(info.accepted[:60])} is not an ISO 8601 time")
    try:
        rescoring = get_task_class(results.task).RESCORING
    except UnknownNameError as error:
        return [*problems, str(error)]
    if info.verified and info.rescoring != f"re-scored: {rescoring}":
        problems.append(f"verified, but its re-scoring record {info.rescoring[:80]!r} is not the task's "
                        f"('re-scored: {rescoring[:40]}…')")
    if not info.verified and not info.rescoring.startswith("unverified: "):
        problems.append(f"unverified, but its re-scoring record {info.rescoring[:80]!r} does not say why "
                        "('unverified: …')")
    if info.verified != (info.predictions is not None):
        problems.append("verified must hold exactly when predictions are stored")
    return problems


def audit_entry(root: Path, path: Path, datasets: dict, require_verified: bool = False) -> EntryAudit:
    try:
        data, entry = read_entry(path)
    except (InputError, SchemaError) as error:
        return EntryAudit(path, False, (f"cannot be read as an entry: {error}",))
    problems = structure_problems(root, path, data, entry)
    results = entry.results
    stored = stored_predictions_path(path)
    if not entry.submission.verified and os.path.lexists(stored):
        problems.append(f"{stored.name}: not a sealed entry's file: predictions beside an unverified entry")
    if not entry.submission.verified:
        if require_verified:
            problems.append(f"unverified ({entry.submission.rescoring or 'accepted before re-scoring'})")
        return EntryAudit(path, False, tuple(problems))
    try:
        digest = hashlib.sha256(read_capped(stored, MAX_PREDICTIONS_BYTES, "stored predictions file",
                                            follow=False)).hexdigest()
    except InputError as error:
        return EntryAudit(path, True, (*problems, str(error)))
    if digest != entry.submission.predictions_sha256:
        problems.append(f"{stored.name}: sha256 {digest[:12]}… is not the recorded "
                        f"{entry.submission.predictions_sha256[:12]}… (the predictions were changed)")
    record = datasets.get(results.dataset.dataset_hash)
    if record is None:
        return EntryAudit(path, True, (*problems, f"dataset {results.dataset.dataset_hash[:12]}… is not registered"))
    try:
        metadata = load_pinned(root, record, split_set_of(results.task_config))
        predictions = read_stored_predictions(stored)
    except (ValueError, OSError) as error:
        return EntryAudit(path, True, (*problems, str(error)))
    problems += rescore(results, predictions, metadata)
    return EntryAudit(path, True, tuple(problems))


def _stray(path: Path, why: str) -> EntryAudit:
    return EntryAudit(path, False, (f"not a sealed entry: {why}; only entries/<task>/<dataset hash[:12]>/ folders "
                                    "holding entry files and their predictions belong here",), stray=True)


def _kind(entry: os.DirEntry) -> str | None:
    """What is wrong with `entry` being here, by its type alone, never following a link. None for a regular
    file."""
    if entry.is_symlink():
        return f"a symbolic link (to {os.readlink(entry.path)[:200]})"
    if entry.is_dir(follow_symlinks=False):
        return "a folder"
    if not entry.is_file(follow_symlinks=False):
        return "not a regular file (a pipe, socket or device)"
    return None


def stray_audits(root: str | Path) -> list[EntryAudit]:
    """A problem for every path under `<root>/entries` that is not an entry's file (see the module docstring)."""
    folder = Path(root) / ENTRIES_DIR
    if folder.is_symlink():
        return [_stray(folder, f"a symbolic link (to {os.readlink(folder)[:200]})")]
    if not folder.is_dir():
        return []
    strays = []
    for task in sorted(os.scandir(folder), key=lambda e: e.name):
        if task.is_symlink() or not task.is_dir(follow_symlinks=False):
            strays.append(_stray(Path(task.path), _kind(task) or "a file, not a task's folder"))
            continue
        for dataset in sorted(os.scandir(task.path), key=lambda e: e.name):
            if dataset.is_symlink() or not dataset.is_dir(follow_symlinks=False):
                strays.append(_stray(Path(dataset.path), _kind(dataset) or "a file, not a dataset's folder"))
                continue
            if not HASH12.fullmatch(dataset.name):
                strays.append(_stray(Path(dataset.path), "a folder not named by a dataset hash's 12 hex digits"))
                continue
            for child in sorted(os.scandir(dataset.path), key=lambda e: e.name):
                path, kind = Path(child.path), _kind(child)
                if kind is not None:
                    strays.append(_stray(path, kind))
                elif child.name.endswith(PREDICTIONS_SUFFIX):
                    entry = path.with_name(child.name[: -len(PREDICTIONS_SUFFIX)] + ".json")
                    if not entry.is_file() or entry.is_symlink():
                        strays.append(_stray(path, f"predictions of no entry (no {entry.name} beside it)"))
                elif not child.name.endswith(".json"):
                    strays.append(_stray(path, "neither an entry file (<model>-<id>.json) nor an entry's predictions"))
    return strays


def audit(root: str | Path, *, require_verified: bool = False) -> list[EntryAudit]:
    """Every entry of the board, audited, and every stray path under its `entries/` as a problem of its own.
    Sorted by path (see the module docstring)."""
    root = Path(root)
    if os.path.lexists(root / DATASETS_FILE):  # a board's file: never read through a link
        open_regular(root / DATASETS_FILE, "datasets file", follow=False).close()
    datasets = load_datasets(root)
    listed = [] if os.path.islink(root / ENTRIES_DIR) else entry_files(root)  # the link is a stray, never listed
    audits = [audit_entry(root, path, datasets, require_verified) for path in listed]
    return sorted(audits + stray_audits(root), key=lambda audited: str(audited.path))
