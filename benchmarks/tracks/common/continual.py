"""Continual-learning metrics from the accuracy matrix (class- or task-incremental learning).

`A[i, t]` is the test accuracy on task i after training on tasks 0..t, defined for i <= t. The
definitions follow the prompt-based continual-learning literature. They are computed as HiDe-Prompt
(Wang et al., NeurIPS 2023) and NoRGa (Le et al., NeurIPS 2024, Sec. 5) do in their code. With T
tasks, the final average accuracy is

    FAA = (1/T) sum_i A[i, T-1].

The cumulative average accuracy averages, over the T stages, the average accuracy on the tasks
seen so far:

    CAA = (1/T) sum_t (1/(t+1)) sum_{i<=t} A[i, t].

The final forgetting says how far each earlier task fell from its best (0 for a single task):

    FFM = (1/(T-1)) sum_{i<T-1} ( max_{i<=t<T-1} A[i, t] - A[i, T-1] ).

The task-identity accuracy is the share of test samples routed to their own task's prompt. The
method that infers it counts it; this matrix does not. Some learners are evaluated only after the
last task (here joint training, whose stages would cost T trainings). Their matrix has only the
last column. `summary(matrix, final_only=True)` is then their FAA alone."""

from __future__ import annotations

import numpy as np


def _checked(matrix, final_only: bool = False) -> np.ndarray:
    a = np.asarray(matrix, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] != a.shape[1] or a.shape[0] == 0:
        raise ValueError(f"the accuracy matrix must be square T x T with T >= 1, got shape {a.shape}")
    lower = np.tril_indices(a.shape[0])  # (i, t) with t <= i: transpose, since A[i, t] needs i <= t
    seen = a[:, -1] if final_only else a.T[lower]
    where = "every task i at the last stage" if final_only else "every (task i, stage t >= i)"
    if not np.all(np.isfinite(seen)) or np.any((seen < 0) | (seen > 1)):
        raise ValueError(f"the accuracy matrix must hold accuracies in [0, 1] at {where}")
    return a


def final_average_accuracy(matrix) -> float:
    a = _checked(matrix, final_only=True)
    return float(a[:, -1].mean())


def cumulative_average_accuracy(matrix) -> float:
    a = _checked(matrix)
    return float(np.mean([a[: t + 1, t].mean() for t in range(a.shape[0])]))


def final_forgetting(matrix) -> float:
    a = _checked(matrix)
    tasks = a.shape[0]
    if tasks == 1:
        return 0.0
    drops = [a[i, i:tasks - 1].max() - a[i, tasks - 1] for i in range(tasks - 1)]
    return float(np.mean(drops))


def summary(matrix, final_only: bool = False) -> dict[str, float]:
    """FAA, CAA and FFM of one accuracy matrix (FAA alone when `final_only`)."""
    if final_only:
        return {"final_average_accuracy": final_average_accuracy(matrix)}
    return {"final_average_accuracy": final_average_accuracy(matrix),
            "cumulative_average_accuracy": cumulative_average_accuracy(matrix),
            "final_forgetting": final_forgetting(matrix)}
