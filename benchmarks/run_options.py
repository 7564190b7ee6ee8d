"""A run's options as one record: what it varies (seeds, overrides) and where its jobs run.

`bench run`, `bench suite`, `bench standard` and `benchmarks.api.evaluate` build these once from
their arguments; the harness and the suites pass them whole. Each is checked when it is made, so
a bad seed list or worker count is an error before any data is read.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Sequence

from benchmarks.jobs import check_gpus_per_job, job_device
from benchmarks.seeds import check_seeds


@dataclasses.dataclass(frozen=True)
class Placement:
    """Where a run's jobs run, on `device` (None: CUDA when there is one).

    They run in this process when `workers` is 1 and there is no Ray `address`. Otherwise they are Ray
    tasks, with `gpus_per_job` each."""

    device: str | None = None
    workers: int = 1
    address: str | None = None
    gpus_per_job: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        object.__setattr__(self, "gpus_per_job", check_gpus_per_job(self.gpus_per_job))
        if self.device is not None:
            object.__setattr__(self, "device", str(self.device))

    def job_device(self) -> str:
        """The device type the jobs run on (`benchmarks.jobs.job_device`); an error for GPUs not here."""
        return job_device(self.device, self.workers, self.address, self.gpus_per_job)


@dataclasses.dataclass(frozen=True)
class RunOptions:
    """One run's seeds, its model's and task's overrides, and where its jobs run.

    Overrides come from `--set model.K=V` and `--set task.K=V`. It also says whether the run prints
    progress to stderr."""

    seeds: Sequence[int] = (0,)
    model_overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    task_overrides: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    placement: Placement = Placement()
    progress: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "seeds", tuple(check_seeds(self.seeds)))
        object.__setattr__(self, "model_overrides",
                           dict(self.model_overrides or {}))  # a copy: the caller's stays theirs
        object.__setattr__(self, "task_overrides", dict(self.task_overrides or {}))
        if not isinstance(self.placement, Placement):
            raise TypeError(f"placement: expected a Placement, got {type(self.placement).__name__}")

    def replace(self, **changes: Any) -> "RunOptions":
        """These options with `changes` (checked again)."""
        return dataclasses.replace(self, **changes)
