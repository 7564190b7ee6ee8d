"""Running a continual learner over a task sequence: the accuracy matrix and task-identity accuracy.

After learning task t, the learner predicts every test image of tasks 0..t. `A[i, t]` is its
accuracy on task i's test images. Classes range over all seen so far, so it is class-incremental.
The task-identity accuracy is the share of all test images whose predicted task is their own. It is
read after the last task, for learners that infer one.

A learner with `final_only = True` (joint training) is evaluated after the last task only. Its
matrix has only the last column. `benchmarks.tracks.common.continual` turns the matrix into FAA,
CAA and FFM."""

from __future__ import annotations

import time
from typing import Callable, Protocol

import numpy as np
import torch

from benchmarks.tracks.common.continual import summary
from benchmarks.tracks.common.incremental import Task, TaskSequence


class Learner(Protocol):
    def learn(self, task_index: int, task: Task) -> None: ...

    def predict(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]: ...


def run_sequence(learner: Learner, sequence: TaskSequence,
                 progress: Callable[[str], None] | None = None) -> dict:
    """Learns the tasks in order, and returns the matrix, the metrics, the task-identity accuracy and the wall time.

    The matrix is nested lists, NaN above the diagonal's past. The task-identity accuracy is None when
    the learner infers no task."""
    tasks = len(sequence.tasks)
    matrix = np.full((tasks, tasks), np.nan)
    start = time.perf_counter()
    identity = None
    final_only = bool(getattr(learner, "final_only", False))
    for t, task in enumerate(sequence.tasks):
        learner.learn(t, task)
        if final_only and t < tasks - 1:
            continue
        correct_tasks, total = 0, 0
        for i in range(t + 1):
            test = sequence.tasks[i].test
            classes, predicted_tasks = learner.predict(test.x)
            matrix[i, t] = float((classes == test.y).float().mean())
            if predicted_tasks is not None:
                correct_tasks += int((predicted_tasks == i).sum())
                total += len(test)
        if total:
            identity = correct_tasks / total
        if progress is not None:
            progress(f"task {t + 1}/{tasks}: average accuracy on seen tasks {np.nanmean(matrix[:t + 1, t]):.3f}")
    return {"accuracy_matrix": [[None if np.isnan(v) else float(v) for v in row] for row in matrix],
            "metrics": summary(matrix, final_only), "task_identity_accuracy": identity,
            "wall_time_s": time.perf_counter() - start}
