"""Renaming a board's entries from the 8-hex-digit ids of older boards to `<model>-<32 hex digits>`.

An older board named an entry `<model>-<content hash[:8]>`: 32 bits, so two different results with
one id (a birthday pair) took seconds to find, and the second overwrote the first. `migrate(root)`
gives every entry whose id is not `entries.entry_id(model, content_hash)` that id: its file (and its
stored predictions) renamed to the new stem, `submission.id` and `submission.predictions` set to
match, and the entry sealed again (`leaderboards.seal`: the seal covers the id, and the migration is
the board's own edit, as the acceptance was). Nothing else changes: the results, their content hash,
the predictions' bytes and sha256, the acceptance time. Each new file is created exclusively; the old
files are removed only once the new ones exist. The entry is checked before and after (its seal, its
content hash): a board whose entries were hand-edited is refused, not laundered by a fresh seal.
Run under the board's lock: `nfnzoo leaderboard migrate-ids`.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from leaderboards.entries import (MAX_ENTRY_BYTES, PREDICTIONS_SUFFIX, content_hash, entry_bytes, entry_files, entry_id,
                                  read_entry, write_new_entry_file)
from leaderboards.lock import board_lock
from leaderboards.rescore import MAX_PREDICTIONS_BYTES
from leaderboards.seal import seal_of, seal_problem, sealed
from zoo.validation.inputs import InputError, read_capped, read_json_file
from zoo.validation.schema import SchemaError


@dataclasses.dataclass(frozen=True)
class Renamed:
    old: str  # the old id
    new: str  # the new id
    path: Path  # the new entry file


def _old_entry(path: Path) -> dict:
    """An entry file of an older board (its id of any length), checked: sealed and unchanged since accepted."""
    data = read_json_file(path, MAX_ENTRY_BYTES, strict=True, what="leaderboard entry")
    problem = seal_problem(data)
    if problem is None and content_hash(data["results"]) != data["submission"]["content_hash"]:
        problem = "the results differ from those accepted (their content hash changed)"
    if problem is not None:
        raise InputError(f"{path}: {problem}; not migrated (a hand-edited entry is not sealed again)")
    return data


def migrate(root: str | Path) -> list[Renamed]:
    """Renames every entry under `root` whose id is not `<model>-<content hash[:32]>` (module docstring)."""
    root = Path(root)
    renamed = []
    with board_lock(root):
        for path in entry_files(root):
            data = _old_entry(path)
            submission, model = data["submission"], data["results"]["model"]
            new_id = entry_id(model, submission["content_hash"])
            if submission["id"] == new_id:
                continue
            new_path = path.with_name(f"{new_id}.json")
            moved = dict(submission, id=new_id)
            old_predictions = None
            if submission.get("predictions") is not None:
                old_predictions = path.with_name(submission["predictions"])
                moved["predictions"] = f"{new_id}{PREDICTIONS_SUFFIX}"
                stored = read_capped(old_predictions, MAX_PREDICTIONS_BYTES, "stored predictions file")
                write_new_entry_file(root, path.with_name(moved["predictions"]), stored, new_id)
            new_data = sealed({**data, "submission": moved})
            write_new_entry_file(root, new_path, entry_bytes(new_data), new_id)
            try:
                read_entry(new_path)  # the new file parses as an entry of this board
            except (InputError, SchemaError):
                os.unlink(new_path)
                raise
            assert seal_of(new_data) == new_data["submission"]["seal"]
            if old_predictions is not None:
                os.unlink(old_predictions)
            os.unlink(path)
            renamed.append(Renamed(submission["id"], new_id, new_path))
    return renamed

