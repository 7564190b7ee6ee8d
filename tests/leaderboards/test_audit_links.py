"""`leaderboard audit` reads a board's files as regular files only: a link is named, never read through.

A real verified board in `tmp_path` (a 3-seed run on the tiny zoo, submitted with its predictions, its
dataset's test split pinned). Each file the audit reads (the pinned test metadata, the pinned folder,
an entry's stored predictions, `datasets.json`, the `entries/` folder) is swapped for a link to a copy
of the same bytes elsewhere: a reader that followed the link would find everything in order, so a
clean audit there is exactly the failure. The unchanged board, and the same bytes put back as a
regular file, audit clean (the negative controls).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from benchmarks.harness import predictions_path, run_benchmark
from leaderboards import submit
from leaderboards.audit import audit
from leaderboards.datasets import load_datasets
from leaderboards.entries import stored_predictions_path
from zoo.validation.inputs import InputError
from benchmarks.run_options import RunOptions


@pytest.fixture(scope="module")
def verified_run(tiny_zoo, tmp_path_factory) -> tuple[Path, Path]:
    """(results file with its predictions sidecar, dataset folder) of a real 3-seed run of a small MLP."""
    path = tmp_path_factory.mktemp("audit_run") / "mlp.json"
    run_benchmark("generalization", "mlp", tiny_zoo, None,
                  RunOptions([0, 1, 2], model_overrides={"hidden_sizes": [4]}, task_overrides={"epochs": 1},
                             progress=False),
                  path)
    return path, tiny_zoo


@pytest.fixture
def board(verified_run, tmp_path) -> tuple[Path, Path]:
    """(a board holding one verified entry, that entry's file); it audits clean."""
    results, folder = verified_run
    copy = tmp_path / "submission" / results.name
    copy.parent.mkdir()
    shutil.copy(results, copy)
    shutil.copy(predictions_path(results), predictions_path(copy))
    root = tmp_path / "board"
    accepted = submit(copy, root, folder)
    assert [(a.verified, a.problems) for a in audit(root, require_verified=True)] == [(True, ())]
    return root, accepted.path


def _linked(path: Path, elsewhere: Path) -> Path:
    """Moves `path` (a file or folder) to `elsewhere` and puts a link to it in its place: the same bytes."""
    shutil.move(path, elsewhere)
    path.symlink_to(elsewhere, target_is_directory=elsewhere.is_dir())
    return path


def _restored(path: Path, elsewhere: Path) -> None:
    path.unlink()
    shutil.move(elsewhere, path)


def _entry_problems(root: Path) -> list[str]:
    (entry,) = [a for a in audit(root, require_verified=True) if not a.stray]
    assert all("\n" not in problem for problem in entry.problems)
    return list(entry.problems)


@pytest.mark.parametrize("which", ["the pinned file", "the pinned folder"])
def test_pinned_test_metadata_through_a_link_is_a_problem_naming_it(board, tmp_path, which):
    root, _ = board
    (record,) = load_datasets(root).values()
    pinned = root / record.test_metadata
    link = _linked(pinned if which == "the pinned file" else pinned.parent, tmp_path / "elsewhere")
    problems = _entry_problems(root)
    assert any(str(link) in p and "symbolic link" in p for p in problems), problems
    assert not any("re-score" in p for p in problems)  # nothing was read through it to re-score with
    _restored(link, tmp_path / "elsewhere")
    assert _entry_problems(root) == []  # the same bytes as a regular file: clean


def test_a_pinned_fifo_is_a_problem_naming_it_not_a_wait(board):
    root, _ = board
    (record,) = load_datasets(root).values()
    pinned = root / record.test_metadata
    pinned.unlink()
    os.mkfifo(pinned)
    problems = _entry_problems(root)
    assert any(str(pinned) in p and "not a regular file" in p for p in problems), problems


def test_stored_predictions_through_a_link_are_a_problem_of_the_entry(board, tmp_path):
    root, entry = board
    stored = _linked(stored_predictions_path(entry), tmp_path / "elsewhere.parquet")
    problems = _entry_problems(root)
    assert any(str(stored) in p and "symbolic link" in p for p in problems), problems
    strays = [a for a in audit(root) if a.stray]
    assert [a.path for a in strays] == [stored]  # named as a stray too, as before
    _restored(stored, tmp_path / "elsewhere.parquet")
    assert _entry_problems(root) == []


def test_datasets_file_through_a_link_stops_the_audit_in_one_line(board, tmp_path, board_cli):
    root, _ = board
    datasets = _linked(root / "datasets.json", tmp_path / "elsewhere.json")
    with pytest.raises(InputError, match="symbolic link") as error:
        audit(root)
    assert str(error.value).startswith(f"{datasets}: ") and "\n" not in str(error.value)
    done = board_cli("leaderboard", "audit", "--root", str(root))
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1 and len(lines) == 1, done.stderr
    assert ": error: " in lines[0] and str(datasets) in lines[0]
    _restored(datasets, tmp_path / "elsewhere.json")
    assert board_cli("leaderboard", "audit", "--root", str(root)).returncode == 0


def test_the_entries_folder_as_a_link_is_a_stray_and_no_entry_is_read_through_it(board, tmp_path):
    root, _ = board
    entries = _linked(root / "entries", tmp_path / "elsewhere")
    audits = audit(root)
    assert [(a.path, a.stray) for a in audits] == [(entries, True)]
    assert "symbolic link" in audits[0].problems[0]
    _restored(entries, tmp_path / "elsewhere")
    assert [a.problems for a in audit(root)] == [()]


def test_the_cli_names_a_linked_pinned_file_and_exits_1(board, tmp_path, board_cli):
    root, _ = board
    (record,) = load_datasets(root).values()
    pinned = _linked(root / record.test_metadata, tmp_path / "elsewhere")
    done = board_cli("leaderboard", "audit", "--root", str(root))
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr
    assert any(line.startswith("PROBLEM") for line in done.stdout.splitlines()), done.stdout
    assert any(str(pinned) in line and "symbolic link" in line for line in done.stdout.splitlines()), done.stdout
