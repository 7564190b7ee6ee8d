"""A board arrives by pull request, so links may be planted in it: its writers never follow one
(`zoo.storage.nofollow`). Real links, hard links and FIFOs, the real CLI in a forked process; each
case checks the victim outside the board, the exit code and the one line naming the link."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from zoo.storage.lock import LOCK_FILE

VICTIM_TEXT = "the victim's own bytes\n"
TIMEOUT_S = 120


def _run(cli, argv: list, tmp_path: Path) -> tuple[int, str]:
    working = tmp_path / "cwd"
    working.mkdir(exist_ok=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "HF_HOME": str(tmp_path / "hf_home"),
           "PYTHONWARNINGS": "ignore", "NFNZOO_LEADERBOARD": str(tmp_path / "default-board")}
    try:
        done = cli.run([str(a) for a in argv], cwd=working, env=env, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"nfnzoo {' '.join(map(str, argv[:2]))} did not answer within {TIMEOUT_S} s (blocked on a FIFO?)")
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    return done.returncode, done.stderr.strip()


def _one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("nfnzoo leaderboard: error: "), stderr[-2000:]
    return lines[0]


@pytest.fixture
def victim(tmp_path: Path) -> Path:
    path = tmp_path / "victim.txt"
    path.write_text(VICTIM_TEXT)
    return path


def _entries(root: Path) -> list[Path]:
    return sorted((root / "entries").rglob("*.json")) if (root / "entries").is_dir() else []


def _plant_lock(root: Path, kind: str, victim: Path) -> Path:
    lock = root / LOCK_FILE
    lock.unlink(missing_ok=True)
    if kind == "symlink":
        lock.symlink_to(Path("..") / victim.name)
    elif kind == "hardlink":
        os.link(victim, lock)
    else:
        os.mkfifo(lock)
    return lock


LOCK_MESSAGES = {"symlink": "is a symbolic link; nfnzoo never writes through links: remove it",
                 "hardlink": "has 2 hard links; nfnzoo never writes through links",
                 "fifo": "is not a regular file (a pipe, socket or device)"}


@pytest.mark.parametrize("kind", ["symlink", "hardlink", "fifo"])
def test_submit_refuses_a_planted_lock_file(kind, cli, root, write_results, hashes, local_dataset, victim, tmp_path):
    """`BOARD/.nfnzoo.lock` from a pull request: refused before a byte is written."""
    lock = _plant_lock(root, kind, victim)
    path = write_results(dataset_hash=hashes["local"], dataset_path="moved")
    code, stderr = _run(cli, ["leaderboard", "submit", path, "--root", root, "--dataset", local_dataset], tmp_path)
    line = _one_line(stderr)
    assert code == 1 and str(lock) in line and LOCK_MESSAGES[kind] in line, line
    assert victim.read_text() == VICTIM_TEXT
    assert _entries(root) == []


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_submission_rejected_under_the_lock_never_writes_through_it(kind, cli, root, write_results, hashes,
                                                                      local_dataset, victim, tmp_path):
    """A resubmission (rejected as a duplicate once the board is read, under the lock) with a planted lock."""
    path = write_results(dataset_hash=hashes["local"], dataset_path="moved")
    argv = ["leaderboard", "submit", path, "--root", root, "--dataset", local_dataset]
    code, stderr = _run(cli, argv, tmp_path)
    assert code == 0, stderr
    accepted = _entries(root)
    lock = _plant_lock(root, kind, victim)
    code, stderr = _run(cli, argv, tmp_path)
    line = _one_line(stderr)
    assert code == 1 and str(lock) in line and LOCK_MESSAGES[kind] in line, line
    assert victim.read_text() == VICTIM_TEXT and _entries(root) == accepted


def test_submit_never_writes_an_entry_through_a_linked_folder(cli, root, write_results, hashes, local_dataset,
                                                              tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "entries").symlink_to(elsewhere)
    path = write_results(dataset_hash=hashes["local"], dataset_path="moved")
    code, stderr = _run(cli, ["leaderboard", "submit", path, "--root", root, "--dataset", local_dataset], tmp_path)
    assert code == 1
    assert _one_line(stderr).endswith(f"{root / 'entries'} is a symbolic link; nfnzoo never writes through links: "
                                      "remove it"), stderr
    assert list(elsewhere.rglob("*")) == []


def test_submit_into_a_plain_board_still_works(cli, root, write_results, hashes, local_dataset, tmp_path):
    """The negative control: the same submission, nothing planted."""
    path = write_results(dataset_hash=hashes["local"], dataset_path="moved")
    code, stderr = _run(cli, ["leaderboard", "submit", path, "--root", root, "--dataset", local_dataset], tmp_path)
    assert code == 0, stderr
    assert len(_entries(root)) == 1 and (root / LOCK_FILE).is_file()


def test_render_never_replaces_a_link_in_its_output_folder(cli, root, victim, tmp_path):
    out = tmp_path / "site"
    out.mkdir()
    (out / "index.md").symlink_to(victim)
    code, stderr = _run(cli, ["leaderboard", "render", "--root", root, "--out", out], tmp_path)
    assert code == 1
    assert _one_line(stderr).endswith(f"{out / 'index.md'} is a symbolic link; nfnzoo never writes through links: "
                                      "remove it"), stderr
    assert victim.read_text() == VICTIM_TEXT and (out / "index.md").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".site.rendering")) == []
    (out / "index.md").unlink()  # the negative control: the same render once the link is gone
    code, stderr = _run(cli, ["leaderboard", "render", "--root", root, "--out", out], tmp_path)
    assert code == 0, stderr
    assert (out / "index.md").is_file() and not (out / "index.md").is_symlink()
