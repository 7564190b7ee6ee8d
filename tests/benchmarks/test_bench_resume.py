"""A benchmark run's seeds as resumable jobs: a cut-off run keeps its finished seeds, a re-run
runs only the missing ones and writes the same results; seeds as Ray tasks."""

from __future__ import annotations

import json

import pandas
import pytest

import benchmarks.harness as harness
from benchmarks.harness import predictions_path, run_on_splits, seeds_folder
from benchmarks.run_options import Placement, RunOptions

MODEL = {"hidden_sizes": [8]}
TASK = {"epochs": 2}
REAL_SEED_JOB = harness._run_seed


class Cut(KeyboardInterrupt):
    """Stands in for the end of a session (a signal): the process stops in the middle of a seed."""


def _counting(monkeypatch, stop_at: int | None = None) -> list[int]:
    """Wraps the seed job: records which seeds ran, and stops the run when it reaches `stop_at`."""
    ran: list[int] = []

    def wrapped(task, model, model_overrides, task_overrides, splits, seed, device, report_as=None):
        if seed == stop_at:
            raise Cut(f"cut off at seed {seed}")
        ran.append(seed)
        return REAL_SEED_JOB(task, model, model_overrides, task_overrides, splits, seed, device, report_as)

    monkeypatch.setattr(harness, "_run_seed", wrapped)
    return ran


def _metrics(path) -> list[dict]:
    return [entry["metrics"] for entry in json.loads(path.read_text())["per_seed"]]


def test_a_cut_off_run_resumes_from_its_finished_seeds(splits, dataset_info, tmp_path, monkeypatch):
    whole = tmp_path / "whole.json"
    run_on_splits("generalization", "mlp", splits, dataset_info,
                  RunOptions([0, 1, 2], model_overrides=MODEL, task_overrides=TASK, progress=False), whole)

    out = tmp_path / "mlp.json"
    ran = _counting(monkeypatch, stop_at=2)
    with pytest.raises(Cut):
        run_on_splits("generalization", "mlp", splits, dataset_info,
                      RunOptions([0, 1, 2], model_overrides=MODEL, task_overrides=TASK, progress=False), out)
    assert ran == [0, 1]
    assert not out.exists()
    assert sorted(p.name for p in seeds_folder(out).iterdir()) == ["seed0.json", "seed1.json"]

    ran = _counting(monkeypatch)
    run_on_splits("generalization", "mlp", splits, dataset_info,
                  RunOptions([0, 1, 2], model_overrides=MODEL, task_overrides=TASK, progress=False), out)
    assert ran == [2]  # the two finished seeds came from their records
    assert _metrics(out) == _metrics(whole)
    pandas.testing.assert_frame_equal(pandas.read_csv(predictions_path(out)), pandas.read_csv(predictions_path(whole)))
    assert not seeds_folder(out).exists()  # the results file holds every seed now
    stored = json.loads(out.read_text())
    assert [entry["seed"] for entry in stored["per_seed"]] == [0, 1, 2]
    assert stored["num_params"] == json.loads(whole.read_text())["num_params"]


def test_a_changed_setting_runs_the_recorded_seeds_again(splits, dataset_info, tmp_path, monkeypatch):
    out = tmp_path / "mlp.json"
    _counting(monkeypatch, stop_at=1)
    with pytest.raises(Cut):
        run_on_splits("generalization", "mlp", splits, dataset_info,
                      RunOptions([0, 1], model_overrides=MODEL, task_overrides=TASK, progress=False), out)
    assert (seeds_folder(out) / "seed0.json").exists()

    ran = _counting(monkeypatch)
    run_on_splits("generalization", "mlp", splits, dataset_info,
                  RunOptions([0, 1], model_overrides=MODEL, task_overrides={"epochs": 1}, progress=False), out)
    assert ran == [0, 1]  # seed 0's record was made with 2 epochs
    assert json.loads(out.read_text())["task_config"]["epochs"] == 1


def test_a_record_from_another_dataset_is_not_taken(splits, dataset_info, tmp_path, monkeypatch):
    out = tmp_path / "mlp.json"
    _counting(monkeypatch, stop_at=1)
    with pytest.raises(Cut):
        run_on_splits("generalization", "mlp", splits, dataset_info,
                      RunOptions([0, 1], model_overrides=MODEL, task_overrides=TASK, progress=False), out)
    other = {**dataset_info, "dataset_hash": "0" * 64}
    ran = _counting(monkeypatch)
    run_on_splits("generalization", "mlp", splits, other,
                  RunOptions([0, 1], model_overrides=MODEL, task_overrides=TASK, progress=False), out)
    assert ran == [0, 1]


def test_a_moved_dataset_folder_is_the_same_data(splits, dataset_info, tmp_path, monkeypatch):
    out = tmp_path / "mlp.json"
    _counting(monkeypatch, stop_at=1)
    with pytest.raises(Cut):
        run_on_splits("generalization", "mlp", splits, dataset_info,
                      RunOptions([0, 1], model_overrides=MODEL, task_overrides=TASK, progress=False), out)
    ran = _counting(monkeypatch)
    moved = {**dataset_info, "path": str(tmp_path / "elsewhere")}
    run_on_splits("generalization", "mlp", splits, moved,
                  RunOptions([0, 1], model_overrides=MODEL, task_overrides=TASK, progress=False), out)
    assert ran == [1]


def test_a_seed_the_data_cannot_serve_fails_in_the_pool_as_in_the_process(splits, dataset_info, tmp_path):
    task = {**TASK, "min_accuracy": 2.0}  # no member is above an accuracy of 2
    for workers in (1, 2):
        with pytest.raises(ValueError, match="min_accuracy"):
            run_on_splits("generalization", "mlp", splits, dataset_info,
                          RunOptions([0, 1], model_overrides=MODEL, task_overrides=task,
                                     placement=Placement(workers=workers), progress=False),
                          tmp_path / "x.json")


def test_bad_worker_counts_are_refused(splits, dataset_info, tmp_path):
    with pytest.raises(ValueError, match="workers must be at least 1"):
        run_on_splits("generalization", "mlp", splits, dataset_info,
                      RunOptions([0], model_overrides=MODEL, task_overrides=TASK, placement=Placement(workers=0)))
    with pytest.raises(ValueError, match="device cuda on Ray needs GPUs per job"):
        run_on_splits("generalization", "mlp", splits, dataset_info,
                      RunOptions([0], model_overrides=MODEL, task_overrides=TASK,
                                 placement=Placement(device="cuda", workers=2)))


def test_each_seed_job_carries_its_progress_label_or_none(splits, dataset_info):
    loud = harness.prepare_run("generalization", "mlp", splits, dataset_info,
                               RunOptions([0, 2], model_overrides=MODEL, task_overrides=TASK))
    assert [job.arguments[-1] for job in loud.jobs] == ["bench generalization/mlp seed 0",
                                                       "bench generalization/mlp seed 2"]
    assert loud.label == "bench generalization/mlp"  # the per-seed lines of `run_on_splits` start with it
    named = harness.prepare_run("generalization", "mlp", splits, dataset_info,
                                RunOptions([1], model_overrides=MODEL, task_overrides=TASK), label="suite x: e")
    quiet = harness.prepare_run("generalization", "mlp", splits, dataset_info,
                                RunOptions([1], model_overrides=MODEL, task_overrides=TASK, progress=False))
    assert named.jobs[0].arguments[-1] == "suite x: e seed 1" and quiet.jobs[0].arguments[-1] is None
    assert named.jobs[0].fingerprint == quiet.jobs[0].fingerprint  # the label decides nothing
