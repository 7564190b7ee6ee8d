"""Results files that are not JSON files: errors that name them, in one line, exit code 1."""

from __future__ import annotations

import pytest

from zoo.cli import main


@pytest.fixture(params=["binary", "folder", "truncated"])
def bad_results(request, tmp_path):
    path = tmp_path / "results.json"
    if request.param == "binary":
        path.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff\xfe")
    elif request.param == "folder":
        path.mkdir()
    else:
        path.write_text('{"schema_version": 1, "task": "generaliz')
    return path


def test_submit_names_a_bad_results_file(bad_results, tmp_path, capsys):
    assert main(["leaderboard", "submit", str(bad_results), "--root", str(tmp_path / "board")]) == 1
    err = capsys.readouterr().err
    assert f"{bad_results}:" in err and "Traceback" not in err
    assert any(reason in err for reason in ("not a text file", "not a standard suite's folder", "not valid JSON"))
    assert not (tmp_path / "board").exists()


def test_scatter_names_a_bad_results_file(bad_results, tmp_path, capsys):
    assert main(["bench", "scatter", str(bad_results), "--out", str(tmp_path / "plot.png")]) == 1
    err = capsys.readouterr().err
    assert f"{bad_results}:" in err and "Traceback" not in err
