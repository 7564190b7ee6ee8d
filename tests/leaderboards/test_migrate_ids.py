"""`migrate-ids` at the boundary: an old entry's predictions are its own file or nothing moves, and an
interrupted migration resumes.

Real boards in `tmp_path`: a verified entry (a real 3-seed run on the tiny zoo, re-scored against the
pinned test split) and an unverified one, submitted, then rewritten as an older board wrote them
(8-hex-digit ids, predictions named after them, sealed). Each crash point of `migrate()` is the on-disk
state such a crash leaves, built from the old board and the board a complete migration gives; running
again must give exactly that complete board, byte for byte, and an audit without problems.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from benchmarks.harness import predictions_path, run_benchmark
from leaderboards import submit
from leaderboards.audit import audit
from leaderboards.entries import EntryCollision, PREDICTIONS_SUFFIX, entry_files
from leaderboards.migrate_ids import migrate
from leaderboards.seal import sealed
from zoo.validation.inputs import InputError
from benchmarks.run_options import RunOptions

LOCK = ".nfnzoo.lock"  # the board's lock file: rewritten by every locked command, not board content
TEMPORARY = ".{name}.999999.new"  # what a crashed `entries.write_new_entry_file` leaves beside `name`


@pytest.fixture(scope="module")
def verified_run(tiny_zoo, tmp_path_factory) -> tuple[Path, Path]:
    """(results file with its predictions sidecar, dataset folder) of a real 3-seed run of a small MLP."""
    path = tmp_path_factory.mktemp("migrate_run") / "mlp.json"
    run_benchmark("generalization", "mlp", tiny_zoo, None,
                  RunOptions([0, 1, 2], model_overrides={"hidden_sizes": [4]}, task_overrides={"epochs": 1},
                             progress=False),
                  path)
    return path, tiny_zoo


def _make_old(path: Path) -> Path:
    """Rewrites an entry as an older board wrote it: an id of 8 hex digits, its predictions named after it, sealed."""
    data = json.loads(path.read_text())
    submission = data["submission"]
    old_id = submission["id"][:-32] + submission["content_hash"][:8]
    if submission.get("predictions") is not None:
        path.with_name(submission["predictions"]).rename(path.with_name(f"{old_id}{PREDICTIONS_SUFFIX}"))
        submission["predictions"] = f"{old_id}{PREDICTIONS_SUFFIX}"
    submission["id"] = old_id
    old = path.with_name(f"{old_id}.json")
    old.write_text(json.dumps(sealed(data), indent=2))
    path.unlink()
    return old


@pytest.fixture
def old_board(root, write_results, verified_run, tmp_path) -> dict[str, Path]:
    """An older board: the verified entry `V` (with predictions) and the unverified `U`, both with 8-hex-digit ids."""
    results, folder = verified_run
    copy = tmp_path / "submission" / results.name
    copy.parent.mkdir(exist_ok=True)
    shutil.copy(results, copy)
    shutil.copy(predictions_path(results), predictions_path(copy))
    verified = submit(copy, root, folder)
    unverified = submit(write_results(), root)
    assert verified.verified and not unverified.verified
    assert [a.problems for a in audit(root)] == [(), ()]  # the board as submitted is clean
    return {"V": _make_old(verified.path), "U": _make_old(unverified.path)}


def _tree(board: Path) -> dict[str, object]:
    """Every path under the board but its lock: a file's bytes, a link's target, a folder's mark."""
    found = {}
    for folder, folders, files in os.walk(board):
        for name in folders + files:
            path = Path(folder) / name
            relative = str(path.relative_to(board))
            if relative == LOCK:
                continue
            found[relative] = (("link", os.readlink(path)) if path.is_symlink() else
                               "folder" if path.is_dir() else path.read_bytes())
    return found


def _refused(root: Path, match: str) -> str:
    """migrate(root)'s one-line refusal, matching `match`, once it is shown that nothing was written."""
    before = _tree(root)
    with pytest.raises(InputError, match=match) as error:
        migrate(root)
    assert _tree(root) == before  # nothing moved, written or removed, the other entries included
    assert "\n" not in str(error.value)
    return str(error.value)


def _beside(old_board: dict[str, Path]) -> tuple[Path, Path]:
    """(attacker, victim): the unverified entry moved into the verified one's folder, where a name in
    `submission.predictions` would reach the victim's files."""
    attacker = old_board["V"].with_name(old_board["U"].name)
    old_board["U"].rename(attacker)
    return attacker, old_board["V"]


def _resealed(path: Path, **changes) -> None:
    data = json.loads(path.read_text())
    data["submission"].update(changes)
    del data["submission"]["seal"]
    path.write_text(json.dumps(sealed(data), indent=2))  # the seal is an unkeyed sha256: anyone recomputes it


# --- point 3: an old entry's predictions are its own file ------------------------------------------

def test_an_old_verified_entry_moves_its_own_predictions_and_audits_clean(root, old_board):
    """The negative control for the refusals below: an entry naming its own predictions migrates."""
    old_predictions = old_board["V"].with_name(f"{old_board['V'].stem}{PREDICTIONS_SUFFIX}")
    stored = old_predictions.read_bytes()
    renamed = {r.old: r for r in migrate(root)}
    assert sorted(renamed) == sorted(path.stem for path in old_board.values())
    new = renamed[old_board["V"].stem].path
    assert not old_board["V"].exists() and not old_predictions.exists()
    assert new.with_name(f"{new.stem}{PREDICTIONS_SUFFIX}").read_bytes() == stored
    assert sorted((a.verified, a.problems) for a in audit(root)) == [(False, ()), (True, ())]
    assert migrate(root) == []


@pytest.mark.parametrize("victim", ["the other entry's predictions", "the other entry's file",
                                    "a file of another folder", "a number"])
def test_an_entry_naming_another_file_as_its_predictions_is_refused_and_nothing_moves(root, old_board, victim):
    """A hand-made entry (resealed) whose `submission.predictions` names any file but its own."""
    attacker, other = _beside(old_board)
    names = {"the other entry's predictions": f"{other.stem}{PREDICTIONS_SUFFIX}",
             "the other entry's file": other.name,
             "a file of another folder": f"../{other.parent.name}/{other.stem}{PREDICTIONS_SUFFIX}",  # its own folder
             "a number": 7}
    target = other.parent / f"{other.stem}{PREDICTIONS_SUFFIX}"
    _resealed(attacker, predictions=names[victim], verified=True,
              predictions_sha256=hashlib.sha256(target.read_bytes()).hexdigest())
    message = _refused(root, "submission.predictions")
    assert message.startswith(f"{attacker}: ") and f"{attacker.stem}{PREDICTIONS_SUFFIX}" in message


def test_an_entry_taking_another_entrys_id_to_claim_its_predictions_is_refused(root, old_board):
    """`<old id><suffix>` is the entry's own only when the old id is its file's stem."""
    attacker, other = _beside(old_board)
    predictions = f"{other.stem}{PREDICTIONS_SUFFIX}"
    _resealed(attacker, id=other.stem, predictions=predictions, verified=True,
              predictions_sha256=hashlib.sha256((other.parent / predictions).read_bytes()).hexdigest())
    assert _refused(root, "submission.id").startswith(f"{attacker}: ")


def test_own_predictions_as_a_link_or_with_other_bytes_are_refused(root, old_board, tmp_path):
    own = old_board["V"].with_name(f"{old_board['V'].stem}{PREDICTIONS_SUFFIX}")
    stored = own.read_bytes()
    outside = tmp_path / "elsewhere.parquet"
    outside.write_bytes(stored)  # the same bytes: only a link followed would pass
    own.unlink()
    own.symlink_to(outside)
    message = _refused(root, "submission.predictions: .*symbolic link")
    assert message.startswith(f"{old_board['V']}: ") and str(own) in message
    own.unlink()
    own.write_bytes(stored + b"\0")
    assert _refused(root, "submission.predictions_sha256").startswith(f"{old_board['V']}: ")


def test_a_refused_board_is_one_error_line_from_the_cli(root, old_board, board_cli):
    _resealed(old_board["U"], predictions=old_board["V"].name)
    done = board_cli("leaderboard", "migrate-ids", "--root", str(root))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert lines[0].startswith("nfnzoo leaderboard") and ": error: " in lines[0]
    assert str(old_board["U"]) in lines[0] and "submission.predictions" in lines[0]
    assert old_board["V"].exists() and old_board["U"].exists()


# --- point 7a: an interrupted migration resumes ----------------------------------------------------

def _names(old: Path, final: Path) -> dict[str, dict[str, str]]:
    """Per entry (V, U): its old and new files' paths relative to the board."""
    old_tree, final_tree = _tree(old), _tree(final)
    names = {}
    for key, suffix in (("V", "mlp-"), ("U", "statnn-")):
        gone = sorted(p for p in old_tree if p not in final_tree and Path(p).name.startswith(suffix))
        new = sorted(p for p in final_tree if p not in old_tree and Path(p).name.startswith(suffix))
        names[key] = {"old_json": next(p for p in gone if p.endswith(".json")),
                      "new_json": next(p for p in new if p.endswith(".json")),
                      "old_predictions": next((p for p in gone if p.endswith(PREDICTIONS_SUFFIX)), ""),
                      "new_predictions": next((p for p in new if p.endswith(PREDICTIONS_SUFFIX)), "")}
    return names


def _temporary(board: Path, relative: str, data: bytes) -> None:
    path = board / relative
    (path.parent / TEMPORARY.format(name=path.name)).write_bytes(data)


def _first_entry_done(board: Path, final: Path, names: dict) -> None:
    first = min(names, key=lambda key: names[key]["old_json"])  # migrate() goes through the entries by path
    for new in ("new_predictions", "new_json"):
        if names[first][new]:
            shutil.copy(final / names[first][new], board / names[first][new])
    for old in ("old_predictions", "old_json"):
        if names[first][old]:
            (board / names[first][old]).unlink()


# crash point in migrate() -> the state it leaves, from (board: the old board, final: the migrated one, names)
CRASHES = {
    "the new predictions half written (a temporary)":
        lambda board, final, n: _temporary(board, n["V"]["new_predictions"],
                                           (final / n["V"]["new_predictions"]).read_bytes()[:100]),
    "the new predictions linked into place, their temporary not yet removed":
        lambda board, final, n: (shutil.copy(final / n["V"]["new_predictions"], board / n["V"]["new_predictions"]),
                                 _temporary(board, n["V"]["new_predictions"],
                                            (final / n["V"]["new_predictions"]).read_bytes())),
    "the new predictions written, the entry not":
        lambda board, final, n: shutil.copy(final / n["V"]["new_predictions"], board / n["V"]["new_predictions"]),
    "the new entry half written (a temporary)":
        lambda board, final, n: (shutil.copy(final / n["V"]["new_predictions"], board / n["V"]["new_predictions"]),
                                 _temporary(board, n["V"]["new_json"], b'{"submission": ')),
    "both new files written, no old one removed":
        lambda board, final, n: [shutil.copy(final / n["V"][k], board / n["V"][k])
                                 for k in ("new_predictions", "new_json")],
    "the old predictions removed, the old entry not":
        lambda board, final, n: ([shutil.copy(final / n["V"][k], board / n["V"][k])
                                  for k in ("new_predictions", "new_json")],
                                 (board / n["V"]["old_predictions"]).unlink()),
    "an unverified entry's new file written, its old one not removed":
        lambda board, final, n: shutil.copy(final / n["U"]["new_json"], board / n["U"]["new_json"]),
    "the first entry done, the next not begun": _first_entry_done,
}


@pytest.fixture
def migrated(root, old_board, tmp_path) -> tuple[Path, dict]:
    """(the board a complete migration of `root` gives, the names of the entries' files); `root` stays old."""
    final = tmp_path / "migrated"
    shutil.copytree(root, final, symlinks=True)
    assert len(migrate(final)) == 2
    return final, _names(root, final)


@pytest.mark.parametrize("crash", list(CRASHES))
def test_an_interrupted_migration_finishes_when_run_again(root, migrated, crash):
    final, names = migrated
    CRASHES[crash](root, final, names)
    assert any(a.problems for a in audit(root))  # the state a crash leaves is refused until resumed
    renamed = migrate(root)
    assert _tree(root) == _tree(final)  # exactly the complete migration: no old file, no temporary left
    assert renamed and all(r.path.exists() for r in renamed)
    assert [a.problems for a in audit(root)] == [(), ()]
    assert migrate(root) == []


def test_the_cli_resumes_an_interrupted_migration(root, migrated, board_cli):
    final, names = migrated
    CRASHES["the old predictions removed, the old entry not"](root, final, names)
    done = board_cli("leaderboard", "migrate-ids", "--root", str(root))
    assert done.returncode == 0, done.stderr
    assert _tree(root) == _tree(final)
    done = board_cli("leaderboard", "audit", "--root", str(root))
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_new_file_that_is_not_this_migrations_is_refused_not_overwritten(root, migrated, tmp_path):
    """The negative controls of resuming: a file at a new name is kept only when it holds what the migration writes."""
    final, names = migrated
    new_json, new_predictions = root / names["V"]["new_json"], root / names["V"]["new_predictions"]
    shutil.copy(final / names["V"]["new_predictions"], new_predictions)
    new_json.write_bytes((final / names["V"]["new_json"]).read_bytes().replace(b'"seeds"', b'"seeds" ', 1))
    before = _tree(root)
    with pytest.raises(EntryCollision, match="already exists and is not the migration"):
        migrate(root)
    assert _tree(root) == before
    new_json.unlink()
    new_predictions.write_bytes((final / names["V"]["new_predictions"]).read_bytes() + b"\0")
    assert new_predictions.name in _refused(root, "submission.predictions_sha256")
    outside = tmp_path / "copy.parquet"
    shutil.copy(final / names["V"]["new_predictions"], outside)  # the right bytes, through a link
    new_predictions.unlink()
    new_predictions.symlink_to(outside)
    assert str(new_predictions) in _refused(root, "symbolic link")


def test_the_entries_folder_as_a_link_is_refused(root, old_board, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    (root / "entries").rename(elsewhere)
    (root / "entries").symlink_to(elsewhere)
    assert "entries is a symbolic link" in _refused(root, "symbolic link")
    assert sorted(p.name for p in entry_files(root)) == sorted(p.name for p in old_board.values())
