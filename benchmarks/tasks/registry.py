"""The task registry: `@register_task(name)`, `list_tasks()`, `create_task(name, **overrides)`.

Overrides are validated against the task's `Config` dataclass with `zoo.validation.schema`. So a
typo in a hyperparameter is an error naming the task, the key and the valid keys.

A task may carry named `PRESETS`: a paper's protocol, as data. `preset=NAME` starts from one
(`--set task.preset=NAME`), and the other overrides apply on top. A task may also carry `ALIASES`,
other names for fields. An example is the generalization task's `threshold` for `min_accuracy`.
Aliases are resolved before validation, so results record the field's own name.

Tasks may live in other packages, as models do (`zoo.registry`'s plugins). They are named by an
import path `mypkg.tasks:MyTask`, or by an entry point of the group `nfnzoo.tasks`. Either is
imported only when its name is asked for. `check_task_contract` states what such a class must have."""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, TypeVar

from benchmarks.tasks.base import Task
from zoo.registry import PluginError, Registry
from zoo.validation.schema import SchemaError, from_data, to_data

TaskClass = TypeVar("TaskClass", bound=type)


def check_task_contract(name: str, cls: Any) -> None:
    """Raises `PluginError` (one line) unless `cls` is a fit `Task` subclass.

    It needs a dataclass `Config`, every field with a default, and a main metric among its `metrics`."""
    where = f"benchmark task {name!r} ({getattr(cls, '__qualname__', type(cls).__name__)})"
    if not (isinstance(cls, type) and issubclass(cls, Task)):
        raise PluginError(f"{where}: expected a subclass of benchmarks.tasks.Task, got "
                          f"{type(cls).__name__} {cls!r:.80}")
    config = getattr(cls, "Config", None)
    if config is None or not dataclasses.is_dataclass(config):
        raise PluginError(f"{where}: expected a dataclass attribute `Config`, got {type(config).__name__}")
    try:
        config()
    except TypeError as error:
        raise PluginError(f"{where}: every field of its Config needs a default ({error})") from None
    if getattr(cls, "main_metric", None) not in getattr(cls, "metrics", {}):
        raise PluginError(f"{where}: main metric {getattr(cls, 'main_metric', None)!r} is not among its metrics "
                          f"{sorted(getattr(cls, 'metrics', {}))}")


TASKS: Registry[type[Task]] = Registry("benchmark task", entry_points="nfnzoo.tasks", check=check_task_contract)


def register_task(name: str) -> Callable[[TaskClass], TaskClass]:
    """Class decorator registering a `Task` subclass under `name` (a duplicate is an error)."""

    def decorator(cls: TaskClass) -> TaskClass:
        try:
            check_task_contract(name, cls)
        except PluginError as error:
            raise TypeError(str(error)) from None
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
