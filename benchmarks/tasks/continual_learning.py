"""The `continual-learning` task: what the continual-learning tracks report, for the leaderboard.

The tracks (`benchmarks.tracks`, `nfnzoo track run NAME`) run their studies themselves. They use
task sequences rather than zoo splits. So this task has no `run`: it is the board's description of
their results.

Its metrics are those of `benchmarks.tracks.common.continual`, from the accuracy matrix A[i, t].
The final average accuracy is required, and is the ranking metric. The cumulative average accuracy
and the final forgetting are absent for learners evaluated only after the last task, e.g. joint
training. The task-identity accuracy comes from the learners that infer a task. The
relation-extraction track adds two more. `final_seen_accuracy` is the accuracy on every seen
class's test examples together, after the last task. `kept_bytes` is the bytes kept between tasks
besides parameters: stored examples or statistics. Lower is better.

The results' dataset is the benchmark's definition (`task_config["definition"]`). That is the task
sequence, and the backbone's config and checksum. Its canonical-JSON sha256 is the dataset hash.

A board pins the cells of the T x T matrix a learner reports, as the dataset's "test metadata".
These are `definition_cells`: model_id "task{i}@stage{t}", with the task i and stage t. A
submission's predictions are those cells' accuracies. Re-scoring recomputes FAA, CAA and FFM from
them. The accuracies themselves, and the task-identity accuracy, need the model. They are taken as
reported."""

from __future__ import annotations

import hashlib
import json
from typing import Any, Mapping

import numpy as np
import pandas

from benchmarks.tasks.registry import register_task
from benchmarks.tasks.track_task import TrackTask

METRICS = {"final_average_accuracy": True, "cumulative_average_accuracy": True, "final_forgetting": False,
           "task_identity_accuracy": True, "final_seen_accuracy": True, "kept_bytes": False}


def definition_hash(definition: Mapping) -> str:
    """The sha256 of a benchmark's definition as canonical JSON: the track's dataset hash."""
    return hashlib.sha256(json.dumps(definition, sort_keys=True, ensure_ascii=True).encode()).hexdigest()


MAX_TASKS = 1_000  # a definition's declared task count (the tracks run 5 to 20): T(T+1)/2 cells are built


def declared_tasks(definition: Mapping) -> int:
    """The definition's number of tasks T, checked (an int from 1 to MAX_TASKS) before anything is built."""
    benchmark = definition.get("benchmark") if isinstance(definition, Mapping) else None
    tasks = benchmark.get("tasks") if isinstance(benchmark, Mapping) else None
    if isinstance(tasks, bool) or not isinstance(tasks, int):
        raise ValueError("the definition names no benchmark.tasks (the number of tasks, an integer)")
    if not 1 <= tasks <= MAX_TASKS:
        raise ValueError(f"the definition's benchmark.tasks must be from 1 to {MAX_TASKS:,}, got {tasks:,}")
    return tasks


def cell_id(task: int, stage: int) -> str:
    return f"task{task}@stage{stage}"


def definition_cells(definition: Mapping) -> pandas.DataFrame:
    """Every cell (task i, stage t) a learner can report for the definition's T tasks: i <= t < T."""
    tasks = declared_tasks(definition)
    rows = [(cell_id(i, t), i, t) for t in range(tasks) for i in range(t + 1)]
    return pandas.DataFrame(rows, columns=["model_id", "task", "stage"])


def matrix_predictions(matrix: np.ndarray, seed: int) -> pandas.DataFrame:
    """An accuracy matrix as predictions rows (seed, model_id, prediction): its known cells."""
    rows = [(seed, cell_id(i, t), float(matrix[i, t])) for t in range(matrix.shape[0]) for i in range(t + 1)
            if np.isfinite(matrix[i, t])]
    return pandas.DataFrame(rows, columns=["seed", "model_id", "prediction"])


@register_task("continual-learning")
class ContinualLearning(TrackTask):
    """The continual-learning tracks' results (see the module docstring); run with `nfnzoo track run`."""

    TRACKS = "norga|wave-cre"
    metrics = METRICS
    main_metric = "final_average_accuracy"
    required_metrics = ("final_average_accuracy",)
    RESCORING = ("FAA, CAA and FFM recomputed from the submitted accuracy matrix (the accuracies and the "
                 "task-identity accuracy need the model, and are taken as reported)")

    @classmethod
    def definition_cells(cls, definition: Mapping) -> pandas.DataFrame:
        return definition_cells(definition)

    @classmethod
    def cell_count(cls, definition: Mapping) -> int:
        tasks = declared_tasks(definition)
        return tasks * (tasks + 1) // 2

    @classmethod
    def predicted_cells(cls, definition: Mapping, task_config: Mapping[str, Any]) -> int:
        """Every cell, or only the last stage's T for a learner evaluated after the last task."""
        final = task_config.get("evaluation", "every-stage") == "final"
        return declared_tasks(definition) if final else cls.cell_count(definition)

    @classmethod
    def describe_protocol(cls, task_config: Mapping[str, Any]) -> str:
        benchmark = task_config.get("benchmark", {})
        return (f"track {task_config.get('track')} ({task_config.get('profile')} profile): class-incremental, "
                f"{benchmark.get('tasks')} tasks of {benchmark.get('source')}, one shared head; what a method keeps "
                "between tasks is in its config (and kept_bytes); FAA is the mean over tasks after the last")

    @classmethod
    def test_targets(cls, metadata: pandas.DataFrame, task_config: Mapping[str, Any]) -> pandas.DataFrame:
        """The matrix cells a results file reports: every (i, t <= T-1) with i <= t.

        A learner evaluated after the last task (`evaluation: final`) reports only the last stage's."""
        cells = metadata
        if task_config.get("evaluation", "every-stage") == "final":
            cells = metadata[metadata["stage"] == metadata["stage"].max()]
        return pandas.DataFrame({"model_id": cells["model_id"].astype(str).to_numpy(), "target": np.nan,
                                 "task": cells["task"].to_numpy(), "stage": cells["stage"].to_numpy()})

    @classmethod
    def score_rows(cls, expected: pandas.DataFrame, predictions: np.ndarray) -> dict[str, float]:
        from benchmarks.tracks.common.continual import summary

        tasks = int(expected["stage"].max()) + 1
        matrix = np.full((tasks, tasks), np.nan)
        matrix[expected["task"].to_numpy(dtype=int), expected["stage"].to_numpy(dtype=int)] = predictions
        final_only = bool((expected["stage"] == tasks - 1).all()) and tasks > 1
        return summary(matrix, final_only=final_only)

