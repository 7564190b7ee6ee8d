"""Renaming a board's entries from the 8-hex-digit ids of older boards to `<model>-<32 hex digits>`.

An older board named an entry `<model>-<content hash[:8]>`. With 32 bits, two different results with one id
(a birthday pair) took seconds to find, and the second overwrote the first. `migrate(root)` gives every
entry whose id is not `entries.entry_id(model, content_hash)` that id. Its file and its stored predictions
are renamed to the new stem. `submission.id` and `submission.predictions` are set to match. The entry is
sealed again (`leaderboards.seal`). The seal covers the id, and the migration is the board's own edit, as
the acceptance was. Nothing else changes: the results, their content hash, the predictions' bytes and
sha256, the acceptance time.

An old entry is untrusted. It arrives with the board, and a seal is an unkeyed sha256 anyone can recompute.
So every entry is checked before anything is written. One that fails refuses the whole board, in one line
naming its file and field. The checks are these. Its seal and content hash hold, so a fresh seal does not
launder a hand-edited entry. Its id is its file's stem. Its predictions, if any, are its own file `<old
id><PREDICTIONS_SUFFIX>`, never another file of the board. They hash to the recorded sha256, read without
following a link. And the renamed entry parses as an entry of this board.

Each new file is created exclusively, predictions before the entry. The old files are removed only once the
new ones exist. A migration interrupted at any point resumes when run again. A new file already there is
kept when it holds exactly what this migration writes (the predictions' recorded sha256, the entry's bytes).
A temporary file of the crashed write is removed, and the old files are removed last. A new file that holds
anything else is refused, never overwritten. It runs under the board's lock: `nfnzoo leaderboard
migrate-ids`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
from pathlib import Path

from leaderboards.entries import (ENTRIES_DIR, MAX_ENTRY_BYTES, PREDICTIONS_SUFFIX, Entry, EntryCollision, content_hash,
                                  entry_bytes, entry_files, entry_id, write_new_entry_file)
from leaderboards.lock import board_lock
from leaderboards.rescore import MAX_PREDICTIONS_BYTES
from leaderboards.seal import seal_problem, sealed
from zoo.storage import nofollow
from zoo.validation.inputs import InputError, read_capped, read_json_file
from zoo.validation.schema import from_data

NOT_MOVED = "not migrated; nothing was moved or written"


@dataclasses.dataclass(frozen=True)
class Renamed:
    old: str  # the old id
    new: str  # the new id
    path: Path  # the new entry file


@dataclasses.dataclass(frozen=True)
class _Move:
    """One entry's migration, checked and planned before anything is written."""
    old_path: Path  # the old entry file
    old_id: str
    new_id: str
    new_bytes: bytes  # the new entry file's bytes
    entry_written: bool  # the new entry file already holds new_bytes (an interrupted migration)
    old_predictions: Path | None  # <old id><PREDICTIONS_SUFFIX>, where the entry stores predictions
    predictions_sha256: str | None  # their recorded sha256
    copy_predictions: bool  # the new predictions file is still to be written (from the old one)

    @property
    def new_path(self) -> Path:
        return self.old_path.with_name(f"{self.new_id}.json")

    @property
    def new_predictions(self) -> Path | None:
        if self.old_predictions is None:
            return None
        return self.old_path.with_name(f"{self.new_id}{PREDICTIONS_SUFFIX}")


def _old_entry(path: Path) -> dict:
    """An entry file of an older board (its id of any length), checked: sealed and unchanged since accepted."""
    data = read_json_file(path, MAX_ENTRY_BYTES, strict=True, what="leaderboard entry")
    if not (isinstance(data, dict) and all(isinstance(data.get(key), dict) for key in ("submission", "results"))):
        raise InputError(f"{path}: expected an entry ({{\"submission\": {{...}}, \"results\": {{...}}}}); {NOT_MOVED}")
    problem = seal_problem(data)
    if problem is None and content_hash(data["results"]) != data["submission"].get("content_hash"):
        problem = "the results differ from those accepted (their content hash changed)"
    if problem is not None:
        raise InputError(f"{path}: {problem}; not migrated (a hand-edited entry is not sealed again)")
    return data


def _predictions_to_copy(entry: Path, old: Path, new: Path, recorded: object) -> bool:
    """Whether the entry's predictions are still to be copied from `old` to `new`. An interrupted migration
    may have copied them. The file that holds them, never read through a link, must hash to `recorded`."""
    copy = not os.path.lexists(new)
    source = old if copy else new
    try:
        stored = read_capped(source, MAX_PREDICTIONS_BYTES, "stored predictions file", follow=False)
    except InputError as error:
        raise InputError(f"{entry}: submission.predictions: {error}; {NOT_MOVED}") from None
    digest = hashlib.sha256(stored).hexdigest()
    if digest != recorded:
        raise InputError(f"{entry}: submission.predictions_sha256: {source.name} hashes to {digest[:12]}…, not the "
                         f"recorded {str(recorded)[:12]}…; {NOT_MOVED}")
    return copy


def _plan(path: Path) -> _Move | None:
    """The migration of entry file `path` (None when its id is the new one already), every check done."""
    data = _old_entry(path)
    submission = data["submission"]
    old_id = submission.get("id")
    if old_id != path.stem:  # else `<old id><PREDICTIONS_SUFFIX>` could be another entry's
        raise InputError(f"{path}: submission.id {ascii(old_id)[:80]} is not the file's stem {path.stem!r}; "
                         f"{NOT_MOVED}")
    new_id = entry_id(data["results"].get("model"), submission["content_hash"])
    if old_id == new_id:
        return None
    moved = dict(submission, id=new_id)
    old_predictions, recorded, copy_predictions = None, None, False
    if submission.get("predictions") is not None:
        own = f"{old_id}{PREDICTIONS_SUFFIX}"
        if submission["predictions"] != own:
            raise InputError(f"{path}: submission.predictions {ascii(submission['predictions'])[:80]} is not the "
                             f"entry's own predictions file {own!r} (<submission.id>{PREDICTIONS_SUFFIX}); {NOT_MOVED}")
        old_predictions, recorded = path.with_name(own), submission.get("predictions_sha256")
        moved["predictions"] = f"{new_id}{PREDICTIONS_SUFFIX}"
    new_data = sealed({**data, "submission": moved})
    from_data(Entry, new_data, where=str(path))  # an entry of this board once renamed (a SchemaError naming the key)
    new_path = path.with_name(f"{new_id}.json")
    if old_predictions is not None:
        copy_predictions = _predictions_to_copy(path, old_predictions, path.with_name(moved["predictions"]), recorded)
    new_bytes = entry_bytes(new_data)
    entry_written = os.path.lexists(new_path)
    if entry_written and _read_entry_bytes(new_path, path) != new_bytes:
        raise EntryCollision(f"{new_path} already exists and is not the migration of {path.name}; the board never "
                             f"overwrites an entry (two entries with one id are an error); {NOT_MOVED}")
    return _Move(path, old_id, new_id, new_bytes, entry_written, old_predictions, recorded, copy_predictions)


def _read_entry_bytes(path: Path, entry: Path) -> bytes:
    try:
        return read_capped(path, MAX_ENTRY_BYTES, "leaderboard entry", follow=False)
    except InputError as error:
        raise InputError(f"{entry}: its renamed file: {error}; {NOT_MOVED}") from None


def _temporaries(path: Path) -> list[Path]:
    """Temporary files a crashed `write_new_entry_file` of `path` left beside it (`.<name>.<pid>.new`)."""
    pattern = re.compile(rf"\.{re.escape(path.name)}\.[0-9]+\.new")
    with os.scandir(path.parent) as children:
        return sorted(path.parent / child.name for child in children if pattern.fullmatch(child.name))


def _apply(root: Path, move: _Move) -> Renamed:
    """Writes what `move` plans (resuming where an interrupted run stopped), then removes the old files."""
    for path in (move.new_predictions, move.new_path):
        for temporary in _temporaries(path) if path is not None else []:
            nofollow.unlink(root, temporary)
    if move.copy_predictions:
        stored = read_capped(move.old_predictions, MAX_PREDICTIONS_BYTES, "stored predictions file", follow=False)
        if hashlib.sha256(stored).hexdigest() != move.predictions_sha256:  # changed since it was checked
            raise InputError(f"{move.old_predictions}: changed during the migration; run it again")
        write_new_entry_file(root, move.new_predictions, stored, move.new_id)
    if not move.entry_written:
        write_new_entry_file(root, move.new_path, move.new_bytes, move.new_id)
    if move.old_predictions is not None:
        nofollow.unlink(root, move.old_predictions)
    nofollow.unlink(root, move.old_path)
    return Renamed(move.old_id, move.new_id, move.new_path)


def migrate(root: str | Path) -> list[Renamed]:
    """Renames every entry under `root` whose id is not `<model>-<content hash[:32]>` (module docstring).
    Every entry is checked first, so a refused board is left as it was."""
    root = Path(root)
    with board_lock(root):
        nofollow.check(root, root / ENTRIES_DIR)  # its listing would read through a link
        moves = [move for move in map(_plan, entry_files(root)) if move is not None]
        targets = [move.new_path for move in moves]
        for move in moves:
            if targets.count(move.new_path) > 1:
                raise EntryCollision(f"{move.old_path}: submission.id: {move.new_path.name} would be the new file of "
                                     f"{targets.count(move.new_path)} entries (the same results twice); {NOT_MOVED}")
        return [_apply(root, move) for move in moves]
