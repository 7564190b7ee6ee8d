"""Track results on a leaderboard: the definition's hash checked, the matrix cells re-scored."""

from __future__ import annotations

import dataclasses
import json
import shutil

import pandas
import pytest

pytest.importorskip("timm")

from benchmarks.results import summarize
from benchmarks.tasks.continual_learning import definition_cells, definition_hash
from benchmarks.tracks.norga import track as norga
from benchmarks.tracks.registry import create_track
from leaderboards.audit import audit
from leaderboards.renderer import render
from leaderboards.datasets import load_datasets
from leaderboards.submission import SubmissionRejected, submit


@pytest.fixture(scope="module")
def track_results(tmp_path_factory):
    """The tiny norga profile's HiDe-Prompt and joint results over 3 seeds (the board's minimum)."""
    out = tmp_path_factory.mktemp("track")
    profile = dataclasses.replace(norga.PROFILES["tiny"], methods=("hide-prompt", "joint"))
    with pytest.MonkeyPatch.context() as patch:
        patch.setitem(norga.PROFILES, "tiny-board", profile)
        create_track("norga").run("tiny-board", [0, 1, 2], out, workers=1)
    return out / "glyphs-3tasks"


def _copy(folder, tmp_path, name="hide-prompt"):
    target = tmp_path / "submission"
    shutil.copytree(folder, target)
    return target / f"{name}.json"


def test_track_results_are_accepted_verified_and_audited(track_results, tmp_path):
    board = tmp_path / "board"
    first = submit(track_results / "hide-prompt.json", board)
    joint = submit(track_results / "joint.json", board)
    assert first.verified and joint.verified and "FAA, CAA and FFM recomputed" in first.rescoring
    record = load_datasets(board)[json.loads((track_results / "joint.json").read_text())["dataset"]["dataset_hash"]]
    assert record.source == "track:norga" and record.family == "track" and record.test_metadata is not None
    assert first.registered_dataset is not None and joint.registered_dataset is None  # registered once
    audits = audit(board, require_verified=True)
    assert len(audits) == 2 and all(a.verified and not a.problems for a in audits)
    page = render(board, tmp_path / "site")
    assert "# Leaderboard: continual-learning" in page and "hide-prompt" in page and "joint" in page
    joint_row = next(line for line in page.splitlines() if line.startswith("| ") and " joint " in line)
    assert "—" in joint_row  # no CAA or forgetting for a learner evaluated once


def test_a_moved_metric_or_cell_is_rejected(track_results, tmp_path):
    path = _copy(track_results, tmp_path)
    data = json.loads(path.read_text())
    data["per_seed"][0]["metrics"]["cumulative_average_accuracy"] += 0.01
    data["summary"] = summarize([entry["metrics"] for entry in data["per_seed"]])  # consistent, but not re-scored
    path.write_text(json.dumps(data))
    with pytest.raises(SubmissionRejected, match="cumulative_average_accuracy is reported as"):
        submit(path, tmp_path / "board")
    path = _copy(track_results, tmp_path / "again")
    cells = pandas.read_csv(path.with_name("hide-prompt.predictions.csv"))
    cells.loc[(cells["seed"] == 1) & (cells["model_id"] == "task0@stage2"), "prediction"] += 0.25
    cells.to_csv(path.with_name("hide-prompt.predictions.csv"), index=False)
    with pytest.raises(SubmissionRejected, match="seed 1: final_average_accuracy is reported as"):
        submit(path, tmp_path / "board")
    cells = cells[cells["model_id"] != "task1@stage1"]
    cells.to_csv(path.with_name("hide-prompt.predictions.csv"), index=False)
    with pytest.raises(SubmissionRejected, match="missing 1 \\(task1@stage1\\)"):
        submit(path, tmp_path / "board")


def test_a_definition_that_does_not_hash_to_the_dataset_is_rejected(track_results, tmp_path):
    path = _copy(track_results, tmp_path)
    data = json.loads(path.read_text())
    data["task_config"]["definition"]["backbone_sha256"] = "0" * 64  # another backbone, same claimed hash
    path.write_text(json.dumps(data))
    with pytest.raises(SubmissionRejected, match="is not the hash of task_config.definition"):
        submit(path, tmp_path / "board")
    data["dataset"]["dataset_hash"] = definition_hash(data["task_config"]["definition"])
    data["task_config"]["benchmark"]["tasks"] = 4  # the shown benchmark is not the hashed one
    path.write_text(json.dumps(data))
    with pytest.raises(SubmissionRejected, match="differs from task_config.definition.benchmark"):
        submit(path, tmp_path / "board")


def test_the_cells_of_a_definition():
    cells = definition_cells({"benchmark": {"tasks": 3}})
    assert cells["model_id"].tolist() == ["task0@stage0", "task0@stage1", "task1@stage1", "task0@stage2",
                                          "task1@stage2", "task2@stage2"]
    with pytest.raises(ValueError, match="benchmark.tasks"):
        definition_cells({"benchmark": {}})
