"""The predicted-vs-true scatter plot."""

from __future__ import annotations

import shutil

import pytest

from benchmarks.plots import scatter


def read_png(path):
    import matplotlib.image

    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    return matplotlib.image.imread(path)


def test_one_panel_per_results_file(results_path, tmp_path):
    single = read_png(scatter([results_path], tmp_path / "one.png"))
    copy = tmp_path / "copy.json"
    shutil.copy(results_path, copy)
    shutil.copy(results_path.with_name("statnn.predictions.csv"), tmp_path / "statnn.predictions.csv")
    double = read_png(scatter([results_path, copy], tmp_path / "plots" / "two.png"))
    assert double.shape[0] == single.shape[0]
    assert double.shape[1] == pytest.approx(2 * single.shape[1], rel=0.02)


def test_missing_predictions_and_no_input_are_errors(results_path, tmp_path):
    lonely = tmp_path / "lonely.json"
    shutil.copy(results_path, lonely)  # its sidecar reference points at a file not beside it
    with pytest.raises(FileNotFoundError, match="predictions file"):
        scatter([lonely], tmp_path / "x.png")
    with pytest.raises(ValueError, match="at least one"):
        scatter([], tmp_path / "x.png")
    assert not (tmp_path / "x.png").exists()
