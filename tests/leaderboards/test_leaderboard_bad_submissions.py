"""Bad submissions: every reason listed, nothing written, nothing outside the board's folder."""

from __future__ import annotations

import json
import os

import pytest

from leaderboards import SubmissionRejected, submit
from leaderboards.submission import MAX_RESULTS_BYTES
from leaderboards import rescore
from zoo.storage.lock import LOCK_FILE


def _written(folder) -> list:
    """Everything under `folder` but the board's lock file (leaderboards.lock)."""
    return sorted(p for p in folder.rglob("*") if p.name != LOCK_FILE)


def _rejected(path, root) -> list[str]:
    before = _written(root.parent)
    with pytest.raises(SubmissionRejected) as error:
        submit(path, root)
    assert _written(root.parent) == before  # nothing written anywhere
    return error.value.problems


@pytest.mark.parametrize("model", ["../escape", "/etc/passwd", "a/b", "sp ace", "x" * 65, ".hidden", ""])
def test_a_model_name_that_could_escape_the_folder_is_rejected(root, write_results, make_data, model):
    problems = _rejected(write_results(make_data(model=model)), root)
    assert any("model name" in p and "file name" in p for p in problems), problems


@pytest.mark.parametrize("name", ["../elsewhere.csv", "/tmp/p.csv", "sub/p.csv", "..", "~p.csv"])
def test_a_sidecar_name_with_a_path_is_rejected(root, write_results, make_data, name):
    data = make_data()
    data["predictions"] = name
    problems = _rejected(write_results(data), root)
    # a path is refused by the results schema itself (benchmarks.results), anything else not bare by the board
    assert any(f"predictions {name!r} must be a bare file name" in p
               or f"predictions: expected a file name beside the results file, got {name!r}" in p
               for p in problems), problems


def test_an_oversized_results_file_is_rejected_before_it_is_read(root, tmp_path):
    path = tmp_path / "huge.json"
    path.write_text(json.dumps({"padding": "x" * MAX_RESULTS_BYTES}))
    (problem,) = _rejected(path, root)
    assert f"larger than {MAX_RESULTS_BYTES:,} bytes, the most a results file may hold" in problem


@pytest.mark.parametrize("text, reason", [
    ('{"a": NaN}', "NaN is not plain JSON"),
    ('{"a": Infinity}', "Infinity is not plain JSON"),
    ('{"a": 1, "a": 2}', "the keys ['a'] appear twice"),
    ("\x80\x04\x95 pickle", "not a text file"),
])
def test_anything_but_plain_json_is_refused(root, tmp_path, text, reason):
    path = tmp_path / "odd.json"
    path.write_bytes(text.encode("latin-1"))
    (problem,) = _rejected(path, root)
    assert reason in problem


def _with_predictions(write_results, make_data, content: bytes):
    data = make_data()
    data["predictions"] = "p.csv"
    path = write_results(data)
    (path.parent / "p.csv").write_bytes(content)
    return path


def test_a_binary_predictions_file_is_refused(root, write_results, make_data):
    import pickle

    path = _with_predictions(write_results, make_data, pickle.dumps({"seed": [0]}))
    problems = _rejected(path, root)
    assert any("not a text file" in p and "expected CSV" in p for p in problems), problems


def test_an_oversized_predictions_file_is_refused(root, write_results, make_data, monkeypatch):
    monkeypatch.setattr(rescore, "MAX_PREDICTIONS_BYTES", 100)  # the real bound is 64 MiB
    path = _with_predictions(write_results, make_data, b"seed,model_id,prediction\n" + b"0,a,0.5\n" * 20)
    problems = _rejected(path, root)
    assert any("larger than 100 bytes, the most a predictions file may hold" in p for p in problems), problems


def test_a_predictions_link_is_refused(root, write_results, make_data, tmp_path):
    data = make_data()
    data["predictions"] = "p.csv"
    path = write_results(data)
    target = tmp_path / "elsewhere.csv"
    target.write_text("seed,model_id,prediction\n0,a,0.5\n")
    os.symlink(target, path.parent / "p.csv")
    problems = _rejected(path, root)
    assert any("symbolic link" in p for p in problems), problems


def test_a_missing_predictions_file_is_named(root, write_results, make_data):
    data = make_data()
    data["predictions"] = "absent.csv"
    problems = _rejected(write_results(data), root)
    assert any("absent.csv" in p and "no such predictions file" in p for p in problems), problems


@pytest.mark.parametrize("url, commit, reason", [
    ("javascript:alert(1)", "abcdef1", "must be an https URL"),
    ('https://example.org/"><script>', "abcdef1", "must be an https URL"),
    ("https://github.com/org/repo", "not-hex", "must be 7-40 lowercase hex digits"),
    (None, "abcdef1", "needs the code's URL"),
])
def test_a_bad_code_link_is_rejected(root, write_results, url, commit, reason):
    with pytest.raises(SubmissionRejected) as error:
        submit(write_results(), root, code_url=url, code_commit=commit)
    assert any(reason in p for p in error.value.problems), error.value.problems


def test_a_code_link_is_shown_in_the_markdown_and_the_site(root, write_results, tmp_path):
    from leaderboards import render

    submit(write_results(), root, code_url="https://github.com/org/repo", code_commit="0123456789abcdef")
    text = render(root, tmp_path / "site")
    assert "[01234567](https://github.com/org/repo/tree/0123456789abcdef)" in text  # the code at its commit
    assert ('<a href="https://github.com/org/repo/tree/0123456789abcdef">01234567</a>'
            in (tmp_path / "site" / "generalization.html").read_text())
