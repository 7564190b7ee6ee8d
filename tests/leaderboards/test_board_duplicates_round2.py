"""Issue 48, round 2: results that render identically are duplicates, and a results page that is a link is refused.

Real files and the real CLI (`nfnzoo leaderboard ...` in a fresh process, `tests/forked_cli.py`):
- a model config whose number is written as its canonical text (`"256"` for lightgbm's `num_leaves`, whose
  config is not type-checked) is the same experiment as the number; a string that is not a number's canonical
  text (`"0256"`) is another config (the negative control);
- a task config that leaves out a key defaulting to null is the same protocol as one that writes it; one that
  sets that key to a value is another protocol (the negative control);
- `leaderboard render --docs DIR` refuses a page that is a symbolic link in one line, before anything is read or
  written (the link and its target are left as they were); a folder without the link renders (the control).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]


def _entries(root: Path) -> list[Path]:
    return sorted(p for p in (root / "entries").rglob("*.json"))


LIGHTGBM = {"num_leaves": 256, "learning_rate": 0.05}


def _lightgbm(make_data, **config):
    return make_data(model="lightgbm", model_config={**LIGHTGBM, **config})


def test_a_number_written_as_its_text_is_a_duplicate(root, write_results, make_data, board_cli):
    first = board_cli("leaderboard", "submit", str(write_results(_lightgbm(make_data))), "--root", str(root))
    assert first.returncode == 0, first.stderr
    assert len(_entries(root)) == 1
    for spelling in ("256", "256.0"):
        done = board_cli("leaderboard", "submit", str(write_results(_lightgbm(make_data, num_leaves=spelling))),
                   "--root", str(root))
        assert done.returncode == 1, (spelling, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        assert done.stderr.startswith("nfnzoo leaderboard: error: "), done.stderr
        assert "duplicates the accepted entry" in done.stderr, done.stderr
        assert len(_entries(root)) == 1
    other = board_cli("leaderboard", "submit", str(write_results(_lightgbm(make_data, num_leaves="0256"))),
                "--root", str(root))
    assert other.returncode == 0, other.stderr  # the negative control: not a number's canonical text
    assert len(_entries(root)) == 2


def test_a_task_config_leaving_out_a_null_default_is_a_duplicate(root, write_results, make_data, board_cli):
    written = make_data()
    written["task_config"]["min_accuracy"] = None  # generalization's min_accuracy defaults to null
    first = board_cli("leaderboard", "submit", str(write_results(written)), "--root", str(root))
    assert first.returncode == 0, first.stderr
    omitted = make_data()
    assert "min_accuracy" not in omitted["task_config"]
    omitted["per_seed"][0]["train_time_s"] = 99.0  # another content hash: only the duplicate key matches
    done = board_cli("leaderboard", "submit", str(write_results(omitted)), "--root", str(root))
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    assert "duplicates the accepted entry" in done.stderr, done.stderr
    assert len(_entries(root)) == 1
    other = make_data()
    other["task_config"]["min_accuracy"] = 0.5
    control = board_cli("leaderboard", "submit", str(write_results(other)), "--root", str(root))
    assert control.returncode == 0, control.stderr  # the negative control: another protocol
    assert len(_entries(root)) == 2


def test_the_canonical_number_text():
    from leaderboards.entries import canonical_config, canonical_json, completed_task_config

    assert canonical_config({"n": "256", "x": "0.1", "y": "1e-05", "z": "-3"}) == {"n": 256, "x": 0.1, "y": 1e-05,
                                                                                    "z": -3}
    for text in ("0256", "+1", "-0", "1e5", " 256", "nan", "inf", "true", "9" * 41):
        assert canonical_config(text) == text, text
    assert canonical_json(canonical_config({"256": "a"})) == '{"256":"a"}'  # a key stays text
    assert completed_task_config("generalization", {})["min_accuracy"] is None
    assert completed_task_config("no-such-task", {"a": 1}) == {"a": 1}


def _docs(tmp_path: Path) -> Path:
    docs = tmp_path / "docs"
    shutil.copytree(REPO / "docs", docs)
    return docs


def test_a_results_page_that_is_a_link_is_refused(tmp_path, board_cli):
    docs = _docs(tmp_path)
    control = board_cli("leaderboard", "render", "--docs", str(docs))
    assert control.returncode == 0, control.stderr  # the negative control: real pages render
    page = docs / "results" / "cnn-generalization.md"
    outside = tmp_path / "outside" / "stale.md"
    outside.parent.mkdir()
    shutil.copy(page, outside)
    stale = outside.read_text().replace("| 1 |", "| 9 |")  # a target holding nfnzoo:board regions, stale
    outside.write_text(stale)
    page.unlink()
    page.symlink_to(outside)
    done = board_cli("leaderboard", "render", "--docs", str(docs))
    assert done.returncode == 1, (done.stdout, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nfnzoo leaderboard: error: "), done.stderr
    assert f"{page} is a symbolic link" in lines[0], lines[0]
    assert page.is_symlink() and outside.read_text() == stale  # nothing read through it, nothing replaced
    checked = board_cli("leaderboard", "render", "--docs", str(docs), "--check")
    assert checked.returncode == 1 and f"{page} is a symbolic link" in checked.stderr, checked.stderr


def test_a_results_folder_that_is_a_link_or_a_fifo_page_is_refused(tmp_path, board_cli):
    docs = _docs(tmp_path)
    moved = tmp_path / "elsewhere"
    shutil.move(docs / "results", moved)
    (docs / "results").symlink_to(moved)
    done = board_cli("leaderboard", "render", "--docs", str(docs))
    assert done.returncode == 1 and f"{docs / 'results'} is a symbolic link" in done.stderr, done.stderr
    (docs / "results").unlink()
    shutil.move(moved, docs / "results")
    os.mkfifo(docs / "results" / "blocked.md")
    done = board_cli("leaderboard", "render", "--docs", str(docs))  # would block on reading the FIFO
    assert done.returncode == 1, done.stderr
    assert f"{docs / 'results' / 'blocked.md'}: not a regular file" in done.stderr, done.stderr
