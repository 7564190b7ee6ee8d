"""Benchmarks: tasks for NFN models, the harness that runs them over seeds, result plots.

`benchmarks.evaluate(model, task=..., data=...)` benchmarks any model from Python
(`benchmarks.api`). `benchmarks.tasks` holds the task registry. `benchmarks.harness.run_benchmark`
runs a model on a task over seeds, and writes a results JSON. `benchmarks.check_model` checks a
model's symmetry claims, and `benchmarks.plots` draws results. The performance benchmarks of the
system itself live in `benchmarks.perf`."""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "evaluate":  # imported on first use: `import benchmarks.tasks` stays light
        from benchmarks.api import evaluate

        return evaluate
    raise AttributeError(f"module 'benchmarks' has no attribute {name!r}")
