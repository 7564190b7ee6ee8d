"""Benchmarks: tasks for NFN models, the harness that runs them over seeds, result plots.

`benchmarks.tasks` holds the task registry, `benchmarks.harness.run_benchmark` runs a model
on a task over seeds and writes a results JSON, and `benchmarks.plots` draws them. The
performance benchmarks of the system itself live in `benchmarks.perf`.
"""
