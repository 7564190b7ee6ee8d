"""Running a relation learner over a task order: the accuracy matrix, seen-relation accuracy, memory.

After learning task t, the learner predicts every test sentence of tasks 0..t. `A[i, t]` is its
accuracy on task i's sentences, among every relation seen so far. The seen accuracy after task t is
its accuracy on all those sentences together. The continual relation-extraction papers report that
number after each task; their tables' last column is the tenth.

The task-prediction accuracy is the share of test sentences whose inferred task is their own. It
is read after the last task, for learners that infer one. The bytes a learner keeps (`kept()`) are
read after each task. A learner with `final_only` (joint training) is evaluated after the last
task only."""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from benchmarks.tracks.common.continual import summary
from benchmarks.tracks.wave.relations import RelationSequence


def run_relations(learner, sequence: RelationSequence, progress: Callable[[str], None] | None = None) -> dict:
    tasks = len(sequence.tasks)
    matrix = np.full((tasks, tasks), np.nan)
    seen_accuracy: list[float | None] = [None] * tasks
    kept: list[dict[str, int]] = []
    identity = None
    final_only = bool(getattr(learner, "final_only", False))
    start = time.perf_counter()
    for t, task in enumerate(sequence.tasks):
        learner.learn(t, task)
        kept.append(dict(learner.kept()))
        if final_only and t < tasks - 1:
            continue
        index = np.concatenate([np.asarray(sequence.tasks[i].test) for i in range(t + 1)])
        owner = np.concatenate([np.full(len(sequence.tasks[i].test), i) for i in range(t + 1)])
        relations, predicted_tasks = learner.predict(index)
        correct = relations.cpu().numpy() == sequence.labels[index]
        for i in range(t + 1):
            matrix[i, t] = float(correct[owner == i].mean())
        seen_accuracy[t] = float(correct.mean())
        if predicted_tasks is not None:
            identity = float((predicted_tasks.cpu().numpy() == owner).mean())
        if progress is not None:
            progress(f"task {t + 1}/{tasks}: accuracy on seen relations {seen_accuracy[t]:.3f}")
    metrics = dict(summary(matrix, final_only))
    metrics["final_seen_accuracy"] = seen_accuracy[-1]
    if identity is not None:
        metrics["task_identity_accuracy"] = identity
    metrics["kept_bytes"] = float(sum(v for k, v in kept[-1].items() if not k.endswith("float64_full")))
    return {"accuracy_matrix": [[None if np.isnan(v) else float(v) for v in row] for row in matrix],
            "seen_accuracy": seen_accuracy, "kept_bytes": kept, "metrics": metrics,
            "wall_time_s": time.perf_counter() - start}
