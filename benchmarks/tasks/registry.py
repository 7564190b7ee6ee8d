"""The task registry: `@register_task(name)`, `list_tasks()`, `create_task(name, **overrides)`.

Overrides are validated against the task's `Config` dataclass with `zoo.schema`, so a typo
in a hyperparameter is an error naming the task, the key and the valid keys.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar

from benchmarks.tasks.base import Task
from zoo.registry import Registry
from zoo.schema import from_data, to_data

TaskClass = TypeVar("TaskClass", bound=type)

TASKS: Registry[type[Task]] = Registry("benchmark task")


def register_task(name: str) -> Callable[[TaskClass], TaskClass]:
    """Class decorator registering a `Task` subclass under `name` (a duplicate is an error)."""

    def decorator(cls: TaskClass) -> TaskClass:
        if not issubclass(cls, Task):
            raise TypeError(f"task {name!r}: {cls.__name__} must subclass benchmarks.tasks.Task")
        if cls.main_metric not in cls.metrics:
            raise TypeError(f"task {name!r}: main metric {cls.main_metric!r} is not in {sorted(cls.metrics)}")
        return TASKS.register(name)(cls)

    return decorator


def list_tasks() -> list[str]:
    """The registered task names, sorted."""
    return TASKS.names()


def get_task_class(name: str) -> type[Task]:
    """The task class registered as `name` (for its metrics without building it)."""
    return TASKS.get(name)


def task_config(name: str, **overrides: Any) -> Any:
    """The validated hyperparameter dataclass of task `name` with `overrides` applied."""
    cls = TASKS.get(name)
    data = to_data(cls.Config())
    data.update(overrides)
    return from_data(cls.Config, data, where=f"task {name!r}")


def create_task(name: str, **overrides: Any) -> Task:
    """Builds task `name`; `overrides` replace its default hyperparameters."""
    config = task_config(name, **overrides)
    return TASKS.get(name)(**dataclasses.asdict(config))
