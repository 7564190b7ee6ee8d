"""The task registry: `@register_task(name)`, `list_tasks()`, `create_task(name, **overrides)`.

Overrides are validated against the task's `Config` dataclass with `zoo.validation.schema`, so a typo
in a hyperparameter is an error naming the task, the key and the valid keys.

A task may carry named `PRESETS` (a paper's protocol, as data): `preset=NAME` starts from one
(`--set task.preset=NAME`) and the other overrides apply on top; and `ALIASES` (another name
for a field, e.g. the generalization task's `threshold` for `min_accuracy`), which are
resolved before validation, so results record the field's own name.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar

from benchmarks.tasks.base import Task
from zoo.registry import Registry
from zoo.validation.schema import SchemaError, from_data, to_data

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


def list_task_presets(name: str) -> list[str]:
    """The named presets of task `name` (its class's `PRESETS`), sorted."""
    return sorted(getattr(TASKS.get(name), "PRESETS", {}))


def task_config(name: str, **overrides: Any) -> Any:
    """The validated hyperparameter dataclass of task `name` with `overrides` applied
    (`preset=NAME` first, see the module docstring)."""
    cls = TASKS.get(name)
    for alias, field in getattr(cls, "ALIASES", {}).items():
        if alias in overrides:
            if field in overrides and overrides[field] != overrides[alias]:
                raise SchemaError(f"task {name!r}", alias, f"is another name for {field}; give one of them "
                                  f"(got {alias}={overrides[alias]!r} and {field}={overrides[field]!r})")
            overrides[field] = overrides.pop(alias)
    data = to_data(cls.Config())
    preset = overrides.pop("preset", None)
    if preset is not None:
        presets = getattr(cls, "PRESETS", {})
        if preset not in presets:
            raise SchemaError(f"task {name!r}", "preset", f"expected one of {sorted(presets) or 'no presets'}, "
                              f"got {preset!r}")
        data.update(to_data(presets[preset]))
    data.update(overrides)
    return from_data(cls.Config, data, where=f"task {name!r}")


def create_task(name: str, **overrides: Any) -> Task:
    """Builds task `name`; `overrides` replace its default hyperparameters."""
    config = task_config(name, **dict(overrides))
    return TASKS.get(name)(**dataclasses.asdict(config))
